"""Property-based tests of the document operations: they edit exactly what they say and nothing else."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pyruntime.memory import TextNotFoundError
from pyruntime.memory import document as doc

# Small alphabets make matches, repeats and near misses likely.
_CHARS = st.sampled_from("ab c:#\n")
texts = st.text(_CHARS, max_size=40)
needles = st.text(st.sampled_from("ab c:"), min_size=1, max_size=5)
one_line = st.text(st.sampled_from("abxyz :"), min_size=1, max_size=12).filter(lambda s: s.strip() != "")

PROFILE = settings(max_examples=300, deadline=None)


@st.composite
def text_and_needle(draw: st.DrawFn) -> tuple[str, str]:
    """A document that holds the needle at least once (often more than once)."""
    needle = draw(needles)
    parts = draw(st.lists(texts, min_size=2, max_size=4))
    return needle.join(parts), needle


@PROFILE
@given(text_and_needle(), st.text(st.sampled_from("xyz"), min_size=1, max_size=5))
def test_str_replace_then_reverse_restores(case: tuple[str, str], marker: str) -> None:
    text, old = case
    # A replacement that cannot occur in the text, so the reverse edit finds exactly the one we made.
    assume(marker not in text)
    changed = doc.str_replace(text, old, marker).text
    assert doc.str_replace(changed, marker, old).text == text


@PROFILE
@given(text_and_needle(), st.text(st.sampled_from("xyz"), max_size=5))
def test_str_replace_touches_only_the_first_match(case: tuple[str, str], new: str) -> None:
    text, old = case
    at = text.index(old)
    after = doc.str_replace(text, old, new).text
    assert after == text[:at] + new + text[at + len(old):]


@PROFILE
@given(text_and_needle(), st.text(st.sampled_from("xyz"), min_size=1, max_size=5))
def test_replace_all_replaces_every_match(case: tuple[str, str], new: str) -> None:
    text, old = case
    edit = doc.str_replace(text, old, new, replace_all=True)
    assert edit.text == new.join(text.split(old))
    assert edit.detail.startswith(f"replaced {text.count(old)} occurrence")


@PROFILE
@given(texts, one_line)
def test_append_is_idempotent(text: str, content: str) -> None:
    once = doc.append(text, content)
    twice = doc.append(once.text, content)
    assert twice.changed is False
    assert twice.text == once.text


@PROFILE
@given(texts, one_line)
def test_append_keeps_the_document_as_a_prefix(text: str, content: str) -> None:
    edit = doc.append(text, content)
    assert edit.text.startswith(text)
    if edit.changed:
        assert edit.text == (f"{text}\n{content}" if text else content)
    else:
        assert content.strip() in [line.strip() for line in text.split("\n")]


@PROFILE
@given(texts, one_line, st.integers(min_value=1, max_value=12))
def test_insert_by_line_puts_content_at_that_line(text: str, content: str, line: int) -> None:
    assume("\n" not in content)
    lines = text.split("\n") if text else []
    after = doc.insert(text, content, line=line).text.split("\n")
    if line <= len(lines):
        assert after[line - 1] == content
        assert after[: line - 1] + after[line:] == lines
    else:
        assert after[-1] == content
        assert after[:-1] == lines


@PROFILE
@given(text_and_needle())
def test_delete_removes_exactly_one_occurrence(case: tuple[str, str]) -> None:
    text, old = case
    after = doc.delete(text, old).text
    assert len(after) == len(text) - len(old)
    at = text.index(old)
    assert after == text[:at] + text[at + len(old):]


@PROFILE
@given(text_and_needle())
def test_delete_all_removes_every_occurrence(case: tuple[str, str]) -> None:
    text, old = case
    after = doc.delete(text, old, replace_all=True).text
    assert after == text.replace(old, "")


@PROFILE
@given(texts, needles)
def test_missing_text_is_an_error_and_never_an_edit(text: str, old: str) -> None:
    assume(old not in text)
    for operation in (lambda: doc.str_replace(text, old, "x"), lambda: doc.delete(text, old)):
        try:
            operation()
        except TextNotFoundError as err:
            assert str(err).startswith("old_text was not found in memory")
            assert all(line in [row.strip() for row in text.split("\n")] for line in err.closest)
        else:
            raise AssertionError("a missing old_text must raise")


@PROFILE
@given(st.lists(one_line, max_size=6), st.text(st.sampled_from("abc"), min_size=1, max_size=4),
       st.text(st.sampled_from("xyz"), min_size=1, max_size=4), st.sampled_from(["", "  ", "# ", " ## "]))
def test_rename_touches_only_the_label(lines: list[str], old: str, new: str, prefix: str) -> None:
    text = "\n".join([*lines, f"{prefix}{old}: value"])
    try:
        edit = doc.rename(text, old, new)
    except TextNotFoundError:
        raise AssertionError("the labelled line exists, so rename must find it") from None
    before_lines, after_lines = text.split("\n"), edit.text.split("\n")
    changed = [i for i, (a, b) in enumerate(zip(before_lines, after_lines, strict=True)) if a != b]
    assert len(before_lines) == len(after_lines)
    assert len(changed) == 1
    row = changed[0]
    assert after_lines[row].endswith(before_lines[row].split(f"{old}:", 1)[1])
    assert f"{new}:" in after_lines[row]


@PROFILE
@given(texts, one_line)
def test_insert_at_anchor_keeps_every_other_line(text: str, content: str) -> None:
    lines = text.split("\n")
    anchor_line = next((line for line in lines if line.strip()), None)
    assume(anchor_line is not None and "\n" not in content)
    assert anchor_line is not None  # assume() filtered it out; this tells the type checker
    after = doc.insert(text, content, anchor=anchor_line).text.split("\n")
    at = lines.index(anchor_line)
    assert after[at + 1] == content
    assert after[: at + 1] + after[at + 2:] == lines
