"""`--runtime URL`: the saves CLI through a running runtime prints what it prints on the files.

One real runtime (`coreai-runtime serve --no-model`, a child process) serves its own data dir; every
command runs twice on identical saves, once on a files-only data dir and once through the runtime
over gRPC or Connect, and the two runs must print the same output (timestamps aside), exit with the
same code and leave the same documents on disk.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pyruntime.client import RuntimeClient
from pyruntime.net.auth import TOKEN_ENV
from pyruntime.scopes import AgentMemoryScope
from tests.cli.conftest import file_bundle, memory_file, memory_on_disk, seed_history
from tests.rpc.conftest import ROOT, TOKEN, RuntimeProcess, spawn_runtime
from tests.support.cli import CliRun

BASE = "Name: Alex\nClass: Mage"
TIMESTAMP_KEYS = {"Timestamp", "timestamp", "exportedAt", "exported_at"}
UNIX_SECONDS = re.compile(r"\b\d{10}\b")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RuntimeProcess]:
    """One runtime for the whole module (tests keep apart by scope); it writes its token file."""
    process = spawn_runtime(tmp_path_factory.mktemp("served"))
    yield process
    assert process.terminate() == 0


@pytest.fixture(scope="module")
def files_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The data dir the file mode works on."""
    return tmp_path_factory.mktemp("files")


@pytest.fixture(autouse=True)
def _no_token_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)


@pytest.fixture(params=["grpc", "connect"])
def transport(request: pytest.FixtureRequest) -> str:
    """Each comparison runs over both transports."""
    return str(request.param)


def runtime_url(process: RuntimeProcess, transport: str) -> str:
    """The --runtime URL of one transport."""
    if transport == "grpc":
        return f"grpc://127.0.0.1:{process.grpc_port}"
    return f"http://127.0.0.1:{process.connect_port}"


def normalized(out: str) -> Any:
    """stdout with every timestamp blanked: JSON minus the timestamp keys, text with unix seconds replaced."""
    try:
        value = json.loads(out)
    except ValueError:
        return UNIX_SECONDS.sub("<ts>", out)
    return _without_timestamps(value)


def _without_timestamps(value: Any) -> Any:
    if isinstance(value, dict):
        # A document keeps its versions as JSON text (`versionsJson`): compare what it holds.
        return {k: _without_timestamps(json.loads(v) if k.endswith("Json") and v else v)
                for k, v in value.items() if k not in TIMESTAMP_KEYS}
    if isinstance(value, list):
        return [_without_timestamps(v) for v in value]
    return value


@dataclass
class Both:
    """Runs one command on the files and through the runtime, on the same scope of identical saves."""

    cli: Any
    files: Path
    served: RuntimeProcess
    url: str
    user: str

    @property
    def scope(self) -> AgentMemoryScope:
        return AgentMemoryScope("t", self.user)

    @property
    def flags(self) -> list[str]:
        return ["--tenant", "t", "--user", self.user]

    def run(self, *argv: object, scoped: bool = True) -> tuple[CliRun, CliRun]:
        """(file run, runtime run) of `coreai-runtime ARGV`, each on its own data dir."""
        scope = self.flags if scoped else []
        on_files = self.cli(*argv, "--data-dir", self.files, *scope)
        through = self.cli(*argv, "--runtime", self.url, "--data-dir", self.served.data_dir, *scope)
        return on_files, through

    def same(self, *argv: object, rc: int = 0, scoped: bool = True) -> CliRun:
        """Run both ways; assert equal exit codes (== rc) and equal output; the runtime's run."""
        on_files, through = self.run(*argv, scoped=scoped)
        assert (on_files.rc, through.rc) == (rc, rc), (on_files, through)
        assert normalized(through.out) == normalized(on_files.out)
        return through

    def same_document(self, role: str, actor: str | None = None, scope: AgentMemoryScope | None = None) -> None:
        """The memory document of (scope, actor, role) is the same in both data dirs (timestamps aside)."""
        docs = [json.loads(memory_file(d, role, scope or self.scope, actor).read_text(encoding="utf-8"))
                for d in (self.files, self.served.data_dir)]
        assert _without_timestamps(docs[1]) == _without_timestamps(docs[0])


@pytest.fixture
def both(cli, files_dir: Path, served: RuntimeProcess, transport: str) -> Both:
    """A fresh user scope per test, on both data dirs."""
    return Both(cli, files_dir, served, runtime_url(served, transport), f"u-{uuid.uuid4().hex[:12]}")


# -- memory actions, versions, revert, diff ---------------------------------------------------------------


MUTATIONS = [
    ["append", "--content", "Level: 3"],
    ["str_replace", "--old-text", "Mage", "--new-text", "Rogue"],
    ["str_replace", "--old-text", "e", "--new-text", "E", "--replace-all"],
    ["insert", "--line", "2", "--content", "Age: 30"],
    ["insert", "--anchor", "NamE", "--content", "Home: Vale"],
    ["delete", "--old-text", "\nAge: 30"],
    ["rename", "--old-text", "Class", "--new-text", "Job"],
    ["rename", "--old-text", "Job", "--new-text", "Job"],  # nothing changes: success without a new version
    ["clear"],
    ["write", "--content", BASE],
]

REFUSALS = [
    ["str_replace", "--old-text", "Warrior", "--new-text", "x"],
    ["str_replace", "--new-text", "x"],
    ["insert", "--line", "0", "--content", "x"],
    ["write"],
    ["rename", "--old-text", "Nope", "--new-text", "x"],
    ["delete", "--old-text", "absent"],
]


def test_every_memory_action_prints_and_writes_what_the_files_do(both: Both) -> None:
    first = both.same("memory", "write", "--role", " Creator ", "--content", BASE)
    assert first.json()["Memory"] == BASE
    both.same("memory", "read", "--role", "Creator")
    for action, *flags in MUTATIONS:
        through = both.same("memory", action, "--role", "Creator", *flags)
        assert through.json()["Success"] is True
        both.same_document("Creator")
    assert memory_on_disk(both.served.data_dir, "Creator", both.scope) == BASE
    version = through.json()["Version"]
    assert version == len(MUTATIONS)  # the first write, then every mutation but the no-op rename
    for action, *flags in REFUSALS:
        through = both.same("memory", action, "--role", "Creator", *flags, rc=1)
        assert through.json()["Success"] is False and through.json()["Version"] == version
    both.same_document("Creator")
    # Actors and a role without a save.
    both.same("memory", "append", "--role", "AINpc", "--actor", "Smith", "--content", "Owes 5 gold")
    both.same_document("AINpc", "Smith")
    assert both.same("memory", "read", "--role", "Merchant").json()["Version"] == 0


def test_the_size_limit_is_a_failed_result_with_the_unchanged_version(both: Both) -> None:
    both.same("memory", "write", "--role", "AINpc", "--content", "short")
    refused = both.same("memory", "write", "--role", "AINpc", "--content", "x" * 16001, rc=1)
    assert refused.json()["Version"] == 1 and refused.json()["MemoryLength"] == 5
    assert "16000" in refused.json()["Error"]
    assert memory_on_disk(both.served.data_dir, "AINpc", both.scope) == "short"
    big = both.same("memory", "write", "--role", "Teacher", "--content", "y" * 16001, rc=1)
    assert (big.json()["Version"], big.json()["MemoryLength"]) == (0, 0)
    assert not memory_file(both.served.data_dir, "Teacher", both.scope).exists()


def test_versions_revert_and_diff_print_what_the_files_do(both: Both, caplog: pytest.LogCaptureFixture) -> None:
    both.same("memory", "write", "--role", "Creator", "--content", BASE)
    both.same("memory", "str_replace", "--role", "Creator", "--old-text", "Mage", "--new-text", "Rogue")
    both.same("memory", "versions", "--role", "Creator")
    listed = both.same("memory", "versions", "--role", "Creator", "--json").json()
    assert [v["Version"] for v in listed] == [1, 2]
    assert both.same("memory", "diff", "1", "2", "--role", "Creator").out.startswith("--- version 1")
    both.same("memory", "diff", "1", "2", "--role", "Creator", "--json")
    assert both.same("memory", "diff", "2", "2", "--role", "Creator").out == ""
    assert both.same("memory", "revert", "1", "--role", "Creator").json()["Version"] == 3
    both.same_document("Creator")
    # Refusals: an unknown version (failed result with the current version), no save at all (0, 0).
    unknown = both.same("memory", "revert", "9", "--role", "Creator", rc=1).json()
    assert (unknown["Version"], unknown["MemoryLength"]) == (3, len(BASE)) and "9" in unknown["Error"]
    nothing = both.same("memory", "revert", "1", "--role", "Merchant", rc=1).json()
    assert (nothing["Version"], nothing["Success"]) == (0, False)
    caplog.clear()
    assert both.same("memory", "diff", "1", "9", "--role", "Creator", rc=1).out == ""
    on_files, through = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert through == on_files and on_files.startswith("NotFoundError: version(s) 9 not retained")
    assert both.same("memory", "versions", "--role", "Merchant", "--json").json() == []
    both.same_document("Creator")


def test_an_unreadable_document_fails_the_same_way_and_is_not_overwritten(both: Both) -> None:
    both.same("memory", "write", "--role", "Creator", "--content", "keep me")
    for data_dir in (both.files, both.served.data_dir):
        memory_file(data_dir, "Creator", both.scope).write_text("{torn", encoding="utf-8")
    for argv in (["read"], ["append", "--content", "x"], ["write", "--content", "x"]):
        result = both.same("memory", *argv, "--role", "Creator", rc=1).json()
        assert result["Success"] is False and (result["Version"], result["MemoryLength"]) == (0, 0)
    assert both.same("memory", "revert", "1", "--role", "Creator", rc=1).json()["Success"] is False
    assert both.same("memory", "versions", "--role", "Creator", rc=1).out == ""
    assert memory_file(both.served.data_dir, "Creator", both.scope).read_text(encoding="utf-8") == "{torn"


# -- history ------------------------------------------------------------------------------------------------


def test_history_show_and_clear_print_and_clear_what_the_files_do(both: Both) -> None:
    for data_dir in (both.files, both.served.data_dir):
        seed_history(data_dir, both.scope)
    both.same("memory", "write", "--role", "SmartChat", "--content", "Name: Alex")
    shown = both.same("history", "show", "--role", "SmartChat", "--json").json()
    assert [row["content"] for row in shown["history"]][-1] == "Nice to meet you,\nAlex!"
    assert both.same("history", "show", "--role", "SmartChat").out.startswith("## Conversation Summary\n")
    assert len(both.same("history", "show", "--role", "SmartChat", "--max", "1", "--json").json()["history"]) == 1
    cleared = both.same("history", "clear", "--role", "SmartChat").json()
    assert cleared == {"Success": True, "ClearedRows": 4, "SummaryCleared": True}
    view = file_bundle(both.served.data_dir).scoped(both.scope)
    assert (view.get_transcript("SmartChat"), view.load_summary("SmartChat")) == ([], None)
    assert memory_on_disk(both.served.data_dir, "SmartChat", both.scope) == "Name: Alex"
    assert both.same("history", "show", "--role", "SmartChat", "--json").json() == {"summary": None, "history": []}


def test_history_through_the_runtime_sees_its_process_only_messages(both: Both) -> None:
    with RuntimeClient(both.url, token=TOKEN) as client:
        client.append_chat_message("PlainChat", "user", "not on disk", persist=False, scope=both.scope)
    on_files, through = both.run("history", "show", "--role", "PlainChat", "--json")
    assert on_files.json()["history"] == []  # the files never saw it
    assert [row["content"] for row in through.json()["history"]] == ["not on disk"]
    assert both.cli("history", "clear", "--role", "PlainChat", "--runtime", both.url, "--data-dir",
                    both.served.data_dir, *both.flags).json()["ClearedRows"] == 1
    with RuntimeClient(both.url, token=TOKEN) as client:
        assert client.get_chat_history("PlainChat", scope=both.scope) == []


# -- export / import -----------------------------------------------------------------------------------------


def test_export_and_import_print_and_write_what_the_files_do(both: Both, tmp_path: Path) -> None:
    for data_dir in (both.files, both.served.data_dir):
        seed_history(data_dir, both.scope)
    both.same("memory", "write", "--role", "SmartChat", "--content", "Name: Alex")
    both.same("memory", "append", "--role", "BlacksmithNPC", "--actor", "Smith", "--content", "Owes 5 gold")
    both.same("memory", "write", "--role", "Merchant", "--content", "Sells swords")

    assert both.same("export", "--out", tmp_path, rc=2).out == ""  # --out is a directory: refused alike
    outs = [tmp_path / "files.json", tmp_path / "served.json"]
    for out, flag_dir in zip(outs, (["--data-dir", both.files], ["--runtime", both.url, "--data-dir",
                                                                  both.served.data_dir]), strict=True):
        run = both.cli("export", "--out", out, "--role", "SmartChat", "--role", "BlacksmithNPC", "--actor", "local",
                       "--actor", "Smith", *flag_dir, *both.flags)
        assert (run.rc, run.json()) == (0, {"Success": True, "RolesExported": 2})
    snapshots = [json.loads(p.read_text(encoding="utf-8")) for p in outs]
    assert _without_timestamps(snapshots[1]) == _without_timestamps(snapshots[0])
    assert sorted(r["roleId"] for r in snapshots[1]["roles"]) == ["BlacksmithNPC", "SmartChat"]

    # The default roles are the policy's (Merchant is one, SmartChat another).
    default_outs = [tmp_path / "all-files.json", tmp_path / "all-served.json"]
    assert both.cli("export", "--out", default_outs[0], "--data-dir", both.files, *both.flags).rc == 0
    assert both.cli("export", "--out", default_outs[1], "--runtime", both.url, "--data-dir", both.served.data_dir,
                    *both.flags).rc == 0
    defaults = [json.loads(p.read_text(encoding="utf-8")) for p in default_outs]
    assert _without_timestamps(defaults[1]) == _without_timestamps(defaults[0])

    # Import the first snapshot into another user: the same answer and the same documents.
    into = ["--into-tenant", "t", "--into-user", f"{both.user}-copy"]
    imported = both.same("import", outs[0], *into, scoped=False)
    assert imported.json() == {"Success": True, "RolesImported": 2}
    copy = AgentMemoryScope("t", f"{both.user}-copy")
    both.same_document("SmartChat", scope=copy)
    both.same_document("BlacksmithNPC", "Smith", scope=copy)
    assert memory_on_disk(both.served.data_dir, "BlacksmithNPC", copy, "Smith") == "Owes 5 gold"
    shown = both.same("history", "show", "--role", "SmartChat", "--tenant", "t", "--user", f"{both.user}-copy",
                      "--json", scoped=False).json()
    assert shown["summary"] == "- user: hello"


def test_a_bad_snapshot_is_refused_before_the_runtime_is_asked(both: Both, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"formatVersion": 1, "roles": [{"roleId": "  "}]}', encoding="utf-8")
    before = sorted(p.name for p in (both.served.data_dir / "CoreAI").rglob("*"))
    assert [r.rc for r in both.run("import", bad, "--into-user", "u2", scoped=False)] == [2, 2]
    assert [r.rc for r in both.run("import", tmp_path / "missing.json", scoped=False)] == [2, 2]
    assert sorted(p.name for p in (both.served.data_dir / "CoreAI").rglob("*")) == before


# -- connecting: tokens, unreachable runtimes, bad flags ---------------------------------------------------------


def test_the_token_comes_from_token_file_or_the_environment(both: Both, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n", encoding="utf-8")
    run = both.cli("memory", "append", "--role", "Creator", "--content", "via file", "--runtime", both.url,
                   "--token-file", token_file, *both.flags)
    assert run.rc == 0, run
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    run = both.cli("memory", "append", "--role", "Creator", "--content", "via env", "--runtime", both.url,
                   *both.flags)
    assert run.rc == 0, run
    assert memory_on_disk(both.served.data_dir, "Creator", both.scope) == "via file\nvia env"


def test_a_wrong_token_exits_2_names_the_token_and_changes_nothing(both: Both, tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    both.same("memory", "write", "--role", "Creator", "--content", BASE)
    token_file = tmp_path / "token"
    token_file.write_text("wrong-token-0123456789", encoding="utf-8")
    before = memory_file(both.served.data_dir, "Creator", both.scope).read_bytes()
    for argv in (["memory", "write", "--role", "Creator", "--content", "x"], ["history", "clear", "--role", "Creator"]):
        caplog.clear()
        run = both.cli(*argv, "--runtime", both.url, "--token-file", token_file, *both.flags)
        assert (run.rc, run.out) == (2, "")
        assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == [
            f"the runtime refused the token (missing or wrong): give --token-file, set {TOKEN_ENV}, or use "
            "the token file of the running runtime"]
    assert memory_file(both.served.data_dir, "Creator", both.scope).read_bytes() == before


def test_a_missing_token_is_bad_input(cli, served: RuntimeProcess, tmp_path: Path,
                                      caplog: pytest.LogCaptureFixture) -> None:
    url = runtime_url(served, "grpc")
    run = cli("memory", "read", "--role", "Creator", "--runtime", url)
    assert (run.rc, run.out) == (2, "")
    assert any("--runtime needs a token" in r.getMessage() for r in caplog.records)
    run = cli("memory", "read", "--role", "Creator", "--runtime", url, "--data-dir", tmp_path)  # no token file there
    assert (run.rc, run.out) == (2, "")
    assert any("token file cannot be read" in r.getMessage() for r in caplog.records)
    assert list(tmp_path.iterdir()) == []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("scheme", ["grpc", "http"])
def test_an_unreachable_runtime_is_one_clear_line_and_exit_1(cli, tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                             scheme: str) -> None:
    url = f"{scheme}://127.0.0.1:{_free_port()}"
    run = cli("memory", "write", "--role", "Creator", "--content", "x", "--runtime", url, "--token-file",
              _token_file(tmp_path))
    assert (run.rc, run.out) == (1, "")
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors == [f"the runtime at {url} is not reachable (UNAVAILABLE); is the game running on that port?"]


def _token_file(folder: Path) -> Path:
    path = folder / "token"
    path.write_text(TOKEN, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["memory", "write", "--content", "x", "--max-memory-chars", "10"], "--max-memory-chars applies to the files"),
        (["memory", "read", "--runtime", "ftp://127.0.0.1:1"], "runtime URL must be grpc://HOST:PORT"),
        (["memory", "read", "--role", " "], "role_id is required"),
    ],
)
def test_bad_flags_with_runtime_exit_2(cli, served: RuntimeProcess, tmp_path: Path,
                                       caplog: pytest.LogCaptureFixture, argv: list[str], message: str) -> None:
    if "--role" not in argv:
        argv = [*argv, "--role", "Creator"]
    if "--runtime" not in argv:
        argv = [*argv, "--runtime", runtime_url(served, "connect")]
    run = cli(*argv, "--token-file", _token_file(tmp_path), "--user", "bad-flags")
    assert (run.rc, run.out) == (2, "")
    assert any(message in r.getMessage() for r in caplog.records)
    assert not memory_file(served.data_dir, "Creator", AgentMemoryScope(user_id="bad-flags")).exists()


def test_without_runtime_the_data_dir_is_required(cli, caplog: pytest.LogCaptureFixture) -> None:
    run = cli("memory", "read", "--role", "Creator")
    assert (run.rc, run.out) == (2, "")
    assert any("--data-dir is required (or --runtime URL" in r.getMessage() for r in caplog.records)


def test_as_a_real_process_errors_are_one_line(served: RuntimeProcess, tmp_path: Path) -> None:
    wrong = tmp_path / "wrong"
    wrong.write_text("wrong-token-0123456789", encoding="utf-8")
    cases = [
        (["--runtime", runtime_url(served, "grpc"), "--token-file", wrong], 2, "refused the token"),
        (["--runtime", f"http://127.0.0.1:{_free_port()}", "--token-file", wrong], 1, "not reachable"),
        (["--runtime", runtime_url(served, "connect"), "--data-dir", served.data_dir], 0, ""),
    ]
    for flags, rc, message in cases:
        done = subprocess.run(
            [sys.executable, "-m", "pyruntime.cli", "memory", "read", "--role", "Creator", "--user", "proc",
             *map(str, flags)],
            cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
        assert done.returncode == rc, done.stderr
        if rc:
            assert done.stdout == "" and "Traceback" not in done.stderr
            assert len(done.stderr.strip().splitlines()) == 1 and message in done.stderr
        else:
            assert json.loads(done.stdout)["Memory"] == ""
