"""The client and the package as a Unity player runs them (issue 28 items 3, 8, 11, 13; issue 26's timeout), through
the compiled C#: real sockets to small HTTP servers here that stand in for the runtime where only the bytes on the
wire matter (how many connections, which proxy, which timeout was sent), and the IL of builds for other platforms.

- an idle ServicePoint is replaced by an untuned one: every request is tuned again (16 connections), idle below the
  runtime's keep-alive;
- a remote runtime goes through the system's proxy, loopback never;
- a synchronous store call blocks at most 2 s, not the client's 30;
- a turn without a Timeout sends the documented DefaultTurnTimeout (5 min), not 0 (the runtime's 120 s);
- game-tool argument types need a parameterless constructor (so IL2CPP keeps it) and the sample's are [Preserve]d;
- WebGL, console, iOS and Android builds carry no kernel32/libc P/Invoke for IL2CPP to bind;
- the familiar API and the generated proto types share no type name (`using CoreAI.Ai; using CoreAI.V1;` compiles).
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.unity_layer.test_sample_blacksmith import sample  # noqa: F401 - fixture
from tools.build_csharp import (
    CLIENT,
    DEFAULT_OUT,
    HOSTING,
    PACKAGE,
    BuildError,
    build_client,
    compile_assembly,
    sources,
)

TOKEN = "transport-test-token-0123456789"


def _wait(task: Any, seconds: float = 60.0) -> Any:
    from System import TimeSpan

    try:
        task.Wait(TimeSpan.FromSeconds(seconds))
    except Exception:  # noqa: BLE001 - the AggregateException; GetResult raises the real one
        pass
    return task.GetAwaiter().GetResult()


class FakeRuntime:
    """A Connect endpoint that answers `{}` and records what it was sent; `hold` holds requests until that many are open."""

    def __init__(self, *, answer: bool = True) -> None:
        self.bodies: list[dict] = []
        self.headers: list[dict] = []
        self.open = 0
        self.most_open = 0
        self.hold = 0
        self.lock = threading.Condition()
        runtime = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the runtime

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if not answer:
                    time.sleep(60)
                    return
                with runtime.lock:
                    runtime.bodies.append(json.loads(body or b"{}"))
                    runtime.headers.append(dict(self.headers))
                    runtime.open += 1
                    runtime.most_open = max(runtime.most_open, runtime.open)
                    runtime.lock.notify_all()
                    runtime.lock.wait_for(lambda: runtime.open >= runtime.hold, timeout=5)
                    runtime.open -= 1
                reply = b"{}"
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_runtime(assemblies: Path):
    runtime = FakeRuntime()
    yield runtime
    runtime.close()


def test_an_idle_service_point_loses_no_tuning_and_idles_below_the_runtimes_keep_alive(fake_runtime: FakeRuntime) -> None:
    from CoreAI.Runtime import CoreAIRuntimeClient
    from System import Type, Uri
    from System.Net import ServicePointManager
    from System.Reflection import BindingFlags

    from pyruntime.net.limits import DEFAULT_IDLE_TIMEOUT_S

    before = ServicePointManager.MaxServicePointIdleTime
    ServicePointManager.MaxServicePointIdleTime = 300  # Unity's 100 s, shortened: idle points are dropped
    try:
        client = CoreAIRuntimeClient(fake_runtime.url, TOKEN)
        _wait(client.HealthAsync())
        time.sleep(1.5)  # idle: the tuned ServicePoint is gone; the next one has 2 connections
        fake_runtime.hold = 3  # e.g. two streaming turns and the SubmitToolResult of one of them
        calls = [client.HealthAsync() for _ in range(3)]
        for call in calls:
            _wait(call)
        assert fake_runtime.most_open == 3, "a third call waited behind two open ones"
        point = ServicePointManager.FindServicePoint(Uri(fake_runtime.url))
        assert point.ConnectionLimit >= 16 and not point.UseNagleAlgorithm and not point.Expect100Continue
        client.Dispose()
    finally:
        ServicePointManager.MaxServicePointIdleTime = before
    idle = Type.GetType("CoreAI.Runtime.HttpRequests, CoreAI.Client").GetField(
        "ConnectionIdleTime", BindingFlags.Static | BindingFlags.Public).GetValue(None)
    assert idle.TotalSeconds < DEFAULT_IDLE_TIMEOUT_S, "a kept connection must never be one the runtime is closing"
    assert point.MaxIdleTime == int(idle.TotalMilliseconds)


def test_a_remote_runtime_goes_through_the_system_proxy_and_loopback_never(fake_runtime: FakeRuntime) -> None:
    from CoreAI.Runtime import CoreAIRuntimeClient, UnavailableException
    from System import Uri
    from System.Net import WebProxy, WebRequest

    proxy = socket.socket()
    proxy.bind(("127.0.0.1", 0))
    proxy.listen()
    seen: list = []

    def accept() -> None:
        while True:
            try:
                connection, _ = proxy.accept()
            except OSError:
                return
            with connection:
                seen.append(connection.recv(4096).split(b"\r\n", 1)[0].decode())
                connection.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    threading.Thread(target=accept, daemon=True).start()
    before = WebRequest.DefaultWebProxy
    WebRequest.DefaultWebProxy = WebProxy(Uri(f"http://127.0.0.1:{proxy.getsockname()[1]}"))
    try:
        local = CoreAIRuntimeClient(fake_runtime.url, TOKEN)
        _wait(local.HealthAsync())
        remote = CoreAIRuntimeClient("https://runtime.example:13335", TOKEN)
        with pytest.raises(UnavailableException):
            _wait(remote.HealthAsync())
        assert seen == ["CONNECT runtime.example:13335 HTTP/1.1"], "a corporate network's proxy is used for a server"
    finally:
        WebRequest.DefaultWebProxy = before
        proxy.close()


def test_a_synchronous_store_call_blocks_a_frame_for_at_most_two_seconds(assemblies: Path) -> None:
    from CoreAI.Ai import RuntimeAgentMemoryStore
    from CoreAI.Runtime import CoreAIRuntimeClient, DeadlineExceededException

    from tests.support.sync_store_calls import built_in_default

    assert built_in_default().TotalSeconds == 2.0  # the product's default (tests raise it: shared machine)
    hung = FakeRuntime(answer=False)  # accepts and never answers
    try:
        client = CoreAIRuntimeClient(hung.url, TOKEN)
        store = client.CreateMemoryStore()
        store.SynchronousCallTimeout = built_in_default()
        with pytest.raises(DeadlineExceededException) as info:
            store.GetChatHistory("Smith", 0)
        assert "after 2000 ms" in info.value.Message
        client.Dispose()
    finally:
        hung.close()


def test_a_turn_without_a_timeout_sends_the_default_turn_timeout(fake_runtime: FakeRuntime) -> None:
    from CoreAI.Ai import AgentMemoryPolicy, AiTaskRequest
    from CoreAI.Runtime import CoreAIRuntimeClient
    from System import TimeSpan
    from System.Threading import Timeout

    client = CoreAIRuntimeClient(fake_runtime.url, TOKEN, AgentMemoryPolicy())
    orchestrator = client.CreateOrchestrator()
    assert orchestrator.DefaultTurnTimeout == TimeSpan.FromMinutes(5)
    request = AiTaskRequest()
    request.RoleId, request.Hint = "Merchant", "Hello"
    _wait(orchestrator.RunTaskWithResultAsync(request))
    assert fake_runtime.bodies[-1]["timeoutMs"] == 300000, "null Timeout means DefaultTurnTimeout, as documented"
    orchestrator.DefaultTurnTimeout = TimeSpan.FromSeconds(42)
    _wait(orchestrator.RunTaskWithResultAsync(request))
    assert fake_runtime.bodies[-1]["timeoutMs"] == 42000
    request.Timeout = Timeout.InfiniteTimeSpan
    _wait(orchestrator.RunTaskWithResultAsync(request))
    assert fake_runtime.bodies[-1]["timeoutMs"] == 2147483647  # "no limit", not -1 (which the runtime refuses)
    client.Dispose()


def test_tool_argument_types_need_a_parameterless_constructor_and_the_samples_are_preserved(sample: Any,  # noqa: F811
                                                                                         tmp_path: Path) -> None:
    import clr
    from CoreAI.Ai import AgentBuilder, GameTool
    from CoreAI.Samples.BlacksmithNpc import WareArgs
    from System.Reflection import GenericParameterAttributes

    for method in [clr.GetClrType(GameTool).GetMethod("Create"), *[m for m in clr.GetClrType(AgentBuilder).GetMethods()
                                                                   if m.Name == "WithTool"]]:
        [parameter] = method.GetGenericArguments()
        assert parameter.GenericParameterAttributes & GenericParameterAttributes.DefaultConstructorConstraint
    assert "PreserveAttribute" in [a.GetType().Name for a in clr.GetClrType(WareArgs).GetCustomAttributes(False)]
    # A TArgs IL2CPP could not construct no longer compiles.
    probe = tmp_path / "NoDefaultConstructor.cs"
    probe.write_text("""
using System.Threading.Tasks;
using CoreAI.Ai;
namespace Probe
{
    public sealed class OrderArgs { public OrderArgs(string item) { Item = item; } public string Item; }
    public static class Tools
    {
        public static GameTool Make() { return GameTool.Create<OrderArgs>("order", "Orders.", (a, t) => Task.FromResult(ToolResult.Ok(""))); }
    }
}
""")
    with pytest.raises(BuildError, match="CS0310"):
        compile_assembly("CoreAI.Tests.NoDefaultConstructor", [probe], tmp_path, [build_client()])


def _pinvokes(dll: Path) -> set[str]:
    il = subprocess.run(["ikdasm", str(dll)], capture_output=True, text=True, check=True).stdout
    return set(re.findall(r'pinvokeimpl\s*\(\s*"([^"]+)"', il))


WINDOWS = {"kernel32.dll", "advapi32.dll"}
LINUX = {"libc.so.6"}
MACOS = {"/usr/lib/libSystem.dylib"}


@pytest.mark.parametrize(("build", "defines", "expected"), [
    ("outside Unity", [], WINDOWS | LINUX | MACOS),
    ("Windows editor", ["UNITY_5_3_OR_NEWER", "UNITY_EDITOR", "UNITY_EDITOR_WIN", "UNITY_STANDALONE_WIN"], WINDOWS),
    ("Windows editor, Linux target", ["UNITY_5_3_OR_NEWER", "UNITY_EDITOR", "UNITY_EDITOR_WIN", "UNITY_STANDALONE_LINUX"],
     WINDOWS),
    ("Linux editor, Windows target", ["UNITY_5_3_OR_NEWER", "UNITY_EDITOR", "UNITY_EDITOR_LINUX", "UNITY_STANDALONE_WIN"], LINUX),
    ("macOS editor", ["UNITY_5_3_OR_NEWER", "UNITY_EDITOR", "UNITY_EDITOR_OSX", "UNITY_STANDALONE_OSX"], MACOS),
    ("Windows player", ["UNITY_5_3_OR_NEWER", "UNITY_STANDALONE", "UNITY_STANDALONE_WIN"], WINDOWS),
    ("macOS player", ["UNITY_5_3_OR_NEWER", "UNITY_STANDALONE", "UNITY_STANDALONE_OSX"], MACOS),
    ("Linux server", ["UNITY_5_3_OR_NEWER", "UNITY_STANDALONE", "UNITY_STANDALONE_LINUX", "UNITY_SERVER"], LINUX),
    ("WebGL", ["UNITY_5_3_OR_NEWER", "UNITY_WEBGL"], set()),
    ("iOS", ["UNITY_5_3_OR_NEWER", "UNITY_IOS"], set()),
    ("Android", ["UNITY_5_3_OR_NEWER", "UNITY_ANDROID"], set()),
    ("PS5", ["UNITY_5_3_OR_NEWER", "UNITY_PS5"], set()),
    ("Switch", ["UNITY_5_3_OR_NEWER", "UNITY_SWITCH"], set()),
])
def test_builds_carry_only_the_p_invokes_their_platform_can_bind(tmp_path: Path, build: str, defines: list,
                                                                 expected: set) -> None:
    client = compile_assembly(CLIENT, sources(PACKAGE / "Runtime" / "Client"), tmp_path, defines=defines)
    hosting = compile_assembly(HOSTING, sources(PACKAGE / "Runtime" / "Hosting"), tmp_path, [client], defines=defines)
    assert _pinvokes(client) == set(), build  # the Client runs everywhere: no native calls at all
    assert _pinvokes(hosting) == expected, build


def test_no_assembly_a_player_runs_uses_system_diagnostics_process(assemblies) -> None:
    # IL2CPP's class library has no Process.Start on desktop players (and Process is missing on mobile and consoles):
    # the launcher spawns through the OS (posix_spawn, CreateProcessW) instead, on every scripting backend.
    from tools.build_csharp import build_client, build_hosting, build_unity

    for dll in (build_client(), build_hosting(), build_unity()):
        il = subprocess.run(["ikdasm", str(dll)], capture_output=True, text=True, check=True).stdout
        used = sorted(set(re.findall(r"System\.Diagnostics\.Process\w*", il)))
        assert used == [], f"{dll.name} uses {used}"


def test_the_familiar_api_and_the_proto_types_share_no_name(assemblies: Path, tmp_path: Path) -> None:
    from System.Reflection import Assembly

    core = Assembly.LoadFrom(str(DEFAULT_OUT / "CoreAI.Client.dll"))
    names: dict[str, set[str]] = {}
    for t in core.GetExportedTypes():
        names.setdefault(t.Namespace, set()).add(t.Name)
    assert not names["CoreAI.Ai"] & names["CoreAI.V1"]
    assert not names["CoreAI.Runtime"] & names["CoreAI.V1"] and not names["CoreAI.Launcher"] & names["CoreAI.V1"]
    both = tmp_path / "BothNamespaces.cs"
    both.write_text("""
using CoreAI.Ai;
using CoreAI.V1;
namespace Probe
{
    public static class UsesBoth
    {
        public static object Make(CutReport report)
        {
            ChatMessage message = new ChatMessage();
            MemoryToolAction action = MemoryToolAction.Append;
            AgentMemoryState state = new AgentMemoryState();
            return new object[] { message, action, state, report };
        }
    }
}
""")
    assert compile_assembly("CoreAI.Tests.BothNamespaces", [both], tmp_path, [build_client()]).exists()
