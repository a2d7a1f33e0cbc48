"""tools/package_runtime.py refuses to pack an archive named for one OS and CPU that holds another's executables: the
release builds each archive on its own runner, and a runner image that changes CPU (an Intel label served by Apple
silicon, an x64 Python under Rosetta) must fail the release instead of publishing the wrong binaries."""

from __future__ import annotations

import shutil
import struct
import tarfile
from pathlib import Path

import pytest

from tools import package_runtime
from tools.package_runtime import binary_platform, check_binaries

ROOT = Path(__file__).resolve().parents[1]
LLAMA_SERVER = ROOT / ".venv" / "bin" / "llama-server"  # a real x86-64 ELF, built by the bootstrap


def _pe(machine: int) -> bytes:
    header = bytearray(512)
    header[:2] = b"MZ"
    struct.pack_into("<I", header, 0x3C, 0x80)
    header[0x80:0x84] = b"PE\0\0"
    struct.pack_into("<H", header, 0x84, machine)
    return bytes(header)


def _macho(cputype: int) -> bytes:
    return b"\xcf\xfa\xed\xfe" + struct.pack("<i", cputype) + bytes(64)


def _universal(*cputypes: int) -> bytes:
    entries = b"".join(struct.pack(">iiIII", cpu, 0, 0, 0, 0) for cpu in cputypes)
    return b"\xca\xfe\xba\xbe" + struct.pack(">I", len(cputypes)) + entries + bytes(64)


@pytest.mark.parametrize(("content", "expected"), [
    (_pe(0x8664), ("windows", {"x64"})),
    (_pe(0xAA64), ("windows", {"arm64"})),
    (_macho(0x01000007), ("macos", {"x64"})),
    (_macho(0x0100000C), ("macos", {"arm64"})),
    (_universal(0x01000007, 0x0100000C), ("macos", {"x64", "arm64"})),
    (b"\x7fELF\x02\x01\x01" + bytes(11) + struct.pack("<H", 0xB7) + bytes(64), ("linux", {"arm64"})),
    (b"#!/bin/sh\necho not a binary\n", None),
])
def test_the_os_and_cpu_of_an_executable_come_from_its_header(tmp_path: Path, content: bytes, expected) -> None:
    path = tmp_path / "exe"
    path.write_bytes(content)
    found = binary_platform(path)
    assert (found if found is None else (found[0], set(found[1]))) == expected


def test_a_real_linux_executable_is_x64(tmp_path: Path) -> None:
    assert binary_platform(LLAMA_SERVER) == ("linux", frozenset({"x64"}))


def _dist(tmp_path: Path, runtime: bytes, engine: bytes | None, suffix: str = "") -> Path:
    dist = tmp_path / "dist" / "coreai-runtime"
    dist.mkdir(parents=True)
    (dist / ("coreai-runtime" + suffix)).write_bytes(runtime)
    if engine is not None:
        (dist / ("llama-server" + suffix)).write_bytes(engine)
    return dist


def test_an_archive_of_the_right_binaries_is_packed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    elf = LLAMA_SERVER.read_bytes()
    dist = _dist(tmp_path, elf, elf)
    out = tmp_path / "release"
    assert package_runtime.main(["--dist", str(dist), "--out", str(out), "--os", "linux", "--arch", "x64"]) == 0
    archive = out / "coreai-runtime-linux-x64.tar.gz"
    assert capsys.readouterr().out.split() == [str(archive), str(archive) + ".sha256"]
    with tarfile.open(archive) as tar:
        assert sorted(tar.getnames()) == ["coreai-runtime", "coreai-runtime/coreai-runtime",
                                          "coreai-runtime/llama-server"]
    macos = _dist(tmp_path / "mac", _universal(0x01000007, 0x0100000C), _macho(0x01000007))
    check_binaries(macos, "macos", "x64")  # a universal runtime and an x64 engine serve an Intel Mac


@pytest.mark.parametrize(("runtime", "engine", "suffix", "os_name", "arch", "message"), [
    (_macho(0x0100000C), _macho(0x0100000C), "", "macos", "x64",
     "coreai-runtime is built for macos-arm64, not macos-x64"),
    (_macho(0x01000007), _macho(0x0100000C), "", "macos", "x64",
     "llama-server is built for macos-arm64, not macos-x64"),
    (_pe(0x8664), _pe(0x8664), ".exe", "linux", "x64", "is missing"),  # a Windows build named for Linux
    (_pe(0xAA64), None, ".exe", "windows", "x64", "coreai-runtime.exe is built for windows-arm64, not windows-x64"),
    (b"#!/bin/sh\n", None, "", "linux", "x64", "is not a native executable"),
])
def test_an_archive_named_for_another_os_or_cpu_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           runtime: bytes, engine: bytes | None, suffix: str,
                                                           os_name: str, arch: str, message: str) -> None:
    dist = _dist(tmp_path, runtime, engine, suffix)
    out = tmp_path / "release"
    assert package_runtime.main(["--dist", str(dist), "--out", str(out), "--os", os_name, "--arch", arch]) == 1
    assert message in capsys.readouterr().err
    assert not out.exists()  # nothing packed


def test_the_check_needs_no_engine_but_a_runtime(tmp_path: Path) -> None:
    shutil.copy(LLAMA_SERVER, tmp_path / "coreai-runtime")
    check_binaries(tmp_path, "linux", "x64")  # a runtime without its own llama-server (it uses one on PATH)
    (tmp_path / "coreai-runtime").unlink()
    with pytest.raises(FileNotFoundError, match="run tools/build_runtime.py first"):
        check_binaries(tmp_path, "linux", "x64")
