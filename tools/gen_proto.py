"""Regenerate the Python code of `proto/` into `coreai/` (run after editing a .proto file).

Usage: python tools/gen_proto.py [OUT_DIR]   (default: the repository root)
"""

from __future__ import annotations

import sys
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parents[1]
PROTO_DIR = ROOT / "proto"


def proto_files() -> list[Path]:
    """Every .proto file of the contract, sorted for a stable output."""
    return sorted(PROTO_DIR.rglob("*.proto"))


def generate(out_dir: Path) -> None:
    """Write *_pb2.py, *_pb2.pyi and *_pb2_grpc.py for every proto file into out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    include = Path(protoc.__file__).parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_DIR}",
        f"-I{include}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
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
