"""Role policy, built-in role table, builder and proto conversion (contract §6)."""

from __future__ import annotations

import math
import threading

import pytest

from coreai.v1 import common_pb2
from pyruntime.errors import InvalidArgumentError
from pyruntime.memory.actions import MemoryToolAction
from pyruntime.policy import (
    AgentBuilder,
    AgentMemoryPolicy,
    RoleMemoryConfig,
    ToolResultMemory,
    config_from_proto,
    config_to_proto,
)

FULL = ToolResultMemory.FULL
COMPACT = ToolResultMemory.COMPACT_SUMMARY

# role: (memory tool, history, persisted, tool results, llm compaction, roundtrips field, effective roundtrips)
BUILTIN_TABLE = {
    "Creator": (True, True, False, COMPACT, True, 0, 0),
    "Builder": (True, True, False, COMPACT, True, None, 20),
    "Analyzer": (True, True, False, COMPACT, True, None, 20),
    "Programmer": (True, False, False, FULL, False, 0, 0),
    "CoreMechanicAI": (True, True, False, FULL, True, None, 20),
    "AINpc": (True, True, False, COMPACT, True, None, 20),
    "PlainChat": (False, True, True, COMPACT, True, None, 20),
    "SmartChat": (True, True, True, COMPACT, True, None, 20),
    "Merchant": (True, True, False, COMPACT, True, None, 20),
}


@pytest.mark.parametrize("role", sorted(BUILTIN_TABLE))
def test_builtin_role_row(role: str) -> None:
    memory, history, persisted, results, llm, roundtrips, effective = BUILTIN_TABLE[role]
    cfg = AgentMemoryPolicy().get(role)
    assert cfg.role_id == role
    assert cfg.use_memory_tool is memory
    assert cfg.default_action is MemoryToolAction.Append
    assert cfg.with_chat_history is history
    assert cfg.persist_chat_history is persisted
    assert cfg.tool_result_memory is results
    assert cfg.use_llm_context_compaction is llm
    assert cfg.max_tool_call_roundtrips == roundtrips
    assert cfg.effective_max_tool_call_roundtrips == effective
    assert cfg.max_chat_history_messages == 30
    assert cfg.context_tokens == 0
    assert cfg.effective_max_memory_chars == 16000


def test_roles_lists_exactly_the_builtin_table_sorted() -> None:
    roles = AgentMemoryPolicy().roles()
    assert [r.role_id for r in roles] == sorted(BUILTIN_TABLE)


def test_unknown_role_gets_defaults_under_its_trimmed_id() -> None:
    policy = AgentMemoryPolicy()
    cfg = policy.get("  BlacksmithNPC ")
    assert cfg == RoleMemoryConfig("BlacksmithNPC")
    assert cfg.use_memory_tool and cfg.with_chat_history and not cfg.persist_chat_history
    assert cfg.tool_result_memory is COMPACT
    assert not policy.is_known("BlacksmithNPC")
    assert policy.is_known(" Creator ")


@pytest.mark.parametrize("blank", ["", "   ", None])
def test_blank_role_is_an_error(blank: str | None) -> None:
    policy = AgentMemoryPolicy()
    with pytest.raises(InvalidArgumentError, match="role_id"):
        policy.get(blank)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="role_id"):
        policy.configure_role(blank, use_memory_tool=False)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="role_id"):
        AgentBuilder(blank)  # type: ignore[arg-type]


def test_get_returns_a_copy() -> None:
    policy = AgentMemoryPolicy()
    cfg = policy.get("Creator")
    cfg.use_memory_tool = False
    cfg.max_chat_history_messages = 3
    assert policy.get("Creator").use_memory_tool is True
    assert policy.get("Creator").max_chat_history_messages == 30
    listed = policy.roles()[0]
    listed.system_prompt = "changed"
    assert policy.get(listed.role_id).system_prompt == ""


def test_configure_role_changes_only_named_fields_and_trims() -> None:
    policy = AgentMemoryPolicy()
    returned = policy.configure_role(" Creator ", default_action=MemoryToolAction.Write, temperature=0.3)
    cfg = policy.get("Creator")
    assert returned == cfg
    assert cfg.default_action is MemoryToolAction.Write
    assert cfg.temperature == 0.3
    assert cfg.max_tool_call_roundtrips == 0  # untouched built-in value


def test_configure_role_registers_a_new_role_listed_in_roles() -> None:
    policy = AgentMemoryPolicy()
    policy.configure_role("BlacksmithNPC", persist_chat_history=True)
    assert policy.is_known("BlacksmithNPC")
    ids = [r.role_id for r in policy.roles()]
    assert ids == sorted([*BUILTIN_TABLE, "BlacksmithNPC"])


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"max_chat_history_messages": -1}, "max_chat_history_messages must be >= 0"),
        ({"context_tokens": -5}, "context_tokens must be >= 0"),
        ({"max_output_tokens": 0}, "max_output_tokens must be >= 1"),
        ({"max_tool_call_roundtrips": -1}, "max_tool_call_roundtrips must be >= 0"),
        ({"max_memory_chars": -1}, "max_memory_chars must be >= 0"),
        ({"temperature": -0.1}, "temperature must be a non-negative number"),
        ({"temperature": math.nan}, "temperature must be a non-negative number"),
        ({"use_memory_tool": "yes"}, "use_memory_tool must be a bool"),
        ({"default_action": "write"}, "default_action must be a MemoryToolAction"),
        ({"tool_result_memory": "full"}, "tool_result_memory must be a ToolResultMemory"),
        ({"context_tokens": 1.5}, "context_tokens must be an integer"),
        ({"system_prompt": None}, "system_prompt must be a string"),
        ({"no_such_field": 1}, "unknown RoleMemoryConfig field"),
        ({"role_id": "Other"}, "role_id cannot be changed"),
    ],
)
def test_bad_values_are_rejected_and_change_nothing(fields: dict, message: str) -> None:
    policy = AgentMemoryPolicy()
    before = policy.get("Creator")
    with pytest.raises(InvalidArgumentError, match=message):
        policy.configure_role("Creator", **{"persist_chat_history": True, **fields})
    assert policy.get("Creator") == before


def test_config_rejects_bad_assignment_directly() -> None:
    cfg = RoleMemoryConfig("X")
    with pytest.raises(InvalidArgumentError, match="max_memory_chars must be >= 0"):
        cfg.max_memory_chars = -3
    assert cfg.max_memory_chars is None
    with pytest.raises(InvalidArgumentError, match="max_output_tokens"):
        RoleMemoryConfig("X", max_output_tokens=-2)


def test_memory_tool_switches() -> None:
    policy = AgentMemoryPolicy()
    policy.disable_memory_tool("Creator")
    assert policy.get("Creator").use_memory_tool is False
    policy.enable_memory_tool("PlainChat")
    assert policy.get("PlainChat").use_memory_tool is True


def test_set_memory_tool_for_all_touches_builtin_roles_only() -> None:
    policy = AgentMemoryPolicy()
    policy.configure_role("BlacksmithNPC", system_prompt="forge")
    policy.set_memory_tool_for_all(False)
    assert all(not policy.get(r).use_memory_tool for r in BUILTIN_TABLE)
    assert policy.get("BlacksmithNPC").use_memory_tool is True
    policy.set_memory_tool_for_all(True)
    assert all(policy.get(r).use_memory_tool for r in BUILTIN_TABLE)
    with pytest.raises(InvalidArgumentError, match="enabled must be a bool"):
        policy.set_memory_tool_for_all(1)  # type: ignore[arg-type]


def test_configure_chat_history() -> None:
    policy = AgentMemoryPolicy()
    policy.configure_chat_history("Programmer", True, context_tokens=4096, persist=True, max_messages=12)
    cfg = policy.get("Programmer")
    assert (cfg.with_chat_history, cfg.context_tokens, cfg.persist_chat_history, cfg.max_chat_history_messages) == (
        True,
        4096,
        True,
        12,
    )
    policy.configure_chat_history("Programmer", False)
    cfg = policy.get("Programmer")
    assert (cfg.with_chat_history, cfg.context_tokens, cfg.persist_chat_history, cfg.max_chat_history_messages) == (
        False,
        0,
        False,
        30,
    )


def test_configure_llm_context_compaction() -> None:
    policy = AgentMemoryPolicy()
    policy.configure_llm_context_compaction("Programmer", True)
    policy.configure_llm_context_compaction("Creator", False)
    assert policy.get("Programmer").use_llm_context_compaction is True
    assert policy.get("Creator").use_llm_context_compaction is False


@pytest.mark.parametrize(
    ("setter", "field", "value"),
    [
        ("set_default_action", "default_action", MemoryToolAction.Rename),
        ("set_context_tokens", "context_tokens", 2048),
        ("set_max_output_tokens", "max_output_tokens", 256),
        ("set_max_tool_call_roundtrips", "max_tool_call_roundtrips", 5),
        ("set_tool_result_memory", "tool_result_memory", ToolResultMemory.ERRORS_ONLY),
        ("set_temperature", "temperature", 0.7),
        ("set_compaction_trigger_ratio", "compaction_trigger_ratio", 0.5),
        ("set_max_memory_chars", "max_memory_chars", 0),
        ("set_system_prompt", "system_prompt", "You are a merchant."),
    ],
)
def test_every_setter(setter: str, field: str, value: object) -> None:
    policy = AgentMemoryPolicy()
    getattr(policy, setter)("Merchant", value)
    assert getattr(policy.get("Merchant"), field) == value
    assert getattr(policy.get("AINpc"), field) == getattr(RoleMemoryConfig("AINpc"), field)


@pytest.mark.parametrize(
    ("ratio", "effective"),
    [(None, 0.8), (0.5, 0.5), (1.0, 1.0), (0.0, 0.8), (-0.2, 0.8), (1.01, 0.8), (math.nan, 0.8), (math.inf, 0.8)],
)
def test_effective_compaction_trigger_ratio(ratio: float | None, effective: float) -> None:
    assert RoleMemoryConfig("R", compaction_trigger_ratio=ratio).effective_compaction_trigger_ratio == effective


@pytest.mark.parametrize(("value", "effective"), [(None, 20), (0, 0), (7, 7)])
def test_effective_max_tool_call_roundtrips(value: int | None, effective: int) -> None:
    assert RoleMemoryConfig("R", max_tool_call_roundtrips=value).effective_max_tool_call_roundtrips == effective


@pytest.mark.parametrize(("value", "effective"), [(None, 16000), (0, 0), (500, 500)])
def test_effective_max_memory_chars(value: int | None, effective: int) -> None:
    assert RoleMemoryConfig("R", max_memory_chars=value).effective_max_memory_chars == effective


def test_builder_build_registers_in_the_policy() -> None:
    policy = AgentMemoryPolicy()
    cfg = (
        AgentBuilder(" BlacksmithNPC ")
        .with_memory(MemoryToolAction.Write)
        .with_chat_history(4096, persist_between_sessions=True, max_chat_history_messages=10)
        .with_llm_context_compaction(False)
        .with_system_prompt("You forge swords.")
        .with_temperature(0.4)
        .with_max_output_tokens(300)
        .with_max_tool_call_roundtrips(0)
        .build(policy)
    )
    expected = RoleMemoryConfig(
        "BlacksmithNPC",
        default_action=MemoryToolAction.Write,
        context_tokens=4096,
        persist_chat_history=True,
        max_chat_history_messages=10,
        use_llm_context_compaction=False,
        system_prompt="You forge swords.",
        temperature=0.4,
        max_output_tokens=300,
        max_tool_call_roundtrips=0,
    )
    assert cfg == expected
    assert policy.get("BlacksmithNPC") == expected
    cfg.system_prompt = "mutated after build"
    assert policy.get("BlacksmithNPC").system_prompt == "You forge swords."


def test_builder_build_detached_does_not_register() -> None:
    policy = AgentMemoryPolicy()
    cfg = AgentBuilder("AnalyzerChat").without_chat_history().build_detached()
    assert cfg.with_chat_history is False
    assert not policy.is_known("AnalyzerChat")
    assert policy.get("AnalyzerChat").with_chat_history is True


def test_builder_defaults_and_overrides_a_builtin() -> None:
    policy = AgentMemoryPolicy()
    AgentBuilder("Programmer").with_chat_history().build(policy)
    cfg = policy.get("Programmer")
    # A built role starts from the defaults, not from the built-in row it replaces.
    assert cfg == RoleMemoryConfig("Programmer")
    assert cfg.context_tokens == 0


def test_builder_without_chat_history_drops_persistence_and_rejects_bad_values() -> None:
    builder = AgentBuilder("X").with_chat_history(persist_between_sessions=True).without_chat_history()
    cfg = builder.build_detached()
    assert (cfg.with_chat_history, cfg.persist_chat_history) == (False, False)
    with pytest.raises(InvalidArgumentError, match="max_tool_call_roundtrips must be >= 0"):
        builder.with_max_tool_call_roundtrips(-1)
    with pytest.raises(InvalidArgumentError, match="context_tokens must be >= 0"):
        builder.with_chat_history(-10)
    builder.without_memory()
    assert builder.build_detached().use_memory_tool is False


@pytest.mark.parametrize("role", sorted(BUILTIN_TABLE))
def test_proto_round_trip_of_builtin_roles(role: str) -> None:
    cfg = AgentMemoryPolicy().get(role)
    msg = config_to_proto(cfg)
    back = config_from_proto(common_pb2.RoleMemoryConfig.FromString(msg.SerializeToString()))
    assert back == cfg


@pytest.mark.parametrize("action", list(MemoryToolAction))
@pytest.mark.parametrize("mode", list(ToolResultMemory))
def test_proto_round_trip_of_every_enum_and_optional(action: MemoryToolAction, mode: ToolResultMemory) -> None:
    cfg = RoleMemoryConfig(
        "R",
        default_action=action,
        tool_result_memory=mode,
        max_output_tokens=128,
        max_tool_call_roundtrips=0,
        temperature=0.25,
        compaction_trigger_ratio=0.6,
        max_memory_chars=0,
        system_prompt="sp",
        context_tokens=1024,
    )
    msg = config_to_proto(cfg)
    optionals = ("max_output_tokens", "max_tool_call_roundtrips", "temperature", "compaction_trigger_ratio",
                 "max_memory_chars")
    for name in optionals:
        assert msg.HasField(name), name
    assert config_from_proto(msg) == cfg


def test_proto_unset_optionals_are_none_and_unspecified_enums_are_defaults() -> None:
    msg = common_pb2.RoleMemoryConfig(role_id=" R ", use_memory_tool=True, max_chat_history_messages=30)
    cfg = config_from_proto(msg)
    assert cfg.role_id == "R"
    assert cfg.default_action is MemoryToolAction.Append
    assert cfg.tool_result_memory is COMPACT
    assert cfg.max_output_tokens is None
    assert cfg.max_tool_call_roundtrips is None
    assert cfg.temperature is None
    assert cfg.compaction_trigger_ratio is None
    assert cfg.max_memory_chars is None
    assert cfg.effective_max_tool_call_roundtrips == 20
    assert not config_to_proto(RoleMemoryConfig("R")).HasField("max_memory_chars")
    assert config_to_proto(RoleMemoryConfig("R")).default_action == common_pb2.MEMORY_TOOL_ACTION_APPEND


def test_proto_invalid_values_are_errors() -> None:
    with pytest.raises(InvalidArgumentError, match="role_id"):
        config_from_proto(common_pb2.RoleMemoryConfig(role_id="  "))
    with pytest.raises(InvalidArgumentError, match="max_memory_chars"):
        config_from_proto(common_pb2.RoleMemoryConfig(role_id="R", max_memory_chars=-1))
    with pytest.raises(InvalidArgumentError, match="MemoryToolAction value 99"):
        config_from_proto(common_pb2.RoleMemoryConfig(role_id="R", default_action=99))


def test_concurrent_configuration_loses_no_update() -> None:
    policy = AgentMemoryPolicy()
    roles = [f"Npc{i}" for i in range(8)]

    def configure(role: str) -> None:
        for n in range(50):
            policy.configure_role(role, max_chat_history_messages=n + 1)
            policy.set_memory_tool_for_all(n % 2 == 0)

    threads = [threading.Thread(target=configure, args=(r,)) for r in roles]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(policy.get(r).max_chat_history_messages == 50 for r in roles)
    assert len(policy.roles()) == len(BUILTIN_TABLE) + len(roles)


def test_proto_unset_fields_keep_the_base_config() -> None:
    """ConfigureRole over the wire is a patch: unset fields keep the role's current values."""
    from coreai.v1 import common_pb2
    from pyruntime.policy import AgentMemoryPolicy, ToolResultMemory, config_from_proto

    base = AgentMemoryPolicy().get("Programmer")
    patched = config_from_proto(common_pb2.RoleMemoryConfig(role_id="Programmer", use_memory_tool=False), base)
    assert patched.use_memory_tool is False
    assert patched.with_chat_history is False  # Programmer's own value, not the default True
    assert patched.tool_result_memory is ToolResultMemory.FULL
    assert patched.use_llm_context_compaction is False

    fresh = config_from_proto(common_pb2.RoleMemoryConfig(role_id="NewRole"))
    assert fresh.use_memory_tool is True and fresh.with_chat_history is True
    assert fresh.max_chat_history_messages == 30
