"""Building workflow inputs on the client: what crosses the durable boundary, what is
refused with a message naming it, and the JSON round trip through the data converter.
No server needed."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, TypedDict, Unpack

import msgspec
import pytest

from deputy_runtime import (
    AgentDefinition,
    DefinitionError,
    PermissionAllow,
    PermissionMode,
    Permissions,
    Skill,
    Tool,
    UsageLimits,
    tools_file,
)
from deputy_runtime.errors import SkillError
from deputy_runtime.temporal import LeadInput, agent_spec, data_converter, lead_input


class _DefinitionFields(TypedDict, total=False):
    """The ``AgentDefinition`` fields these tests set (the rest keep their defaults)."""

    tools: tuple[Tool, ...]
    model: str
    skills: tuple[Skill | str, ...]
    disallowed_tools: tuple[str, ...]
    memory: tuple[str, ...]
    max_requests: int
    mcp_tools: tuple[str, ...]


def _definition(tmp_path: Path, **fields: Unpack[_DefinitionFields]) -> AgentDefinition:
    files = {t.name: t for t in tools_file(tmp_path)}
    fields.setdefault("tools", (files["read_file"], files["grep_files"]))
    return AgentDefinition("reader", "Reads.", "You read.", **fields)


def test_a_definition_travels_as_names_and_a_resolved_model(tmp_path: Path) -> None:
    definition = _definition(
        tmp_path, memory=("Be brief.",), model="gpt-x", max_requests=3, disallowed_tools=("x",)
    )
    spec = agent_spec(definition, "openai/gpt-4.1-mini")
    assert spec.tools == ("read_file", "grep_files")
    assert spec.system_prompt == "You read.\n\n# Memory\n\n- Be brief."
    assert spec.model == "openai/gpt-x"  # a model id on the lead's provider
    assert (spec.max_requests, spec.disallowed_tools) == (3, ("x",))
    assert agent_spec(_definition(tmp_path), "test").model == "inherit"
    assert agent_spec(_definition(tmp_path, model="anthropic/claude-x"), "test").model == (
        "anthropic/claude-x"
    )


def test_lead_input_round_trips_through_the_data_converter(tmp_path: Path) -> None:
    request = lead_input(
        "Read it",
        [_definition(tmp_path, max_requests=2)],
        model="test",
        usage_limits=UsageLimits(max_requests=7, max_cost_usd=0.5),
        permissions=Permissions(mode=PermissionMode.READONLY, deny=frozenset({"write_file"})),
    )
    [payload] = data_converter.payload_converter.to_payloads([request])
    [back] = data_converter.payload_converter.from_payloads([payload], [LeadInput])
    assert back == request
    assert back.permissions.deny == ("write_file",)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"task": "  "}, "task must be a non-blank string"),
        (
            {"permissions": Permissions(can_use_tool=lambda *a: PermissionAllow())},
            "can_use_tool callbacks cannot cross",
        ),
    ],
)
def test_lead_input_refuses_what_cannot_cross(
    tmp_path: Path, kwargs: dict[str, Any], message: str
) -> None:
    arguments: dict[str, Any] = {"task": "Read it", "model": "test", **kwargs}
    task = arguments.pop("task")
    with pytest.raises(ValueError, match=message):
        lead_input(task, [_definition(tmp_path)], **arguments)


def test_skills_and_mcp_names_travel_by_name_and_duplicates_are_refused(tmp_path: Path) -> None:
    skill = Skill(name="citing", description="Citing.", instructions="Cite.")
    spec = agent_spec(
        _definition(tmp_path, skills=(skill,), mcp_tools=("mcp__notes__add_note",)), "test"
    )
    assert (spec.skills, spec.mcp_tools, spec.mcp_servers) == (
        ("citing",),
        ("mcp__notes__add_note",),
        (),
    )
    with pytest.raises(SkillError, match="some-skill: skill file not found"):
        agent_spec(_definition(tmp_path, skills=("some-skill",)), "test")
    with pytest.raises(DefinitionError, match="'reader' is given twice"):
        lead_input("Read it", [_definition(tmp_path), _definition(tmp_path)], model="test")


@pytest.mark.parametrize(
    "schema", [{"type": "object", "properties": {"ok": {"type": "boolean"}}}, None]
)
def test_an_output_schema_travels_as_its_json_schema(schema: dict[str, Any] | None) -> None:
    import msgspec

    class Verdict(msgspec.Struct):
        ok: bool

    structured = AgentDefinition(
        "judge", "d", "p", output_schema=Verdict if schema is None else schema, output_retries=1
    )
    spec = agent_spec(structured, "test/model")
    # A type travels as msgspec's schema of it, its $refs inlined (checkable durably).
    inlined = {"title": "Verdict", "type": "object", "properties": {"ok": {"type": "boolean"}},
               "required": ["ok"]}  # fmt: skip
    expected = inlined if schema is None else schema
    assert (spec.output_schema, spec.output_retries) == (expected, 1)
    [carried] = lead_input("x", [structured], model="test").sub_agents
    # It crosses the durable boundary as plain data and comes back equal.
    assert msgspec.json.decode(msgspec.json.encode(carried), type=type(carried)) == carried
    plain = structured.replace(output_schema=None, output_retries=None)
    assert agent_spec(plain, "test/model").output_schema is None


def test_a_type_whose_schema_cannot_be_checked_durably_is_refused() -> None:
    from deputy_runtime import DelegationBindingError

    structured = AgentDefinition("stamper", "d", "p", output_schema=_Stamp)
    with pytest.raises(DelegationBindingError, match=r"output_schema _Stamp cannot be checked"):
        agent_spec(structured, "test/model")


class _Stamp(msgspec.Struct):
    at: Annotated[str, msgspec.Meta(pattern="^[0-9]+$")]  # "pattern": not in the subset


def test_a_compaction_threshold_is_refused_on_the_durable_path() -> None:
    from deputy_runtime import DelegationBindingError

    compacting = AgentDefinition("reader", "d", "p", compact_at=0.5)
    expected = "has compact_at: compaction is not supported durably yet"
    with pytest.raises(DelegationBindingError, match=expected):
        agent_spec(compacting, "test/model")
    with pytest.raises(DelegationBindingError, match=expected):
        lead_input("x", [compacting], model="test")
    assert agent_spec(compacting.replace(compact_at=None), "test/model").name == "reader"
