"""AgentDefinition / agent_definition(): validation and normalisation of every field."""

from __future__ import annotations

import pytest

from deputy_runtime.definitions import AgentDefinition, agent_definition
from deputy_runtime.errors import DefinitionError
from deputy_runtime.skills import Skill
from deputy_runtime.tools import Tool
from tests.definitions._definition_helpers import make_tool

FIELDS = (
    "name",
    "description",
    "prompt",
    "tools",
    "model",
    "skills",
    "disallowed_tools",
    "memory",
    "mcp_servers",
    "initial_prompt",
    "max_requests",
    "permission_mode",
    "params",
    "mcp_tools",
    "hooks",
    "color",
    "output_schema",
    "output_retries",
    "compact_at",
)


def base(**changes: object) -> AgentDefinition:
    return agent_definition("reviewer", "Reviews text", "Read carefully", **changes)  # type: ignore[arg-type]


def test_name_is_trimmed_and_lowercased() -> None:
    assert base().replace(name="  Review-Agent_1  ").name == "review-agent_1"


@pytest.mark.parametrize("name", ["two words", "1reviewer", "", "a b", "   ", "é", "x!"])
def test_invalid_names_are_rejected_naming_the_field(name: str) -> None:
    with pytest.raises(DefinitionError, match=r"^name: .*not a valid agent name"):
        agent_definition(name, "d", "p")


def test_name_must_be_a_string() -> None:
    with pytest.raises(DefinitionError, match=r"^name: expected a string, got int"):
        agent_definition(5, "d", "p")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("description", ""),
        ("description", "   "),
        ("prompt", None),
        ("prompt", ["a"]),
        ("model", ""),
        ("model", None),
        ("initial_prompt", ["one", "two"]),
        ("initial_prompt", " "),
    ],
)
def test_text_fields_name_the_field(field: str, value: object) -> None:
    with pytest.raises(DefinitionError, match=rf"^{field}: expected a non-empty string"):
        AgentDefinition(**{"name": "a", "description": "d", "prompt": "p", field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("tools", make_tool("read_file"), "expected a list or tuple of Tool objects, got Tool"),
        ("tools", ["read_file"], "item 0 is str, expected a Tool object"),
        ("tools", {"read": make_tool("read")}, "expected a list or tuple"),
        ("skills", "skills/x", "expected a list or tuple of Skill objects or skill paths, got str"),
        ("skills", [3], "item 0 is int, expected a Skill or a skill path string"),
        ("skills", [""], "item 0 is an empty skill path"),
        ("disallowed_tools", "run_bash", "expected a list or tuple of strings, got str"),
        ("memory", [1], "item 0 is int, expected a non-empty string"),
        ("memory", {"note": "fact"}, "expected a list or tuple of strings, got dict"),
        ("mcp_servers", ["ok", None], "item 1 is None, expected a non-empty string"),
        ("mcp_servers", [" "], "item 0 is blank"),
        ("mcp_tools", ["read_file"], "item 0: 'read_file' is not an MCP tool name"),
        ("mcp_tools", ["mcp__*"], "item 0: 'mcp__*' is a wildcard pattern"),
    ],
)
def test_collection_fields_name_the_field(field: str, value: object, problem: str) -> None:
    with pytest.raises(DefinitionError) as info:
        base(**{field: value})
    assert str(info.value) == f"{field}: {problem}" or str(info.value).startswith(
        f"{field}: {problem}"
    )


def test_defaults_and_field_order() -> None:
    definition = agent_definition("reviewer", "Reviews text", "Read carefully")
    assert AgentDefinition.__struct_fields__ == FIELDS
    assert definition.tools == ()
    assert definition.model == "inherit"
    assert definition.skills == ()
    for field in FIELDS[6:]:
        assert getattr(definition, field) is None, field


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (-1, "expected a non-negative int of at most 2147483647, got -1"),
        (2**31, "expected a non-negative int of at most 2147483647, got 2147483648"),
        (1.5, "expected an int (a whole number) or None, got float 1.5"),
        (2.0, "expected an int (a whole number) or None, got float 2.0"),
        ([1, 2], "expected an int or None, got list [1, 2]"),
        (True, "expected an int or None, got bool True"),
        ("2", "expected an int or None, got str '2'"),
    ],
)
def test_max_requests_rejections(value: object, problem: str) -> None:
    with pytest.raises(DefinitionError) as info:
        base(max_requests=value)
    assert str(info.value) == f"max_requests: {problem}"


def test_color_is_one_of_claude_codes_colours() -> None:
    assert base(color=" Purple ").color == "purple"
    for bad in ("mauve", 3, ""):
        with pytest.raises(DefinitionError) as info:
            base(color=bad)
        assert str(info.value) == (
            "color: expected one of red, blue, green, yellow, purple, orange, pink, cyan, "
            f"magenta, got {bad!r}"
        )


@pytest.mark.parametrize("value", [0, 2, 2**31 - 1])
def test_max_requests_accepted(value: int) -> None:
    assert base(max_requests=value).max_requests == value


@pytest.mark.parametrize("mode", ["standard", "plan", "readonly", "full", None])
def test_permission_modes_accepted(mode: str | None) -> None:
    assert base(permission_mode=mode).permission_mode == mode


@pytest.mark.parametrize("mode", ["auto", "Readonly", "", 1])
def test_permission_mode_rejected(mode: object) -> None:
    with pytest.raises(DefinitionError, match=r"^permission_mode: Invalid permission mode"):
        base(permission_mode=mode)


def test_immutable() -> None:
    definition = base(max_requests=3)
    for field in ("name", "max_requests", "permission_mode", "tools", "skills"):
        with pytest.raises(AttributeError):
            setattr(definition, field, None)
    assert definition.name == "reviewer"
    assert definition.max_requests == 3


def test_replace_revalidates_and_leaves_original() -> None:
    original = base().replace(name="Reviewer")
    revised = original.replace(name="LIMITED", max_requests=0)
    assert (revised.name, revised.max_requests) == ("limited", 0)
    assert (original.name, original.max_requests) == ("reviewer", None)
    with pytest.raises(DefinitionError, match=r"^max_requests: "):
        original.replace(max_requests=-1)
    with pytest.raises(DefinitionError, match=r"unknown field\(s\) colour"):
        original.replace(colour="red")


def test_direct_construction_validates_identically() -> None:
    direct = AgentDefinition("  A ", "d", "p", disallowed_tools=[" X ", "x"])  # type: ignore[arg-type]
    assert direct == agent_definition("a", "d", "p", disallowed_tools=("x",))
    assert direct.disallowed_tools == ("x",)
    with pytest.raises(DefinitionError, match=r"^name: "):
        AgentDefinition("two words", "d", "p")


def test_tools_and_skills_are_kept_by_reference() -> None:
    counter = make_tool("effect")
    skill = Skill("s", "d", "i")
    definition = base(tools=[counter], skills=[skill, "skills/x"])
    assert definition.tools[0] is counter
    assert definition.skills[0] is skill
    definition.tools[0].function()
    assert counter.function() == "effect called 2 time(s)"  # one shared closure


def test_tools_with_the_same_name_are_rejected() -> None:
    with pytest.raises(DefinitionError, match=r"^tools: items 0 and 1 are both named 'read'"):
        base(tools=[make_tool("read"), make_tool("read")])


def test_string_lists_are_trimmed_and_deduplicated() -> None:
    definition = base(
        disallowed_tools=[" Run_Bash ", "run_bash"],
        memory=[" fact ", "fact", "Fact"],
        mcp_servers=["local", " local"],
    )
    assert definition.disallowed_tools == ("run_bash",)
    assert definition.memory == ("fact", "Fact")  # memory is not lowercased
    assert definition.mcp_servers == ("local",)


def test_none_and_empty_are_different() -> None:
    empty = base(memory=[], disallowed_tools=(), mcp_servers=[])
    assert (empty.memory, empty.disallowed_tools, empty.mcp_servers) == ((), (), ())
    assert base().memory is None
    assert empty != base()


def test_params_are_frozen_json_values() -> None:
    source = {"temperature": 0.2, "stop": ["END"], "extra": {"a": [1, None]}}
    definition = base(params=source)
    source["temperature"] = 1.0
    assert definition.params == {"temperature": 0.2, "stop": ("END",), "extra": {"a": (1, None)}}
    with pytest.raises(TypeError):
        definition.params["temperature"] = 2  # type: ignore[index]
    assert hash(definition) == hash(base(params={"temperature": 0.2}))


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ([("a", 1)], "expected a mapping of model parameters"),
        ({1: "a"}, "params has key 1; expected non-empty string keys"),
        ({"t": float("nan")}, "params['t'] is nan; expected a finite number"),
        ({"t": {1, 2}}, "params['t'] is set; expected a JSON value"),
    ],
)
def test_params_rejections(params: object, problem: str) -> None:
    with pytest.raises(DefinitionError) as info:
        base(params=params)
    assert str(info.value).startswith(f"params: {problem}")


def test_equality_hash_and_repr() -> None:
    tool = make_tool("read")
    a = base(tools=[tool], permission_mode="readonly")
    b = base(tools=[tool], permission_mode="readonly")
    c = base(tools=[make_tool("read")], permission_mode="readonly")
    assert a == b
    assert hash(a) == hash(b)
    assert a != c  # tools compare by identity
    assert repr(a) == (
        "AgentDefinition(name='reviewer', model='inherit', tools=1, skills=0, "
        "permission_mode='readonly')"
    )
    assert isinstance(a.tools[0], Tool)
