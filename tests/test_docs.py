"""The documentation holds together: internal links and anchors resolve, the README's commands exist.

A user reads the README first and follows its links; a broken link or a command that no longer exists is
the first thing they meet. Code comments cite the contract as "contract §N" and must point at a section
that exists, inside the repository.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import unicodedata
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from pyruntime.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CONTRACT = ROOT / "docs" / "contract.md"

_FENCE = re.compile(r"^(```|~~~)")
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"(?<!\!)\[([^\]\n]*)\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def markdown_files() -> list[Path]:
    """Every Markdown file of the project that a reader may open (not generated or third-party trees)."""
    skip = {".git", ".venv", "node_modules", "dist", "build", ".pytest_cache"}
    found = []
    for path in ROOT.rglob("*.md"):
        rel = path.relative_to(ROOT)
        if any(part in skip or part.startswith(".venv") for part in rel.parts):
            continue
        found.append(path)
    return sorted(found)


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks, with inline code removed (links inside code are not links)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(_INLINE_CODE.sub("", line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading keeps its text
    text = text.strip().lower()
    kept = []
    for ch in text:
        if ch in " -_" or unicodedata.category(ch)[0] in "LN":
            kept.append("-" if ch == " " else ch)
    return "".join(kept)


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file's headings, with GitHub's -1, -2 suffixes for repeats."""
    seen: dict[str, int] = {}
    result = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line.strip()):
            fenced = not fenced
            continue
        match = None if fenced else _HEADING.match(line)
        if match:
            base = slug(match.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            result.add(base if n == 0 else f"{base}-{n}")
    return result


def internal_links(path: Path) -> list[tuple[str, str]]:
    """(link text, target) of every relative link in a Markdown file."""
    links = []
    for line in prose_lines(path.read_text(encoding="utf-8")):
        for text, target in _LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            links.append((text, target))
    return links


def broken_links(path: Path) -> list[str]:
    """What is wrong with the links of one file: a missing target, a missing anchor."""
    problems = []
    for text, target in internal_links(path):
        file_part, _, anchor = target.partition("#")
        destination = (path.parent / file_part).resolve() if file_part else path
        if not destination.exists():
            problems.append(f"[{text}]({target}): {file_part} does not exist")
            continue
        if anchor:
            if destination.suffix != ".md":
                problems.append(f"[{text}]({target}): an anchor into a file that is not Markdown")
            elif anchor not in anchors(destination):
                problems.append(f"[{text}]({target}): no heading #{anchor} in {destination.name}")
    return problems


def test_the_checker_finds_a_broken_link_and_a_broken_anchor(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Top\n\n## 3.1 File layout\n\n[ok](#31-file-layout) [x](b.md) [y](#nowhere)\n"
                                   "`[not](a link)`\n```\n[not](either.md)\n```\n", encoding="utf-8")
    problems = broken_links(tmp_path / "a.md")
    assert problems == ["[x](b.md): b.md does not exist", "[y](#nowhere): no heading #nowhere in a.md"]


def test_slugs_follow_github() -> None:
    assert slug("3.1 File layout") == "31-file-layout"
    assert slug("Testing a game's NPC logic without a model: the scripted model") == \
        "testing-a-games-npc-logic-without-a-model-the-scripted-model"
    assert slug("Layout — the folders are the architecture") == "layout--the-folders-are-the-architecture"
    assert slug("The command line: `coreai-runtime`") == "the-command-line-coreai-runtime"


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_internal_links_and_anchors_resolve(path: Path) -> None:
    assert broken_links(path) == []


def test_the_docs_are_linked_from_the_readme() -> None:
    linked = {(ROOT / target.partition("#")[0]).resolve() for _, target in internal_links(README)}
    docs = sorted((ROOT / "docs").rglob("*.md"))
    assert docs, "docs/ is empty"
    assert [d.relative_to(ROOT) for d in docs if d.resolve() not in linked] == []


def test_the_readme_is_a_front_door() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 150


# -- the README's commands ----------------------------------------------------------------------------


def readme_code_lines(language: str) -> list[str]:
    """The lines of the README's fenced blocks of one language, comments dropped, continuations joined."""
    lines, block = [], None
    for line in README.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            block = stripped[3:] if block is None else None
            continue
        if block == language:
            lines.append(line)
    joined = "\n".join(lines).replace("\\\n", " ")
    return [line.split("  #")[0].strip() for line in joined.splitlines() if line.strip()]


def readme_cli_commands() -> list[list[str]]:
    """Every `coreai-runtime …` command the README shows, as argv without the program name."""
    commands = []
    for line in readme_code_lines("sh"):
        argv = shlex.split(line)
        if argv and argv[0] == "coreai-runtime":
            commands.append(argv[1:])
    return commands


def test_the_readme_shows_the_cli() -> None:
    shown = {argv[0] for argv in readme_cli_commands()}
    assert {"serve", "chat", "memory", "history", "export", "import"} <= shown


@pytest.mark.parametrize("argv", readme_cli_commands(), ids=" ".join)
def test_every_cli_command_the_readme_shows_parses(argv: list[str]) -> None:
    # The real parser: a subcommand, flag or argument the README shows that no longer exists fails here.
    args = build_parser().parse_args(argv)
    assert callable(args.handler)


def test_every_cli_command_the_readme_shows_answers_help() -> None:
    script = Path(sys.executable).with_name("coreai-runtime")
    assert script.exists(), f"the console script is not installed next to {sys.executable}"
    for command in sorted({argv[0] for argv in readme_cli_commands()}):
        run = subprocess.run([str(script), command, "--help"], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, (command, run.stderr[-2000:])
        assert f"coreai-runtime {command}" in run.stdout


def test_the_two_commands_exist_and_parse() -> None:
    text = README.read_text(encoding="utf-8")
    for script in ("scripts/run.sh", "scripts/test.sh"):
        assert f"`bash {script}`" in text
        path = ROOT / script
        assert path.is_file()
        check = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert check.returncode == 0, check.stderr
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


# -- code comments point into docs/ ----------------------------------------------------------------------


def source_files() -> list[Path]:
    """The project's own source files (Python, C#, proto, shell), not generated or vendored ones."""
    found = []
    for folder in ("pyruntime", "tests", "bench", "tools", "scripts", "proto", "unity_package", ".ci"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in {".py", ".cs", ".proto", ".sh", ""} and ".venv" not in path.parts:
                found.append(path)
    return found


def texts_but_this(paths: Iterable[Path]) -> Iterator[tuple[Path, str]]:
    """(path, text) of each UTF-8 file of paths, this file left out (it names what the others must not say)."""
    here = Path(__file__).resolve()
    for path in paths:
        if path.resolve() == here:
            continue
        try:
            yield path, path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue


def test_no_source_cites_a_spec_outside_the_repository() -> None:
    outside = re.compile(r"shared/spec|shared/notes|\bspec (?:sections? )?\d|\bspec §")
    offenders = []
    for path, text in texts_but_this(source_files()):
        for number, line in enumerate(text.splitlines(), 1):
            if outside.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []


def test_contract_sections_cited_in_code_exist() -> None:
    sections = {m.group(1) for m in re.finditer(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", CONTRACT.read_text(encoding="utf-8"),
                                                re.MULTILINE)}
    assert {"1", "2", "3", "3.1", "4", "5", "6", "7", "8"} <= sections
    cited = []
    for path in source_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number in re.findall(r"contract §(\d+(?:\.\d+)?)", text):
            cited.append((path.relative_to(ROOT), number))
    assert cited, "no source cites the contract"
    assert [(p, n) for p, n in cited if n not in sections] == []



# -- no comment or doc speaks of its history by issue number --------------------------------------------

_ISSUE_CITATION = re.compile(r"\b[Ii]ssues?\s+#?\d+")
_UPSTREAM_PROJECT = re.compile(r"(llama\.cpp|upstream)\s*$", re.IGNORECASE)


def own_issue_citations(text: str) -> list[str]:
    """Where a text cites one of this project's issues by number ("issue 24"); another project's issue, named as
    such ("llama.cpp issue 27148"), is a useful reference and not one of them."""
    return [m.group(0) for m in _ISSUE_CITATION.finditer(text)
            if not _UPSTREAM_PROJECT.search(text[max(0, m.start() - 24):m.start()])]


def test_the_issue_checker_tells_the_projects_issues_from_upstream_ones() -> None:
    text = "fixed in issue 24; Issues 9 and 13 too; llama.cpp issue 27148, llama.cpp issues\n27422; upstream issue 5"
    assert own_issue_citations(text) == ["issue 24", "Issues 9"]


def test_no_comment_or_doc_cites_an_issue_number() -> None:
    # A reader needs what is true and why, not which issue asked for it: say that instead.
    paths = {*source_files(), *markdown_files(), *(ROOT / ".github").rglob("*.yml")}
    offenders = []
    for path, text in texts_but_this(sorted(paths)):
        offenders += [f"{path.relative_to(ROOT)}: {cited}" for cited in own_issue_citations(text)]
    assert offenders == []
