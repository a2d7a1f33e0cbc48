"""Pure operations on the memory document, one per `memory` action (contract §1).

Edits are exact and case-sensitive. Each operation returns a `DocumentEdit` (the new text and what
happened) or raises a `MemoryEditError` whose message is the spec's error, ready for the model.
Arguments an action does not use are ignored; the ones it uses are checked strictly.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass

from pyruntime.errors import InvalidArgumentError
from pyruntime.memory.actions import MemoryToolArgs, unknown_action_message

CLOSEST_LINES_LIMIT = 3
_HINT_LINE_CHARS = 160
_MIN_SIMILARITY = 0.5
# An optional indent, then an optional markdown-style `#` marker: what may precede a leading label.
_LABEL_PREFIX = re.compile(r"[ \t]*(?:#+[ \t]*)?")


class MemoryEditError(InvalidArgumentError):
    """An edit cannot be applied as asked (missing argument, bad line number); nothing changes."""


class TextNotFoundError(MemoryEditError):
    """old_text, anchor or a label is not in the document; `closest` holds the most similar lines."""

    def __init__(self, message: str, closest: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.closest = closest


@dataclass(frozen=True)
class DocumentEdit:
    """The outcome of one operation: the new text, whether it differs, and a short account of what happened."""

    text: str
    changed: bool
    detail: str


def _edit(before: str, after: str, detail: str) -> DocumentEdit:
    return DocumentEdit(text=after, changed=after != before, detail=detail)


def _required(value: str | None, name: str, action: str) -> str:
    """value, or the spec's `<name> is required for <action> action` when it is missing or blank."""
    if value is None or not value.strip():
        raise MemoryEditError(f"{name} is required for {action} action")
    return value


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def closest_lines(document: str, needle: str, limit: int = CLOSEST_LINES_LIMIT) -> tuple[str, ...]:
    """The existing lines most similar to needle (best first), so a model can correct a near miss."""
    target = needle.strip()
    if not target:
        return ()
    scored: list[tuple[float, int, str]] = []
    seen: set[str] = set()
    for index, raw in enumerate(document.split("\n")):
        line = raw.strip()
        # A hint line with DONE would let a failure look like a success (contract §1: failures never contain DONE).
        if not line or line in seen or "DONE" in line:
            continue
        seen.add(line)
        matcher = difflib.SequenceMatcher(None, target, line, autojunk=False)
        score = matcher.ratio()
        if len(line) > len(target):
            # A short needle inside a long line: how much of the needle the line holds in one piece.
            match = matcher.find_longest_match(0, len(target), 0, len(line))
            score = max(score, match.size / len(target))
        if score >= _MIN_SIMILARITY:
            scored.append((score, index, line))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return tuple(line for _, _, line in scored[:limit])


def _clip(line: str) -> str:
    return line if len(line) <= _HINT_LINE_CHARS else line[: _HINT_LINE_CHARS - 1] + "…"


def _not_found(what: str, document: str, needle: str) -> TextNotFoundError:
    """`<what> was not found in memory`, plus the closest existing lines when there are any."""
    message = f"{what} was not found in memory"
    if not document.strip():
        return TextNotFoundError(f"{message} (memory is empty).")
    closest = closest_lines(document, needle)
    if closest:
        listed = ", ".join(json.dumps(_clip(line), ensure_ascii=False) for line in closest)
        return TextNotFoundError(f"{message}. Closest existing lines: [{listed}]. Edits are exact and case-sensitive.",
                                 closest)
    return TextNotFoundError(f"{message}; no similar line exists. Edits are exact and case-sensitive.")


def _join_at_end(document: str, content: str) -> str:
    """Empty document -> content; else document + newline + content."""
    return content if not document else f"{document}\n{content}"


def write(document: str, content: str | None, new_text: str | None = None) -> DocumentEdit:
    """Replace the document with content (fallback new_text); blank is an error (use clear)."""
    text = _required(content if content is not None else new_text, "content", "write")
    return _edit(document, text, "memory written")


def append(document: str, content: str | None, new_text: str | None = None) -> DocumentEdit:
    """Add content (fallback new_text) on a new line, unless an existing line (trimmed) already equals it."""
    text = _required(content if content is not None else new_text, "content", "append")
    wanted = text.strip()
    if any(line.strip() == wanted for line in document.split("\n")):
        return DocumentEdit(text=document, changed=False, detail="content already exists in memory; nothing was added")
    return _edit(document, _join_at_end(document, text), "content appended")


def clear(document: str) -> DocumentEdit:
    """Set the document to the empty string."""
    return _edit(document, "", "memory cleared")


def str_replace(document: str, old_text: str | None, new_text: str | None, content: str | None = None,
                replace_all: bool = False) -> DocumentEdit:
    """Replace the first exact old_text (every one with replace_all) with new_text (fallback content)."""
    if not old_text:
        raise MemoryEditError("old_text is required for str_replace action")
    replacement = new_text if new_text is not None else content
    if replacement is None:
        raise MemoryEditError('new_text is required for str_replace action (use "" to remove old_text)')
    count = document.count(old_text)
    if count == 0:
        raise _not_found("old_text", document, old_text)
    done = count if replace_all else 1
    after = document.replace(old_text, replacement, -1 if replace_all else 1)
    return _edit(document, after, f"replaced {_plural(done, 'occurrence')} of old_text")


def insert(document: str, content: str | None, line: int | None = None, anchor: str | None = None) -> DocumentEdit:
    """Insert content before the 1-based line, else on a new line after the first with anchor, else at the end."""
    text = _required(content, "content", "insert")
    if line is not None:
        if isinstance(line, bool) or not isinstance(line, int) or line <= 0:
            raise MemoryEditError("line must be a 1-based positive line number")
        lines = document.split("\n") if document else []
        if line > len(lines):
            detail = f"line {line} is past the end ({_plural(len(lines), 'line')}); content appended at the end"
            return _edit(document, _join_at_end(document, text), detail)
        after = "\n".join([*lines[: line - 1], text, *lines[line - 1 :]])
        return _edit(document, after, f"content inserted before line {line}")
    if anchor is not None:
        if not anchor.strip():
            raise MemoryEditError("anchor must not be blank (omit it to insert at the end)")
        start = document.find(anchor)
        if start < 0:
            raise _not_found("anchor", document, anchor)
        # The line that holds the end of the match; a multi-line anchor inserts after its last line.
        line_end = document.find("\n", start + len(anchor) - 1)
        anchor_line = document.count("\n", 0, start + len(anchor) - 1) + 1
        if line_end < 0:
            after = f"{document}\n{text}"
        else:
            after = f"{document[:line_end]}\n{text}{document[line_end:]}"
        return _edit(document, after, f"content inserted after line {anchor_line} (the first line containing anchor)")
    return _edit(document, _join_at_end(document, text), "content inserted at the end")


def delete(document: str, old_text: str | None, content: str | None = None, replace_all: bool = False) -> DocumentEdit:
    """Remove the first exact old_text (fallback content; every one with replace_all); no whitespace cleanup."""
    target = old_text if old_text else content
    if not target:
        raise MemoryEditError("old_text is required for delete action")
    count = document.count(target)
    if count == 0:
        raise _not_found("old_text", document, target)
    done = count if replace_all else 1
    after = document.replace(target, "", -1 if replace_all else 1)
    return _edit(document, after, f"deleted {_plural(done, 'occurrence')} of old_text")


def _label(value: str | None, name: str) -> str:
    """A label as the model may send it: trimmed, one trailing `:` dropped; blank is an error."""
    label = (value or "").strip()
    if label.endswith(":"):
        label = label[:-1].rstrip()
    if not label:
        raise MemoryEditError(f"{name} is required for rename action")
    return label


def rename(document: str, old_text: str | None, new_text: str | None, content: str | None = None) -> DocumentEdit:
    """On the first line whose leading label equals old_text followed by `:`, replace the label with new_text."""
    old = _label(old_text, "old_text")
    new = _label(new_text if new_text is not None else content, "new_text")
    if "\n" in new:
        raise MemoryEditError("new_text must be a single line for rename action")
    lines = document.split("\n")
    for index, line in enumerate(lines):
        prefix = _LABEL_PREFIX.match(line).group(0)  # type: ignore[union-attr]  # always matches
        rest = line[len(prefix) :]
        if rest.startswith(old + ":"):
            lines[index] = f"{prefix}{new}{rest[len(old):]}"
            return _edit(document, "\n".join(lines), f"renamed the label on line {index + 1}")
    raise _not_found(f"old_text (a leading label '{old}:')", document, old)


def apply_edit(document: str, args: MemoryToolArgs) -> DocumentEdit:
    """Run the mutating action of args on document (read is not an edit)."""
    replace_all = bool(args.replace_all)
    match args.action:
        case "write":
            return write(document, args.content, args.new_text)
        case "append":
            return append(document, args.content, args.new_text)
        case "clear":
            return clear(document)
        case "str_replace":
            return str_replace(document, args.old_text, args.new_text, args.content, replace_all)
        case "insert":
            return insert(document, args.content, args.line, args.anchor)
        case "delete":
            return delete(document, args.old_text, args.content, replace_all)
        case "rename":
            return rename(document, args.old_text, args.new_text, args.content)
    raise MemoryEditError(unknown_action_message(args.action))
