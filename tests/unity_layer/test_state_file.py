"""The launcher's state file (launcher.json) holds the runtime's token: only its owner may read it."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest


def _write(path: Path, token: str) -> None:
    from System import Activator, Int32, Type
    from System.Reflection import BindingFlags

    state_type = Type.GetType("CoreAI.Launcher.RuntimeState, CoreAI.Hosting")
    file_type = Type.GetType("CoreAI.Launcher.RuntimeStateFile, CoreAI.Hosting")
    state = Activator.CreateInstance(state_type, True)
    state_type.GetField("ProcessId").SetValue(state, Int32(4242))
    state_type.GetField("Token").SetValue(state, token)
    write = file_type.GetMethod("Write", BindingFlags.Public | BindingFlags.NonPublic | BindingFlags.Static)
    write.Invoke(None, [str(path), state])


@pytest.mark.skipif(os.name == "nt",
                    reason="POSIX modes; Windows gets a DACL for the user's SID (test_spawn_windows.py)")
def test_state_file_is_mode_0600_even_over_a_readable_one(assemblies: Path, tmp_path: Path) -> None:
    path = tmp_path / "launcher.json"
    old = os.umask(0o022)
    try:
        _write(path, "first-token")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        path.chmod(0o644)  # a file left by an older version
        _write(path, "second-token")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text())["token"] == "second-token"
    assert not (tmp_path / "launcher.json.tmp").exists()
