"""The Windows branch of the spawner, checked against the Win32 contract where Linux can check it: the command line
CreateProcessW gets (split back by the CommandLineToArgvW / C runtime rules, Microsoft's documented examples first),
batch files through cmd.exe (paths with spaces, `&`, `%`, quotes), the environment block, the structures' layout in a
64-bit process, the owner-only ACL by SID. CreateProcessW itself, the handle list and the job object run only on
Windows: docs/unity.md lists them under "Verified here only by simulation"."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.usefixtures("scenarios")


def split_arguments(line: str) -> list[str]:
    """The arguments after the program name as the C runtime (2008+) and CommandLineToArgvW split them."""
    args: list[str] = []
    i, n = 0, len(line)
    while True:
        while i < n and line[i] in " \t":
            i += 1
        if i >= n:
            return args
        arg: list[str] = []
        quoted = False
        while i < n:
            c = line[i]
            if c == "\\":
                j = i
                while j < n and line[j] == "\\":
                    j += 1
                count = j - i
                if j < n and line[j] == '"':
                    arg.append("\\" * (count // 2))
                    if count % 2:
                        arg.append('"')
                        j += 1
                else:
                    arg.append("\\" * count)
                i = j
                continue
            if c == '"':
                if quoted and i + 1 < n and line[i + 1] == '"':
                    arg.append('"')  # "" inside quotes: a literal quote
                    i += 2
                    continue
                quoted = not quoted
                i += 1
                continue
            if c in " \t" and not quoted:
                break
            arg.append(c)
            i += 1
        args.append("".join(arg))


def split_command_line(line: str) -> list[str]:
    """argv[0] (up to the next quote when it starts with one, no escapes), then the arguments."""
    if line.startswith('"'):
        end = line.index('"', 1)
        return [line[1:end], *split_arguments(line[end + 1:])]
    head, _, rest = line.partition(" ")
    return [head, *split_arguments(rest)]


@pytest.mark.parametrize(("line", "expected"), [  # Microsoft's table, "Parsing C++ command-line arguments"
    ('"abc" d e', ["abc", "d", "e"]),
    (r'a\\b d"e f"g h', [r"a\\b", "de fg", "h"]),
    (r'a\\\"b c d', [r'a\"b', "c", "d"]),
    (r'a\\\\"b c" d e', [r"a\\b c", "d", "e"]),
    ('a"b"" c d', ['ab" c d']),
])
def test_the_reference_splitter_follows_microsofts_examples(line: str, expected: list[str]) -> None:
    assert split_arguments(line) == expected


TRICKY = ["", " ", "plain", "two words", "tab\there", "new\nline", 'quote"inside', '"', '\\"', "trailing\\",
          "trailing\\\\", "C:\\Program Files\\CoreAI\\", 'a\\\\"b', "back\\slash", "ünïcødé ✓", "--data-dir",
          "'single'", "&|<>^%!", "x y\\", '\\\\server\\share\\dir with space\\']


def test_every_argument_comes_back_as_it_was_given() -> None:
    from CoreAI.Tests.UnityLayer import SpawnProbe

    exe = "C:\\Program Files\\CoreAI Runtime\\coreai-runtime.exe"
    line = SpawnProbe.WindowsLine(exe, TRICKY)
    assert split_command_line(line) == [exe, *TRICKY]


@pytest.mark.parametrize(("arg", "quoted"), [
    ("plain", "plain"),
    ("", '""'),
    ("two words", '"two words"'),
    ('say "hi"', r'"say \"hi\""'),
    ("C:\\dir\\", "C:\\dir\\"),  # no space: no quotes, the backslash stays single
    ("C:\\my dir\\", '"C:\\my dir\\\\"'),  # quoted: the trailing backslash is doubled before the closing quote
    ('a\\"b', r'"a\\\"b"'),
])
def test_each_argument_is_quoted_only_where_it_must_be(arg: str, quoted: str) -> None:
    from CoreAI.Tests.UnityLayer import SpawnProbe

    assert SpawnProbe.WindowsLine("C:\\r.exe", [arg]) == f'"C:\\r.exe" {quoted}'


def _cmd_reads(line: str) -> list[str]:
    """What the program a batch file hands `%*` to receives: cmd.exe expands the %…% escape, /s strips the outer
    quotes."""
    after = line.split(" /c ", 1)[1]
    assert after.startswith('"') and after.endswith('"')
    inner = after[1:-1].replace("%%cd:~,%", "%")
    return split_command_line(inner)


def test_a_batch_file_with_spaces_runs_through_cmd_from_the_system_folder() -> None:
    from CoreAI.Tests.UnityLayer import SpawnProbe

    cmd = "C:\\Windows\\System32\\cmd.exe"
    batch = "C:\\R&D (x86)\\My Tools\\coreai-runtime.cmd"
    args = ["serve", "--data-dir", "C:\\Users\\Jo&Ann\\AppData\\LocalLow\\Studio\\Game", "--log-file",
            "C:\\100% sure\\log", 'say "hi"', "", "C:\\trailing\\", "a!b", "%PATH%"]
    line = SpawnProbe.BatchLine(cmd, batch, args)
    assert line.startswith(f'"{cmd}" /d /e:ON /v:OFF /s /c ""{batch}" ')
    assert "%" not in line.replace("%%cd:~,%", ""), "every % is escaped: no %name% can form for cmd.exe to expand"
    assert _cmd_reads(line) == [batch, *args]


@pytest.mark.parametrize(("arg", "written"), [  # the rows Rust's standard library checks for its own batch quoting
    ("two", "two"), ("C:\\path\\file", "C:\\path\\file"), ("one a", '"one a"'), ("a&b", '"a&b"'),
    ("50%", '"50%%cd:~,%"'), ("%OS%", '"%%cd:~,%OS%%cd:~,%"'), ("", '""'), ("C:\\dir\\", '"C:\\dir\\\\"'),
    ('say "hi"', '"say ""hi"""'), ("a!b", '"a!b"'),
])
def test_batch_arguments_are_written_as_cmd_needs_them(arg: str, written: str) -> None:
    from CoreAI.Tests.UnityLayer import SpawnProbe

    line = SpawnProbe.BatchLine("cmd.exe", "C:\\b.cmd", [arg])
    assert line == f'"cmd.exe" /d /e:ON /v:OFF /s /c ""C:\\b.cmd" {written}"'


def test_a_line_break_cannot_reach_a_batch_file() -> None:
    from CoreAI.Tests.UnityLayer import SpawnProbe

    with pytest.raises(Exception, match="line break"):
        SpawnProbe.BatchLine("cmd.exe", "C:\\b.cmd", ["first\r\nsecond"])


@pytest.mark.parametrize(("path", "batch"), [
    ("C:\\x\\run.cmd", True), ("C:\\x\\RUN.BAT", True), ("C:\\a b\\x.Cmd", True), ("C:\\x\\run.cmd. .", True),
    ("C:\\x\\coreai-runtime.exe", False), ("C:\\x\\run.cmdx", False), ("C:\\x\\bat", False),
])
def test_batch_files_are_known_by_their_extension_as_windows_reads_it(path: str, batch: bool) -> None:
    from CoreAI.Tests.UnityLayer import SpawnProbe

    assert SpawnProbe.IsBatch(path) == batch


def test_the_environment_block_is_sorted_without_case_and_ends_with_two_nuls() -> None:
    import os

    from CoreAI.Tests.UnityLayer import SpawnProbe

    os.environ["coreai_lower"] = "parent"
    try:
        block = SpawnProbe.WindowsEnvironment(["COREAI_RUNTIME_TOKEN=secret", "coreai_lower=child", "Zz_LAST=1",
                                               "aa_first=2"])
    finally:
        del os.environ["coreai_lower"]
    assert block.endswith("\0") and not block.endswith("\0\0"), "the writer adds the last NUL"
    entries = block[:-1].split("\0")
    names = [e.split("=", 1)[0] for e in entries]
    assert names == sorted(names, key=str.upper)
    assert "COREAI_RUNTIME_TOKEN=secret" in entries and "coreai_lower=child" in entries
    assert sum(n.upper() == "COREAI_LOWER" for n in names) == 1, "the request's value replaces the parent's"


def test_the_win32_structures_have_the_layout_windows_expects() -> None:
    from System import IntPtr
    from System.Runtime.InteropServices import Marshal

    from tests.support.internals import clr_type

    assert IntPtr.Size == 8
    startup = clr_type("CoreAI.Launcher.Kernel32+StartupInfoEx")
    assert Marshal.SizeOf(startup) == 112  # STARTUPINFOEXW
    offsets = {name: Marshal.OffsetOf(startup, name).ToInt32()
               for name in ("Flags", "ShowWindow", "StdInput", "StdError", "AttributeList")}
    assert offsets == {"Flags": 60, "ShowWindow": 64, "StdInput": 80, "StdError": 96, "AttributeList": 104}
    assert Marshal.SizeOf(clr_type("CoreAI.Launcher.Kernel32+ProcessInformation")) == 24
    assert Marshal.SizeOf(clr_type("CoreAI.Launcher.Kernel32+SecurityAttributes")) == 24
    assert Marshal.SizeOf(clr_type("CoreAI.Launcher.Kernel32+JobObjectExtendedLimits")) == 144


def test_the_owner_only_acl_names_the_user_by_sid() -> None:
    from CoreAI.Tests.UnityLayer import SpawnProbe

    sid = "S-1-5-21-3623811015-3361044348-30300820-1013"
    # protected (no inherited entries), full access, one SID
    assert SpawnProbe.OwnerOnlyDacl(sid) == f"D:P(A;;FA;;;{sid})"
    for name in ("DESKTOP-1\\Jo", "AzureAD\\JoAnn", "", "S-1-5-21-x"):
        with pytest.raises(Exception, match="not a SID"):
            SpawnProbe.OwnerOnlyDacl(name)
