"""Every row of the contract's §1 action table, and every error path, on the pure document operations."""

from __future__ import annotations

from typing import Any

import pytest

from pyruntime.errors import InvalidArgumentError
from pyruntime.memory import MemoryEditError, MemoryToolArgs, TextNotFoundError, apply_edit, closest_lines
from pyruntime.memory import document as doc
from pyruntime.memory.actions import MemoryActionName

CRAFTS = "Crafts:\nCraft#1: Iron Blade damage:45\nCraft#2: Steel Longsword damage:72"


# -- write -------------------------------------------------------------------------------------


def test_write_replaces_the_whole_document() -> None:
    edit = doc.write("old\nstuff", "new fact")
    assert (edit.text, edit.changed) == ("new fact", True)


def test_write_falls_back_to_new_text() -> None:
    assert doc.write("old", None, "from new_text").text == "from new_text"


def test_write_of_the_same_text_is_no_change() -> None:
    assert doc.write("same", "same").changed is False


@pytest.mark.parametrize("content", [None, "", "   \n "])
def test_write_requires_non_empty_content(content: str | None) -> None:
    with pytest.raises(MemoryEditError) as err:
        doc.write("keep", content)
    assert str(err.value) == "content is required for write action"


# -- append ------------------------------------------------------------------------------------


def test_append_to_an_empty_document_is_the_content() -> None:
    assert doc.append("", "first").text == "first"


def test_append_adds_a_newline_then_the_content() -> None:
    assert doc.append("a\nb", "c").text == "a\nb\nc"


def test_append_keeps_content_as_given() -> None:
    assert doc.append("a", "  indented ").text == "a\n  indented "


@pytest.mark.parametrize("content", ["b", "  b  ", "b\n"])
def test_append_of_an_existing_line_changes_nothing(content: str) -> None:
    edit = doc.append("a\n   b \nc", content)
    assert (edit.text, edit.changed) == ("a\n   b \nc", False)
    assert edit.detail == "content already exists in memory; nothing was added"


def test_append_duplicate_check_is_case_sensitive_and_whole_line() -> None:
    assert doc.append("Apple", "apple").text == "Apple\napple"
    assert doc.append("Apple pie", "Apple").text == "Apple pie\nApple"


@pytest.mark.parametrize("content", [None, "", "  "])
def test_append_requires_content(content: str | None) -> None:
    with pytest.raises(MemoryEditError, match="^content is required for append action$"):
        doc.append("a", content)


# -- clear -------------------------------------------------------------------------------------


def test_clear_empties_the_document() -> None:
    edit = doc.clear("a\nb")
    assert (edit.text, edit.changed) == ("", True)
    assert doc.clear("").changed is False


# -- str_replace -------------------------------------------------------------------------------


def test_str_replace_replaces_only_the_first_match() -> None:
    edit = doc.str_replace("x=1; x=1", "x=1", "x=2")
    assert edit.text == "x=2; x=1"
    assert edit.detail == "replaced 1 occurrence of old_text"


def test_str_replace_all_replaces_every_match() -> None:
    edit = doc.str_replace("x=1; x=1; y", "x=1", "x=2", replace_all=True)
    assert edit.text == "x=2; x=2; y"
    assert edit.detail == "replaced 2 occurrences of old_text"


def test_str_replace_falls_back_to_content_and_allows_empty() -> None:
    assert doc.str_replace(CRAFTS, "damage:45", None, "damage:50").text == CRAFTS.replace("damage:45", "damage:50")
    assert doc.str_replace("a-b", "-", "").text == "ab"
    # new_text wins over content when both are given.
    assert doc.str_replace("a", "a", "b", "c").text == "b"


def test_str_replace_is_case_sensitive() -> None:
    with pytest.raises(TextNotFoundError):
        doc.str_replace("Iron", "iron", "Gold")


@pytest.mark.parametrize("old_text", [None, ""])
def test_str_replace_requires_old_text(old_text: str | None) -> None:
    with pytest.raises(MemoryEditError) as err:
        doc.str_replace("a", old_text, "b")
    assert str(err.value) == "old_text is required for str_replace action"


def test_str_replace_requires_a_replacement() -> None:
    with pytest.raises(MemoryEditError, match="^new_text is required for str_replace action"):
        doc.str_replace("a", "a", None, None)


def test_str_replace_not_found_lists_the_closest_lines() -> None:
    with pytest.raises(TextNotFoundError) as err:
        doc.str_replace(CRAFTS, "Iron Blade damage:44", "x")
    message = str(err.value)
    assert message.startswith("old_text was not found in memory. Closest existing lines: [")
    assert '"Craft#1: Iron Blade damage:45"' in message
    assert err.value.closest[0] == "Craft#1: Iron Blade damage:45"
    assert isinstance(err.value, InvalidArgumentError)


def test_not_found_in_an_empty_document_says_so() -> None:
    with pytest.raises(TextNotFoundError) as err:
        doc.str_replace("", "x", "y")
    assert str(err.value) == "old_text was not found in memory (memory is empty)."


def test_not_found_without_similar_lines_says_so() -> None:
    with pytest.raises(TextNotFoundError) as err:
        doc.delete("alpha\nbeta", "zzzzzzzz")
    assert str(err.value).startswith("old_text was not found in memory; no similar line exists.")
    assert err.value.closest == ()


# -- insert ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (1, "X\na\nb\nc"),
        (2, "a\nX\nb\nc"),
        (3, "a\nb\nX\nc"),
        (4, "a\nb\nc\nX"),  # past the end appends
        (99, "a\nb\nc\nX"),
    ],
)
def test_insert_by_line_puts_content_before_that_line(line: int, expected: str) -> None:
    assert doc.insert("a\nb\nc", "X", line=line).text == expected


def test_insert_line_into_an_empty_document() -> None:
    assert doc.insert("", "X", line=1).text == "X"
    assert doc.insert("", "X", line=5).text == "X"


@pytest.mark.parametrize("line", [0, -1])
def test_insert_line_must_be_positive(line: int) -> None:
    with pytest.raises(MemoryEditError) as err:
        doc.insert("a", "X", line=line)
    assert str(err.value) == "line must be a 1-based positive line number"


def test_insert_line_wins_over_anchor() -> None:
    assert doc.insert("a\nb", "X", line=1, anchor="b").text == "X\na\nb"
    with pytest.raises(MemoryEditError, match="line must be a 1-based positive line number"):
        doc.insert("a\nb", "X", line=0, anchor="b")


def test_insert_after_the_first_line_containing_anchor() -> None:
    edit = doc.insert(CRAFTS, "Craft#3: Frost Axe damage:61", anchor="Crafts:")
    assert edit.text == ("Crafts:\nCraft#3: Frost Axe damage:61\nCraft#1: Iron Blade damage:45\n"
                         "Craft#2: Steel Longsword damage:72")
    assert doc.insert("k a\nk b", "X", anchor="k").text == "k a\nX\nk b"
    assert doc.insert("a\nlast", "X", anchor="ast").text == "a\nlast\nX"


def test_insert_after_a_multi_line_anchor_goes_after_its_last_line() -> None:
    assert doc.insert("a\nb\nc", "X", anchor="a\nb").text == "a\nb\nX\nc"


def test_insert_anchor_not_found_lists_closest_lines() -> None:
    with pytest.raises(TextNotFoundError) as err:
        doc.insert(CRAFTS, "X", anchor="Craft:")
    assert str(err.value).startswith("anchor was not found in memory. Closest existing lines: [")
    assert "Crafts:" in err.value.closest


def test_insert_blank_anchor_is_an_error_not_a_guess() -> None:
    with pytest.raises(MemoryEditError, match="^anchor must not be blank"):
        doc.insert("a", "X", anchor="")


def test_insert_with_neither_appends_at_the_end() -> None:
    assert doc.insert("a", "X").text == "a\nX"
    assert doc.insert("", "X").text == "X"
    # insert is explicit: unlike append it does not skip an existing line.
    assert doc.insert("X", "X").text == "X\nX"


@pytest.mark.parametrize("content", [None, "", " "])
def test_insert_requires_content(content: str | None) -> None:
    with pytest.raises(MemoryEditError, match="^content is required for insert action$"):
        doc.insert("a", content, line=1)


# -- delete ------------------------------------------------------------------------------------


def test_delete_removes_the_first_exact_match_without_whitespace_cleanup() -> None:
    edit = doc.delete("keep\nobsolete fact\nkeep obsolete fact", "obsolete fact")
    assert edit.text == "keep\n\nkeep obsolete fact"
    assert edit.detail == "deleted 1 occurrence of old_text"


def test_delete_all_removes_every_match() -> None:
    assert doc.delete("a,b,a,c,a", "a,", replace_all=True).text == "b,c,a"


def test_delete_falls_back_to_content() -> None:
    assert doc.delete("abc", None, "b").text == "ac"


def test_delete_requires_old_text() -> None:
    with pytest.raises(MemoryEditError) as err:
        doc.delete("abc", None, None)
    assert str(err.value) == "old_text is required for delete action"


def test_delete_not_found() -> None:
    with pytest.raises(TextNotFoundError, match="^old_text was not found in memory"):
        doc.delete("obsolete fact", "Obsolete fact")


# -- rename ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("Crafts: 3 items", "Craft History: 3 items"),
        ("   Crafts:", "   Craft History:"),
        ("# Crafts:", "# Craft History:"),
        ("  #   Crafts: x", "  #   Craft History: x"),
        ("## Crafts:", "## Craft History:"),
    ],
)
def test_rename_replaces_the_leading_label(line: str, expected: str) -> None:
    assert doc.rename(f"top\n{line}\nend", "Crafts", "Craft History").text == f"top\n{expected}\nend"


def test_rename_changes_only_the_first_labelled_line() -> None:
    text = "note: Crafts: are fun\nCrafts: a\nCrafts: b"
    assert doc.rename(text, "Crafts", "Items").text == "note: Crafts: are fun\nItems: a\nCrafts: b"


def test_rename_needs_the_colon_right_after_the_label() -> None:
    with pytest.raises(TextNotFoundError):
        doc.rename("Crafts : a\nCraftsman: b", "Crafts", "Items")


def test_rename_accepts_a_label_sent_with_its_colon() -> None:
    assert doc.rename("Crafts: a", "Crafts:", "Items:").text == "Items: a"


def test_rename_falls_back_to_content() -> None:
    assert doc.rename("Crafts: a", "Crafts", None, "Items").text == "Items: a"


@pytest.mark.parametrize(("old", "new", "name"), [(None, "x", "old_text"), ("Crafts", None, "new_text"),
                                                  (":", "x", "old_text"), ("Crafts", "  ", "new_text")])
def test_rename_requires_both_labels(old: str | None, new: str | None, name: str) -> None:
    with pytest.raises(MemoryEditError) as err:
        doc.rename("Crafts: a", old, new)
    assert str(err.value) == f"{name} is required for rename action"


def test_rename_refuses_a_multi_line_label() -> None:
    with pytest.raises(MemoryEditError, match="^new_text must be a single line for rename action$"):
        doc.rename("Crafts: a", "Crafts", "A\nB")


def test_rename_not_found_lists_closest_lines() -> None:
    with pytest.raises(TextNotFoundError) as err:
        doc.rename(CRAFTS, "Craft", "Items")
    assert str(err.value).startswith("old_text (a leading label 'Craft:') was not found in memory. Closest")
    assert "Crafts:" in err.value.closest


# -- dispatch and hints ------------------------------------------------------------------------


def test_apply_edit_dispatches_every_mutating_action() -> None:
    cases: dict[MemoryActionName, tuple[dict[str, Any], str | None]] = {
        "write": ({"content": "w"}, "w"),
        "append": ({"content": "z"}, "a b\nz"),
        "clear": ({}, ""),
        "str_replace": ({"old_text": "a", "new_text": "c", "replace_all": True}, "c b"),
        "insert": ({"content": "i", "line": 1}, "i\na b"),
        "delete": ({"old_text": " b"}, "a"),
        "rename": ({"old_text": "a b", "new_text": "x"}, None),
    }
    for action, (fields, expected) in cases.items():
        args = MemoryToolArgs(action=action, **fields)
        if expected is None:
            with pytest.raises(TextNotFoundError):
                apply_edit("a b", args)
        else:
            assert apply_edit("a b", args).text == expected, action


def test_apply_edit_refuses_read() -> None:
    with pytest.raises(MemoryEditError, match="^Unknown action: 'read'"):
        apply_edit("a", MemoryToolArgs(action="read"))


def test_closest_lines_ranks_and_limits() -> None:
    text = "apple pie\napple tart\nbanana\napple pies\ncherry"
    assert closest_lines(text, "apple pie!") == ("apple pie", "apple pies", "apple tart")
    assert closest_lines(text, "   ") == ()


def test_closest_lines_never_offer_a_line_spelling_done() -> None:
    # Hints go into failure messages, and a failure must never contain DONE.
    assert closest_lines("DONE: task one\nDone: task two", "DONE: task 1") == ("Done: task two",)
