"""Regenerate the Python code of `proto/` into `coreai/` (run after editing a .proto file).

Usage: python tools/gen_proto.py [OUT_DIR]   (default: the repository root)
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parents[1]
PROTO_DIR = ROOT / "proto"


def proto_files() -> list[Path]:
    """Every .proto file of the contract, sorted for a stable output."""
    return sorted(PROTO_DIR.rglob("*.proto"))


def connect_plugin() -> Path:
    """The `protoc-gen-connectrpc` plugin of this interpreter's environment (PATH as a fallback)."""
    found = shutil.which("protoc-gen-connectrpc", path=str(Path(sys.executable).parent)) or shutil.which(
        "protoc-gen-connectrpc")
    if not found:
        raise SystemExit("protoc-gen-connectrpc not found: install protoc-gen-connectrpc into the venv")
    return Path(found)


def generate(out_dir: Path) -> None:
    """Write *_pb2.py, *_pb2.pyi, *_pb2_grpc.py and *_connect.py (Connect, for google.protobuf) into out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    include = Path(protoc.__file__).parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_DIR}",
        f"-I{include}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        f"--plugin=protoc-gen-connectrpc={connect_plugin()}",
        f"--connectrpc_out={out_dir}",
        "--connectrpc_opt=protobuf=google",
        *[str(p.relative_to(PROTO_DIR)) for p in proto_files()],
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    for package in {p.parent.relative_to(PROTO_DIR) for p in proto_files()}:
        for part in [package, *package.parents]:
            if str(part) != ".":
                (out_dir / part / "__init__.py").touch()


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT)
