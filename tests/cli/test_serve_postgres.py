"""`serve --store postgresql://…`: two real runtimes share one database; flags are checked before anything starts."""

from __future__ import annotations

from pathlib import Path

from pyruntime.cli import main
from pyruntime.client import RuntimeClient
from pyruntime.net.auth import read_token_file
from pyruntime.scopes import AgentMemoryScope
from pyruntime.stores import AgentMemoryPersistenceMode, open_stores
from tests.model.test_serve_cli import RPC_ANY_PORT, Serve

SCOPE = AgentMemoryScope("studio", "player-1", None, None)


def test_two_runtimes_on_one_database_see_each_others_writes(tmp_path: Path, postgres_url):
    runtimes = [Serve(tmp_path, "--no-model", "--store", postgres_url, *RPC_ANY_PORT) for _ in range(2)]
    try:
        clients = []
        for serve in runtimes:
            ready = serve.ready()
            clients.append(RuntimeClient(f"grpc://127.0.0.1:{ready['grpc_port']}",
                                         token=read_token_file(Path(ready["token_file"])), timeout=60))
        for n, client in enumerate(clients):
            assert client.apply_memory_tool("Blacksmith", {"action": "append", "content": f"via runtime {n}"},
                                            scope=SCOPE).success
            client.append_chat_message("Blacksmith", "user", f"hello from {n}", scope=SCOPE)
        for client in clients:  # each runtime reads what the other wrote
            assert client.load_state("Blacksmith", scope=SCOPE).state.memory.splitlines() == [
                "via runtime 0", "via runtime 1"]
            assert [r.content for r in client.get_transcript("Blacksmith", scope=SCOPE)] == [
                "hello from 0", "hello from 1"]
            client.close()
    finally:
        codes = [serve.stop() for serve in runtimes]
    assert codes == [0, 0]
    assert all("PostgreSQL" in serve.err and postgres_url not in serve.err for serve in runtimes)  # URL never logged
    assert not (tmp_path / "CoreAI").exists()
    database = open_stores(AgentMemoryPersistenceMode.PERSISTENT, None, database_url=postgres_url)
    try:
        assert database.scoped(SCOPE).try_load("Blacksmith").state.memory.splitlines() == [
            "via runtime 0", "via runtime 1"]
    finally:
        database.close()


def test_bad_store_flags_are_usage_errors(capsys):
    assert main(["serve", "--no-model", "--store", "mysql://x/y"]) == 2
    assert "--store must be a postgresql:// URL" in capsys.readouterr().err
    assert main(["serve", "--no-model", "--store", "postgresql://x/y", "--session-only"]) == 2
    assert "exclude each other" in capsys.readouterr().err
