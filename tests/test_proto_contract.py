"""The generated Python code of proto/ must match what grpcio-tools produces now."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_generated_code_is_current(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(ROOT / "tools" / "gen_proto.py"), str(tmp_path)], check=True)
    fresh = sorted(p.relative_to(tmp_path) for p in (tmp_path / "coreai").rglob("*") if p.is_file())
    committed = sorted(p.relative_to(ROOT) for p in (ROOT / "coreai").rglob("*")
                       if p.is_file() and "__pycache__" not in p.parts)
    assert fresh == committed, "coreai/ is stale: run `python tools/gen_proto.py`"
    stale = [str(p) for p in fresh if (tmp_path / p).read_bytes() != (ROOT / p).read_bytes()]
    assert not stale, f"stale generated files (run `python tools/gen_proto.py`): {stale}"


def test_every_request_carries_a_target() -> None:
    from coreai.v1 import memory_store_pb2, orchestrator_pb2

    for module in (memory_store_pb2, orchestrator_pb2):
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                assert not method.client_streaming, "only unary and server-streaming RPCs"
                fields = method.input_type.fields_by_name
                if method.name in {"ListRoles", "Health", "GetRoleConfig", "ConfigureRole", "Shutdown"}:
                    continue
                if method.name == "SubmitToolResult":  # names its call by the turn id the stream handed out
                    assert {"turn_id", "call_id"} <= set(fields)
                    continue
                if method.name in {"ExportSnapshot", "ImportSnapshot", "ForgetPlayer"}:  # a scope's saves
                    assert "scope" in fields or "snapshot" in fields
                    continue
                assert "target" in fields, f"{service.name}.{method.name} request has no target"
