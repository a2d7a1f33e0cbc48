"""Remote mode from the Unity side (compiled C# under the stub UnityEngine): the bootstrap connects to a runtime on a
URL instead of starting one — here a real `serve` over TLS (a private CA made by openssl in the test) with a token —
and a platform that can neither start processes nor has a URL fails once, naming itself and both options."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.model.test_serve_cli import RPC_ANY_PORT, Serve
from tests.support.tls import TestCertificates, make_certificates
from tests.unity.conftest import wait
from tests.unity_layer.processes import wait_for
from tests.unity_layer.test_bootstrap import _bootstrap, _call

TOKEN = "remote-token-0123456789abcdef"


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> TestCertificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def remote_runtime(tmp_path_factory: pytest.TempPathFactory, certificates: TestCertificates):
    """A runtime on a TLS listener (loopback: tests never leave the machine), stores only."""
    folder = tmp_path_factory.mktemp("remote")
    serve = Serve(folder, "--no-model", "--data-dir", str(folder / "data"), *RPC_ANY_PORT,
                  "--tls-cert", str(certificates.server_cert), "--tls-key", str(certificates.server_key),
                  env={"COREAI_RUNTIME_TOKEN": TOKEN})
    ready = serve.ready()
    yield ready, folder / "data"
    serve.process.terminate()
    serve.wait()


@pytest.fixture
def player(assemblies, tmp_path: Path):
    """A player on `platform` (set by the test), persistentDataPath under tmp; restored afterwards."""
    from UnityEngine import RuntimePlatform, StubLog, StubState

    StubState.PersistentDataPath = str(tmp_path / "persistent")
    StubState.DataPath = str(tmp_path / "Game_Data")
    StubState.IsPlaying = True
    StubState.IsEditor = False
    StubLog.Clear()
    yield StubState
    StubState.Platform = RuntimePlatform.LinuxEditor
    StubState.IsPlaying = False
    StubState.PersistentDataPath = ""


def _settings(**values):
    from CoreAI.UnityIntegration import CoreAIRuntimeSettings
    from UnityEngine import ScriptableObject

    settings = ScriptableObject.CreateInstance[CoreAIRuntimeSettings]()
    settings.RemoteConnectTimeoutSeconds = 20
    for name, value in values.items():
        setattr(settings, name, value)
    return settings


def _start(settings, events: dict):
    bootstrap = _bootstrap(settings)
    bootstrap.RuntimeReady += lambda endpoint: events.setdefault("ready", []).append(endpoint)
    bootstrap.RuntimeFailed += lambda error: events.setdefault("failed", []).append(error)
    _call(bootstrap, "Awake")
    _call(bootstrap, "OnEnable")
    return bootstrap


def _pump(bootstrap, events: dict, key: str) -> None:
    def tick() -> bool:
        _call(bootstrap, "Update")
        return bool(events.get(key))

    wait_for(tick, 60, f"{key} on the main thread")


# WebGL: test_editor_realities
@pytest.mark.parametrize("platform", ["Android", "IPhonePlayer", "PS5", "Switch", "XboxOne"])
def test_a_platform_without_processes_or_url_fails_once_naming_both_options(player, platform: str) -> None:
    from CoreAI.Launcher import RuntimeLaunchException, RuntimeLaunchFailure
    from UnityEngine import RuntimePlatform, StubLog

    player.Platform = getattr(RuntimePlatform, platform)
    events: dict = {}
    bootstrap = _start(_settings(), events)
    again = bootstrap.StartRuntime()  # a retry, another component asking: no second report
    _pump(bootstrap, events, "failed")
    for _ in range(3):
        _call(bootstrap, "Update")
    assert len(events["failed"]) == 1
    error = events["failed"][0]
    assert isinstance(error, RuntimeLaunchException) and error.Failure == RuntimeLaunchFailure.PlatformUnsupported
    assert again.IsFaulted and again.Exception.GetBaseException().Message == error.Message
    message = error.Message
    assert f"{platform} cannot start the CoreAI runtime" in message
    assert "bundle a runtime" in message and "set a remote runtime URL and token" in message
    errors = [line for line in StubLog.Lines if "cannot start the CoreAI runtime" in line]
    assert len(errors) == 1, errors
    assert bootstrap.Launcher is None and bootstrap.Endpoint is None  # nothing was spawned
    _call(bootstrap, "OnDestroy")


def test_desktop_platforms_launch_and_others_do_not(assemblies) -> None:
    from CoreAI.Launcher import RuntimePlatforms

    for name in ("WindowsPlayer", "WindowsEditor", "OSXPlayer", "OSXEditor", "LinuxPlayer", "LinuxEditor",
                 "LinuxServer", "WindowsServer", "OSXServer"):
        assert RuntimePlatforms.CanStartProcesses(name), name
    for platform in ("Android", "IPhonePlayer", "tvOS", "WebGLPlayer", "PS4", "PS5", "XboxOne", "Switch", "", None):
        assert not RuntimePlatforms.CanStartProcesses(platform), platform


def test_android_connects_to_a_remote_runtime_over_tls_with_its_token(player, remote_runtime, certificates) -> None:
    from CoreAI.Ai import RuntimeAgentMemoryStore
    from UnityEngine import RuntimePlatform

    ready, data_dir = remote_runtime
    player.Platform = RuntimePlatform.Android
    settings = _settings(RemoteUrl=f"https://localhost:{ready['connect_port']}", RemoteToken=TOKEN,
                         RemoteTrustedCertificate=certificates.ca_cert.read_text())
    events: dict = {}
    bootstrap = _start(settings, events)
    _pump(bootstrap, events, "ready")
    endpoint = events["ready"][0]
    assert endpoint.IsRemote and endpoint.ConnectBaseUrl == f"https://localhost:{ready['connect_port']}"
    assert endpoint.ProcessId == 0 and endpoint.ModelBaseUrl is None and bootstrap.Launcher is None
    client = bootstrap.CreateClient(None)
    try:
        assert wait(client.GetRoleConfigAsync("Merchant")).RoleId == "Merchant"  # needs the token
        store = RuntimeAgentMemoryStore(client)
        wait(store.AppendChatMessageAsync("Merchant", "user", "over tls"))
        history = wait(store.GetChatHistoryAsync("Merchant", 0))
        assert [m.Content for m in history] == ["over tls"]
    finally:
        client.Dispose()
    assert any(p.is_file() and p.parent.name != "runtime" for p in (data_dir / "CoreAI").rglob("*"))
    _call(bootstrap, "OnApplicationQuit")  # remote mode: nothing of ours to stop, the server runs on
    assert bootstrap.Endpoint is None
    _call(bootstrap, "OnDestroy")


@pytest.mark.parametrize(
    ("change", "failure", "text"),
    [
        ({"RemoteToken": "wrong-token-0123456789abc"}, "TokenRefused", "refused the token"),
        ({"RemoteTrustedCertificate": ""}, "RemoteUnreachable", "did not answer"),  # the system roots lack the CA
        ({"RemoteUrl": "http://game.example:13335"}, "RemoteUnreachable", "must use https://"),
        ({"RemoteToken": ""}, "TokenRefused", "needs the runtime's token"),
        ({"RemoteTrustedCertificate": "not a certificate"}, "RemoteUnreachable", "must be PEM text"),
    ],
)
def test_remote_mode_failures_name_the_cause(player, remote_runtime, certificates, change, failure, text) -> None:
    from CoreAI.Launcher import RuntimeLaunchFailure
    from UnityEngine import RuntimePlatform

    ready, _ = remote_runtime
    player.Platform = RuntimePlatform.IPhonePlayer
    values = {"RemoteUrl": f"https://localhost:{ready['connect_port']}", "RemoteToken": TOKEN,
              "RemoteTrustedCertificate": certificates.ca_cert.read_text(), "RemoteConnectTimeoutSeconds": 2}
    events: dict = {}
    bootstrap = _start(_settings(**{**values, **change}), events)
    _pump(bootstrap, events, "failed")
    error = events["failed"][0]
    assert error.Failure == getattr(RuntimeLaunchFailure, failure)
    assert text in error.Message
    assert not events.get("ready") and bootstrap.Endpoint is None
    _call(bootstrap, "OnDestroy")


def test_only_the_trusted_ca_and_the_certificates_names_are_accepted(player, remote_runtime, certificates,
                                                                      tmp_path: Path) -> None:
    """Another CA is not trusted; with the right CA, a name the certificate does not carry (127.0.0.2) is refused."""
    from CoreAI.Launcher import RemoteRuntime, RemoteRuntimeOptions, RuntimeLaunchException
    from System import TimeSpan

    ready, _ = remote_runtime
    stranger = make_certificates(tmp_path / "other-ca").ca_cert
    for host, ca, accepted in (("localhost", certificates.ca_cert, True), ("127.0.0.2", certificates.ca_cert, False),
                               ("localhost", stranger, False)):
        options = RemoteRuntimeOptions()
        options.Url, options.Token = f"https://{host}:{ready['connect_port']}", TOKEN
        options.TrustedCertificatePem = ca.read_text()
        options.ConnectTimeout = TimeSpan.FromSeconds(2)
        if accepted:
            assert RemoteRuntime(options).Connect().IsRemote
        else:
            with pytest.raises(RuntimeLaunchException, match="did not answer"):
                RemoteRuntime(options).Connect()


def test_the_memory_inspector_inspects_the_remote_runtime(player, remote_runtime, certificates) -> None:
    """In remote mode the editor's Memory Inspector connects to the same runtime as Play Mode, never starts one."""
    from CoreAI.EditorTools import MemoryInspectorWindow
    from System.Reflection import BindingFlags
    from UnityEditor import StubAssets
    from UnityEngine import ScriptableObject

    ready, _ = remote_runtime
    settings = _settings(RemoteUrl=f"https://localhost:{ready['connect_port']}", RemoteToken=TOKEN,
                         RemoteTrustedCertificate=certificates.ca_cert.read_text())
    StubAssets.ByPath["Assets/CoreAIRuntimeSettings.asset"] = settings
    flags = BindingFlags.Instance | BindingFlags.NonPublic
    window = ScriptableObject.CreateInstance[MemoryInspectorWindow]()
    try:
        wait(window.GetType().GetMethod("ConnectAsync", flags).Invoke(window, None))
        _call(window, "OnInspectorUpdate")  # the editor's tick: applies what the connection posted
        field = lambda name: window.GetType().GetField(name, flags).GetValue(window)  # noqa: E731
        assert field("status") == "Connected to the remote runtime."
        assert field("launcher") is None and field("client") is not None
        assert "Merchant" in list(field("roles"))  # listed through the remote runtime's policy
    finally:
        _call(window, "OnDisable")
        StubAssets.ByPath.Clear()
