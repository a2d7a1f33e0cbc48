"""Key derivation of (scope, role, actor) -> storage key (contract §4)."""

from __future__ import annotations

import hashlib
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pyruntime.errors import InvalidArgumentError
from pyruntime.scopes import EMPTY_SCOPE, AgentMemoryScope, storage_key


def sha(canonical: str) -> str:
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


SPEC_SCOPE = AgentMemoryScope("t", "user1", "s", "")


def test_spec_worked_example_hashes_the_canonical_string():
    assert storage_key("role", SPEC_SCOPE) == "scope-v1-" + sha("1:t;5:user1;1:s;0:;4:role;")


def test_spec_worked_example_golden_digest():
    # Pinned literally so a change of the derivation (which would orphan every save) fails loudly.
    assert storage_key("role", SPEC_SCOPE) == (
        "scope-v1-cc14016bdae35e8d1483675dad37096d546e82b72006f3a6086fd85e413edf9f"
    )


@pytest.mark.parametrize("scope", [EMPTY_SCOPE, AgentMemoryScope(), AgentMemoryScope(" ", "", None, "\t"), None])
def test_empty_scope_gives_the_bare_trimmed_role(scope):
    assert storage_key("  Teacher ", scope) == "Teacher"


def test_values_are_trimmed_and_none_is_empty():
    padded = AgentMemoryScope(" t ", "user1\n", "  s", None)
    assert storage_key(" role ", padded) == storage_key("role", SPEC_SCOPE)


@pytest.mark.parametrize("role", ["", "   ", None, "\t\n"])
def test_blank_role_is_an_error(role):
    with pytest.raises(InvalidArgumentError, match="role_id"):
        storage_key(role, SPEC_SCOPE)


def test_actor_key_with_scope():
    assert storage_key("role", SPEC_SCOPE, "npc_7") == "actor-v1-" + sha("5:npc_7;1:t;5:user1;1:s;0:;4:role;")
    assert storage_key("role", SPEC_SCOPE, "npc_7") == (
        "actor-v1-3b4fa43d286e42ed0231217330d8e0040f61787b5e2a861dc81c2650edea8279"
    )


def test_actor_key_without_scope_leaves_the_scope_parts_out():
    assert storage_key("role", EMPTY_SCOPE, " npc_7 ") == "actor-v1-" + sha("5:npc_7;4:role;")
    assert storage_key("role", EMPTY_SCOPE, "npc_7") == (
        "actor-v1-aad023c569640f002db60b68d33f353ea2235554747882739a088edf20b32d30"
    )


@pytest.mark.parametrize("scope", [EMPTY_SCOPE, SPEC_SCOPE])
@pytest.mark.parametrize("anonymous", [None, "", "  ", "local", " local "])
def test_anonymous_actor_resolves_exactly_as_no_actor(scope, anonymous):
    assert storage_key("role", scope, anonymous) == storage_key("role", scope)


def test_actor_local_is_case_sensitive():
    # Only the exact anonymous id is anonymous; "Local" is a named actor.
    assert storage_key("role", EMPTY_SCOPE, "Local").startswith("actor-v1-")


def test_lengths_are_utf16_code_units():
    # U+1F600 is one code point but two UTF-16 code units; "é" is one.
    scope = AgentMemoryScope("\U0001F600", "é", "", "")
    assert storage_key("r\U0001F600", scope) == "scope-v1-" + sha("2:\U0001F600;1:é;0:;0:;3:r\U0001F600;")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ((("a;1:b", "", "", ""), "r"), (("a", "b", "", ""), "r")),
        ((("1:a;", "", "", ""), "r"), (("", "1:a;", "", ""), "r")),
        ((("t", "", "", ""), "x;1:y"), (("t", "", "", "x"), "y")),
        ((("t", "u", "", ""), "r"), (("u", "t", "", ""), "r")),
    ],
)
def test_separator_characters_in_values_do_not_collide(a, b):
    assert storage_key(a[1], AgentMemoryScope(*a[0])) != storage_key(b[1], AgentMemoryScope(*b[0]))


def test_actor_and_scope_keys_never_collide():
    # The same canonical parts as actor or as scope are different namespaces.
    assert storage_key("r", AgentMemoryScope("npc", "", "", "")) != storage_key("r", EMPTY_SCOPE, "npc")


_value = st.text(alphabet=st.sampled_from(list("ab;:1 0é\U0001F600")), max_size=6)
_role = st.text(alphabet=st.sampled_from(list("ab;:1 é\U0001F600")), max_size=6).filter(lambda s: s.strip())
_identity = st.tuples(st.tuples(_value, _value, _value, _value), _role, st.one_of(st.none(), _value))


def _normalized(identity):
    parts, role, actor = identity
    actor_id = (actor or "").strip()
    return (tuple(p.strip() for p in parts), role.strip(), "" if actor_id == "local" else actor_id)


@given(_identity, _identity)
def test_keys_are_injective(a, b):
    key_a = storage_key(a[1], AgentMemoryScope(*a[0]), a[2])
    key_b = storage_key(b[1], AgentMemoryScope(*b[0]), b[2])
    assert (key_a == key_b) == (_normalized(a) == _normalized(b))


@given(_identity)
def test_scoped_keys_are_file_safe_and_contain_no_raw_id(identity):
    parts, role, actor = identity
    key = storage_key(role, AgentMemoryScope(*parts), actor)
    normalized_parts, normalized_role, actor_id = _normalized(identity)
    if not any(normalized_parts) and not actor_id:
        assert key == normalized_role
    else:
        assert re.fullmatch(r"(scope|actor)-v1-[0-9a-f]{64}", key)


def test_user_id_never_appears_in_a_scoped_key():
    key = storage_key("BlacksmithNPC", AgentMemoryScope("studio", "alice@example.com", "", ""), "npc_7")
    assert "alice" not in key and "BlacksmithNPC" not in key and "npc_7" not in key


@pytest.mark.parametrize("role", ["scope-v1-" + "0" * 64, "actor-v1-abc", "  scope-v1-x"])
def test_role_ids_shaped_like_hashed_keys_are_refused(role: str) -> None:
    """Keys stay injective: a bare role id can never equal a scope-v1-/actor-v1- key."""
    with pytest.raises(InvalidArgumentError, match="must not start with"):
        storage_key(role)


# Ids that name save files may not have invisible or look-alike twins.
LOOK_ALIKES = {
    "zero-width space": "Teacher\u200b",
    "zero-width joiner after a letter": "Guard\u200d",
    "right-to-left override": "\u202eGuard",
    "left-to-right isolate": "Guard\u2066x",
    "byte order mark": "\ufeffTeacher",
    "soft hyphen": "Teach\u00ader",
    "no-break space": "Old\u00a0Guard",
    "ideographic space": "Old\u3000Guard",
    "hangul filler": "\u3164",
    "variation selector after a letter": "Guard\ufe0f",
    "combining accent (not NFC)": "Cafe\u0301",
    "leading combining mark": "\u0301Guard",
    "C1 control": "Gu\u0085ard",
    "private use": "Guard\ue000",
}


@pytest.mark.parametrize("role", LOOK_ALIKES.values(), ids=LOOK_ALIKES.keys())
def test_role_ids_with_invisible_or_look_alike_characters_are_refused(role):
    with pytest.raises(InvalidArgumentError, match="role_id"):
        storage_key(role, AgentMemoryScope(user_id="alex"))
    with pytest.raises(InvalidArgumentError, match="role_id"):
        storage_key(role)


@pytest.mark.parametrize("role", ["Teacher", "Old Guard", "Кузнец", "鍛冶屋", "Café", "⚔️Guard",
                                  "👨\u200d👩\u200d👧 Family", "Smith<1>", "عامل"])
def test_ordinary_role_ids_in_any_script_are_kept(role):
    assert storage_key(role) == role
