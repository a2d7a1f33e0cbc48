"""The editor's runtime (kept across Play/Stop) and a built player of the same game share persistentDataPath but
never block each other: the editor instance has its own state folder and ports."""

from __future__ import annotations

import json
from pathlib import Path

from tests.unity.conftest import wait
from tests.unity_layer.conftest import free_ports
from tests.unity_layer.processes import is_alive, wait_for


def _ports_with_editor_room() -> list[int]:
    from CoreAI.Launcher import RuntimeLaunchOptions

    offset = RuntimeLaunchOptions.EditorPortOffset
    while True:
        ports = free_ports(3)
        shifted = [p + offset for p in ports]
        if all(p < 65536 for p in shifted) and set(shifted) & set(ports) == set():
            import socket

            ok = True
            for port in shifted:
                with socket.socket() as s:
                    try:
                        s.bind(("127.0.0.1", port))
                    except OSError:
                        ok = False
            if ok:
                return ports


def test_editor_and_player_runtimes_run_side_by_side(make_options, launchers, tmp_path: Path) -> None:
    from CoreAI.Launcher import RuntimeLauncher
    from System import TimeSpan

    data_dir = tmp_path / "persistent"  # one persistentDataPath, as for an editor and a player of one game
    connect, grpc, model = _ports_with_editor_room()
    editor_options = make_options(data_dir, ConnectPort=connect, GrpcPort=grpc, ModelPort=model,
                                  ProjectId="editor-id").UseEditorInstance()
    player_options = make_options(data_dir, ConnectPort=connect, GrpcPort=grpc, ModelPort=model,
                                  ProjectId="player-id")
    editor = RuntimeLauncher(editor_options)
    launchers.append(editor)
    editor_endpoint = editor.Start()
    player = RuntimeLauncher(player_options)  # before: "a runtime started by another project ... is running"
    launchers.append(player)
    player_endpoint = player.Start()

    assert editor_endpoint.ProcessId != player_endpoint.ProcessId and not player.Reused
    assert player_endpoint.ConnectPort == connect and editor_endpoint.ConnectPort == connect + 100
    runtime = data_dir / "CoreAI" / "runtime"
    assert json.loads((runtime / "launcher.json").read_text())["pid"] == player_endpoint.ProcessId
    assert json.loads((runtime / "editor" / "launcher.json").read_text())["pid"] == editor_endpoint.ProcessId
    for launcher in (editor, player):
        client = launcher.CreateClient(None)
        assert wait(client.GetRoleConfigAsync("Merchant")).RoleId == "Merchant"  # both serve the same saves
        client.Dispose()

    # Deleting the saves (editor menu) stops both runtimes that use them.
    pids = [editor_endpoint.ProcessId, player_endpoint.ProcessId]
    editor.Detach()
    player.Detach()
    assert RuntimeLauncher.StopRecorded(str(data_dir), TimeSpan.FromSeconds(10))
    wait_for(lambda: not any(is_alive(p) for p in pids), 15, "both runtimes to stop")
