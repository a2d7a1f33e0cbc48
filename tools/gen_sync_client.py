"""Generate the blocking client `pyruntime/client/_sync.py` from the async one, `_async.py`.

The two clients had been kept in step by hand; now there is one implementation. Like httpcore's
`unasync` script, this rewrites the async source line by line: `async def/for/with` lose `async`,
`await` goes, and the async names become their blocking twins (`AsyncRuntimeClient` ->
`RuntimeClient`, `aclose` -> `close`, ...). What cannot be a plain rewrite (game-tool handlers run
concurrently in the async client, in order in the blocking one) lives in `_tools.py` as
`AsyncToolCalls` / `ToolCalls`.

    python tools/gen_sync_client.py          # write _sync.py
    python tools/gen_sync_client.py --check  # exit 1 when _sync.py is not what this script makes
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ASYNC_SOURCE = ROOT / "pyruntime" / "client" / "_async.py"
SYNC_TARGET = ROOT / "pyruntime" / "client" / "_sync.py"

HEADER = (
    '"""`RuntimeClient`: every RPC of a running runtime, over gRPC or Connect, returning the core\'s types'
    " (blocking).\n"
    "\n"
    "GENERATED from `_async.py` by `tools/gen_sync_client.py`: do not edit; edit `_async.py` and run the script.\n"
    '"""\n'
)

# Whole words, in this order.
NAMES = {
    "AsyncRuntimeClient": "RuntimeClient",
    "AsyncIterator": "Iterator",
    "AsyncGenerator": "Generator",
    "AsyncTransport": "SyncTransport",
    "async_transport": "sync_transport",
    "AsyncToolCalls": "ToolCalls",
    "aclose": "close",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
}
PHRASES = {
    "Async client of one runtime": "Blocking client of one runtime",
}
_KEYWORDS = re.compile(r"\basync (def|for|with) ")
_AWAIT = re.compile(r"\bawait ")
_NAME = re.compile(r"\b(" + "|".join(re.escape(n) for n in NAMES) + r")\b")
_FROM_IMPORT = re.compile(r"^(from \S+ import )([\w, ]+)$")
_FOR = re.compile(r"^(\s*)for (\w+) in (.+):$")


def _module_docstring_end(lines: list[str]) -> int:
    """The index of the line after the module docstring."""
    if not lines or not lines[0].startswith('"""'):
        raise SystemExit(f"{ASYNC_SOURCE} must start with its docstring")
    if lines[0].count('"""') >= 2:
        return 1
    for i in range(1, len(lines)):
        if '"""' in lines[i]:
            return i + 1
    raise SystemExit(f"unterminated docstring in {ASYNC_SOURCE}")


def unasync_line(line: str) -> str:
    """One line of async code as blocking code."""
    line = _KEYWORDS.sub(r"\1 ", line)
    line = _AWAIT.sub("", line)
    line = _NAME.sub(lambda m: NAMES[m.group(1)], line)
    for phrase, replacement in PHRASES.items():
        line = line.replace(phrase, replacement)
    return line


def _import_key(name: str) -> tuple[int, str]:
    """isort's order within one `from m import ...` (ruff's default): CONSTANTS, then Classes, then names."""
    kind = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return kind, name.lower()


def sorted_import(line: str) -> str:
    """A single-line `from m import a, b` with its names in isort's order (renames can unsort them)."""
    match = _FROM_IMPORT.match(line)
    if match is None or " as " in match.group(2):
        return line
    names = sorted((n.strip() for n in match.group(2).split(",")), key=_import_key)
    return match.group(1) + ", ".join(names)


def yield_from(lines: list[str]) -> list[str]:
    """`for x in it:` + `yield x` as its only statement becomes `yield from it` (what async code cannot say)."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        loop = _FOR.match(lines[i])
        if loop and i + 1 < len(lines):
            indent, name, iterable = loop.groups()
            body = lines[i + 1]
            after = lines[i + 2] if i + 2 < len(lines) else ""
            only_statement = not after.strip() or len(after) - len(after.lstrip()) <= len(indent)
            if body.strip() == f"yield {name}" and body.startswith(indent + " ") and only_statement:
                out.append(f"{indent}yield from {iterable}")
                i += 2
                continue
        out.append(lines[i])
        i += 1
    return out


def generate(source: str) -> str:
    """The blocking module for an async module's source."""
    lines = source.splitlines()
    body = lines[_module_docstring_end(lines):]
    out: list[str] = []
    dedent = 0  # continuation lines of a signature that lost `async `: keep them aligned under its parenthesis
    depth = 0
    for line in body:
        if dedent and depth > 0 and line.startswith(" " * (dedent + 1)):
            line = line[dedent:]
        elif depth == 0:
            dedent = 0
        if depth == 0 and re.match(r"\s*async def ", line):
            dedent = len("async ")
        code = line.split("#", 1)[0]
        depth += code.count("(") + code.count("[") - code.count(")") - code.count("]")
        out.append(sorted_import(unasync_line(line)))
        depth = max(0, depth)
    return HEADER + "\n".join(yield_from(out)) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write _sync.py, or with --check report whether it is up to date."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when _sync.py is stale")
    args = parser.parse_args(argv)
    expected = generate(ASYNC_SOURCE.read_text(encoding="utf-8"))
    if args.check:
        if SYNC_TARGET.read_text(encoding="utf-8") != expected:
            print(f"{SYNC_TARGET.relative_to(ROOT)} is stale: run python tools/gen_sync_client.py", file=sys.stderr)
            return 1
        return 0
    SYNC_TARGET.write_text(expected, encoding="utf-8")
    print(f"wrote {SYNC_TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
