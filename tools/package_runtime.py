"""Pack the frozen runtime for a release: `dist/coreai-runtime/` -> `coreai-runtime-<os>-<arch>.tar.gz` + `.sha256`.

The release workflow (.github/workflows/release.yml) runs this on each OS after tools/build_runtime.py and
tools/smoke_runtime.py; the Unity package's "Fetch Runtime" (CoreAI.Downloads.RuntimeArchive) downloads the
archive, checks it against the `.sha256` and extracts it. One format for every OS: a gzipped pax tar with the
`coreai-runtime/` folder at the top, Unix modes kept (the executable bit) and symlinks kept as links (a macOS
bundle's frameworks must stay links for its signature). The `.sha256` is `sha256sum` format: `HEX  NAME`.

Before packing, the command checks that the executables (`coreai-runtime` and `llama-server`) are native binaries of
that OS and CPU (ELF, PE or Mach-O headers): an archive named for one CPU never holds another's.

Usage: python tools/package_runtime.py [--dist dist/coreai-runtime] [--out dist/release] [--os OS] [--arch ARCH]
(OS and ARCH default to this machine's: windows|macos|linux, x64|arm64). Prints the two files' paths.
"""

from __future__ import annotations

import argparse
import hashlib
import platform
import struct
import sys
import tarfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP = "coreai-runtime"
OSES = ("windows", "macos", "linux")
ARCHES = ("x64", "arm64")
# The archives a release publishes (.github/workflows/release.yml builds one per entry, each on its own runner).
PLATFORMS = (("linux", "x64"), ("windows", "x64"), ("macos", "arm64"), ("macos", "x64"))
ENGINE = "llama-server"
# Machine numbers in the executable headers: ELF e_machine, PE Machine, Mach-O cputype.
_ELF = {0x3E: "x64", 0xB7: "arm64"}
_PE = {0x8664: "x64", 0xAA64: "arm64"}
_MACHO = {0x01000007: "x64", 0x0100000C: "arm64"}


def host_os() -> str:
    """This machine's OS as the archives name it."""
    return {"win32": "windows", "darwin": "macos"}.get(sys.platform, "linux")


def host_arch() -> str:
    """This machine's CPU as the archives name it."""
    machine = platform.machine().lower()
    return "arm64" if machine in ("arm64", "aarch64") else "x64"


def archive_name(os_name: str, arch: str) -> str:
    """`coreai-runtime-<os>-<arch>.tar.gz`."""
    if os_name not in OSES or arch not in ARCHES:
        raise ValueError(f"unknown platform {os_name}-{arch}")
    return f"coreai-runtime-{os_name}-{arch}.tar.gz"


def binary_platform(path: Path) -> tuple[str, frozenset[str]] | None:
    """The OS and CPUs a native executable is built for (a universal Mach-O has two); None if it is not one."""
    with path.open("rb") as f:
        head = f.read(4096)
    if head[:4] == b"\x7fELF" and len(head) >= 20:
        order = "<" if head[5] == 1 else ">"
        return "linux", frozenset([_ELF.get(struct.unpack_from(order + "H", head, 18)[0], "other")])
    if head[:2] == b"MZ" and len(head) >= 64:
        offset = struct.unpack_from("<I", head, 0x3C)[0]
        if head[offset:offset + 4] == b"PE\0\0":
            return "windows", frozenset([_PE.get(struct.unpack_from("<H", head, offset + 4)[0], "other")])
    if head[:4] in (b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe"):  # thin Mach-O, little-endian
        return "macos", frozenset([_MACHO.get(struct.unpack_from("<i", head, 4)[0], "other")])
    if head[:4] in (b"\xca\xfe\xba\xbe", b"\xca\xfe\xba\xbf"):  # universal Mach-O: big-endian arch table
        size = 20 if head[3] == 0xBE else 32
        count = struct.unpack_from(">I", head, 4)[0]
        cpus = [struct.unpack_from(">i", head, 8 + i * size)[0] for i in range(min(count, 16))]
        return "macos", frozenset(_MACHO.get(cpu, "other") for cpu in cpus)
    return None


def check_binaries(dist: Path, os_name: str, arch: str) -> None:
    """Raise ValueError unless the runtime's executables in `dist` are native `os_name`/`arch` binaries."""
    suffix = ".exe" if os_name == "windows" else ""
    for name in (TOP + suffix, ENGINE + suffix):
        path = dist / name
        if not path.is_file():
            if name.startswith(ENGINE):
                continue  # a runtime built without its own llama-server (it then uses one on PATH)
            raise FileNotFoundError(f"{path} is missing: run tools/build_runtime.py first")
        found = binary_platform(path)
        if found is None:
            raise ValueError(f"{path} is not a native executable")
        if found[0] != os_name or arch not in found[1]:
            raise ValueError(f"{path} is built for {found[0]}-{'+'.join(sorted(found[1]))}, not {os_name}-{arch}")


def package(dist: Path, out: Path, os_name: str, arch: str) -> tuple[Path, Path]:
    """Write the archive and its .sha256 into `out`; returns both paths."""
    exe = "coreai-runtime.exe" if os_name == "windows" else "coreai-runtime"
    if not (dist / exe).is_file():
        raise FileNotFoundError(f"{dist / exe} is missing: run tools/build_runtime.py first")
    out.mkdir(parents=True, exist_ok=True)
    archive = out / archive_name(os_name, arch)
    with tarfile.open(archive, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        tar.add(dist, arcname=TOP, recursive=False)
        for path in sorted(dist.rglob("*")):
            info = tar.gettarinfo(str(path), arcname=f"{TOP}/{path.relative_to(dist).as_posix()}")
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if path.name == exe and os_name == "windows":
                info.mode |= 0o755  # Windows has no mode bits; a Linux/macOS user unpacking it still gets an executable
            if info.isfile():
                with path.open("rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    checksum = archive.with_name(archive.name + ".sha256")
    checksum.write_text(f"{digest}  {archive.name}\n", encoding="utf-8", newline="\n")
    return archive, checksum


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dist", type=Path, default=ROOT / "dist" / TOP)
    parser.add_argument("--out", type=Path, default=ROOT / "dist" / "release")
    parser.add_argument("--os", dest="os_name", choices=OSES, default=host_os())
    parser.add_argument("--arch", choices=ARCHES, default=host_arch())
    args = parser.parse_args(argv)
    try:
        check_binaries(args.dist, args.os_name, args.arch)
        for path in package(args.dist, args.out, args.os_name, args.arch):
            print(path)
    except (FileNotFoundError, ValueError) as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
