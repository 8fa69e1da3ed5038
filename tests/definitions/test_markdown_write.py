"""Writing markdown agent files: exact output, refusals, atomic install, round trips."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deputy_runtime.definitions import (
    AgentDefinition,
    agent_definition,
    agent_definition_from_markdown,
    agent_definition_read,
    agent_definition_to_markdown,
    agent_definition_write,
)
from deputy_runtime.definitions._frontmatter import LINE_BREAKS
from deputy_runtime.errors import DefinitionError, DefinitionFileError
from tests.definitions._markdown_helpers import make_tool, skill_registry, tool_registry

TOOLS = tool_registry()
SKILLS = skill_registry()


def _definition(**changes: object) -> AgentDefinition:
    base = agent_definition(
        "reviewer",
        "Reviews code for bugs. Use after every change.",
        "You are a careful reviewer.\n\n## Steps\n1. Read the diff.",
        tools=[TOOLS["Read"], TOOLS["Grep"]],
    )
    return base.replace(**changes) if changes else base


def test_exact_output_of_a_full_definition(tmp_path: Path) -> None:
    definition = _definition(
        model="anthropic/claude-sonnet-4-5",
        skills=[SKILLS["api-style"], "/srv/skills/sql-review"],
        disallowed_tools=["Bash", "write"],
        mcp_servers=["github"],
        initial_prompt="Start with the failing test.",
        max_requests=12,
        permission_mode="full",
        params={"temperature": 0.2, "stop": ["END"]},
    )
    path = agent_definition_to_markdown(definition, tmp_path / "reviewer.md", TOOLS, SKILLS)
    assert path == tmp_path / "reviewer.md"
    assert path.read_bytes() == (
        b"---\n"
        b"name: reviewer\n"
        b"description: Reviews code for bugs. Use after every change.\n"
        b"tools: [Read, Grep]\n"
        b"disallowedTools: [bash, write]\n"
        b"model: anthropic/claude-sonnet-4-5\n"
        b"permissionMode: bypassPermissions\n"
        b"maxTurns: 12\n"
        b"skills: [api-style, sql-review]\n"
        b"mcpServers: [github]\n"
        b"initialPrompt: Start with the failing test.\n"
        b"model_args:\n"
        b"  temperature: 0.2\n"
        b"  stop:\n"
        b"  - END\n"
        b"---\n"
        b"You are a careful reviewer.\n\n## Steps\n1. Read the diff.\n"
    )
    assert agent_definition_from_markdown(path, TOOLS, SKILLS) == definition


def test_defaults_are_omitted_but_empty_lists_are_kept(tmp_path: Path) -> None:
    definition = _definition(tools=[], disallowed_tools=[], mcp_servers=[], params={})
    path = agent_definition_to_markdown(definition, tmp_path / "a.md", TOOLS)
    text = path.read_text()
    assert "tools: []\n" in text
    assert "disallowedTools: []\n" in text
    assert "mcpServers: []\n" in text
    assert "model_args: {}\n" in text
    assert "model: inherit\n" in text
    for key in ("skills", "permissionMode", "maxTurns", "initialPrompt"):
        assert key not in text
    back = agent_definition_from_markdown(path, TOOLS)
    assert back == definition
    assert back.disallowed_tools == ()
    assert _definition().disallowed_tools is None


@pytest.mark.parametrize(
    ("mode", "written"),
    [
        ("standard", "default"),
        ("plan", "plan"),
        ("full", "bypassPermissions"),
        ("readonly", "readonly"),
    ],
)
def test_permission_modes_are_written_with_claude_code_names(
    tmp_path: Path, mode: str, written: str
) -> None:
    path = agent_definition_to_markdown(_definition(permission_mode=mode), tmp_path / "a.md", TOOLS)
    assert f"permissionMode: {written}\n" in path.read_text()
    assert agent_definition_from_markdown(path, TOOLS).permission_mode == mode


@pytest.mark.parametrize(
    "text",
    [
        "yes",
        "123",
        "null",
        "on",
        "1.5",
        "2024-01-02",
        "- item",
        "a: b",
        "# not a comment",
        "line one\n---\nline three",
        "  ---  \nx",
        "trailing spaces   \nnext",
        "tab\tand NEL\x85 and LS\u2028 and PS\u2029 and VT\x0b and FF\x0c and \x1c\x1d\x1e",
        "'quoted' \"double\"",
        "ünïcödé 日本語 🚀",
        "multi\nline\n\nwith blank",
    ],
)
def test_strings_that_need_care_read_back_exactly(tmp_path: Path, text: str) -> None:
    definition = _definition(
        description=f"x {text} y",
        initial_prompt=text,
        mcp_servers=[text.strip() or "x"],
        disallowed_tools=[text.strip() or "x"],
        params={text: text},
    )
    path = agent_definition_to_markdown(definition, tmp_path / "a.md", TOOLS)
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        if line.strip() == "---":
            break
        assert not any(c in LINE_BREAKS for c in line)
    assert agent_definition_from_markdown(path, TOOLS) == definition


def test_prompt_and_description_lose_surrounding_whitespace(tmp_path: Path) -> None:
    definition = _definition(description="  Reviews.\n", prompt="\n  You review.\n\n")
    back = agent_definition_from_markdown(
        agent_definition_to_markdown(definition, tmp_path / "a.md", TOOLS), TOOLS
    )
    assert (back.description, back.prompt) == ("Reviews.", "You review.")
    assert back == definition.replace(description="Reviews.", prompt="You review.")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"memory": ["User prefers tabs."]}, "memory cannot be written"),
        ({"memory": []}, "memory cannot be written"),
        ({"prompt": "\n".join(["l"] * 1001)}, "1001 lines"),
        ({"prompt": "a\u2028b"}, r"line separators \(U\+2028\)"),
        ({"prompt": "a\r\nb"}, r"U\+000D"),
        ({"description": "d" * 1025}, "1025 characters"),
        ({"model": " sonnet"}, "model cannot be written to markdown exactly"),
        ({"model": "Inherit"}, "model cannot be written to markdown exactly"),
    ],
)
def test_fields_markdown_cannot_carry_are_refused(
    tmp_path: Path, changes: dict[str, object], message: str
) -> None:
    path = tmp_path / "a.md"
    with pytest.raises(DefinitionFileError, match=message) as info:
        agent_definition_to_markdown(_definition(**changes), path, TOOLS)
    assert info.value.path == path
    assert os.listdir(tmp_path) == []


def test_every_field_markdown_cannot_carry_is_named_in_one_error(tmp_path: Path) -> None:
    definition = _definition(
        memory=["User prefers tabs."],
        prompt="a\u2028b\n" + "\n".join(["l"] * 1001),
        description="d" * 1025,
        model="Inherit ",
    )
    path = tmp_path / "a.md"
    with pytest.raises(DefinitionFileError) as info:
        agent_definition_to_markdown(definition, path, TOOLS)
    reason = info.value.reason
    assert reason.startswith(
        "4 fields cannot be written to a markdown agent file (description, prompt, model, memory): "
    ), reason
    for part in (
        "description cannot be written to markdown: it has 1025 characters",
        "line separators (U+2028)",
        "it has 1003 lines",
        "model cannot be written to markdown exactly: it would read back as 'inherit' "
        "instead of 'Inherit '",
        "memory cannot be written to a markdown agent file",
    ):
        assert part in reason, part
    assert reason.count("prompt cannot be written") == 2  # both prompt problems, once each
    assert "\n" not in reason
    assert os.listdir(tmp_path) == []


def test_uncarried_fields_are_reported_before_a_registry_problem(tmp_path: Path) -> None:
    stranger = make_tool("Stranger")
    definition = _definition(tools=[stranger], memory=["x"], description="d" * 1025)
    with pytest.raises(DefinitionFileError) as info:
        agent_definition_to_markdown(definition, tmp_path / "a.md", TOOLS)
    assert info.value.reason.startswith("2 fields cannot be written to a markdown agent file")
    assert os.listdir(tmp_path) == []


def test_limits_that_fit_are_written(tmp_path: Path) -> None:
    definition = _definition(prompt="\n".join(["l"] * 1000), description="d" * 1024)
    path = agent_definition_to_markdown(definition, tmp_path / "a.md", TOOLS)
    assert agent_definition_from_markdown(path, TOOLS) == definition


def test_tools_must_match_one_registry_entry(tmp_path: Path) -> None:
    stranger = make_tool("Stranger")
    with pytest.raises(DefinitionFileError, match="exactly one registry entry"):
        agent_definition_to_markdown(_definition(tools=[stranger]), tmp_path / "a.md", TOOLS)
    read = TOOLS["Read"]
    with pytest.raises(DefinitionFileError, match="exactly one registry entry"):
        agent_definition_to_markdown(
            _definition(tools=[read]), tmp_path / "a.md", {"Read": read, "read": read}
        )
    assert os.listdir(tmp_path) == []


def test_no_overwrite_keeps_the_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "a.md"
    path.write_bytes(b"original")
    with pytest.raises(DefinitionFileError, match="already exists"):
        agent_definition_to_markdown(_definition(), path, TOOLS)
    assert path.read_bytes() == b"original"
    agent_definition_to_markdown(_definition(), path, TOOLS, overwrite=True)
    assert agent_definition_from_markdown(path, TOOLS) == _definition()
    assert os.listdir(tmp_path) == ["a.md"]


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(DefinitionError, match="expected an AgentDefinition"):
        agent_definition_to_markdown("nope", tmp_path / "a.md")  # type: ignore[arg-type]
    with pytest.raises(DefinitionFileError, match="overwrite must be True or False"):
        agent_definition_to_markdown(_definition(), tmp_path / "a.md", TOOLS, overwrite=1)  # type: ignore[arg-type]
    with pytest.raises(DefinitionFileError, match="tools registry"):
        agent_definition_to_markdown(_definition(), tmp_path / "a.md", {"bad key": TOOLS["Read"]})
    with pytest.raises(DefinitionFileError, match="does not exist; create it first"):
        agent_definition_to_markdown(_definition(), tmp_path / "missing" / "a.md", TOOLS)
    assert os.listdir(tmp_path) == []


# --- round trip: YAML -> markdown -> YAML ----------------------------------------------------

_EXOTIC = LINE_BREAKS.replace("\n", "")
_SURROGATES: tuple[Literal["Cs"]] = ("Cs",)  # lone surrogates cannot be encoded
_text = st.text(st.characters(exclude_categories=_SURROGATES), min_size=1, max_size=40)
_stripped = _text.map(str.strip).filter(bool)
_prompt_text = (
    st.text(
        st.characters(exclude_categories=_SURROGATES, exclude_characters=_EXOTIC),
        min_size=1,
        max_size=300,
    )
    .map(str.strip)
    .filter(bool)
)
_json_leaf: st.SearchStrategy[object] = (
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | _text
)
_json_leaf |= st.floats(allow_nan=False, allow_infinity=False)
_params = st.dictionaries(
    _stripped,
    st.recursive(
        _json_leaf,
        lambda c: st.lists(c, max_size=3) | st.dictionaries(_stripped, c, max_size=3),
        max_leaves=6,
    ),
    max_size=4,
)


@st.composite
def _definitions(draw: st.DrawFn) -> AgentDefinition:
    tool_keys = draw(st.lists(st.sampled_from(sorted(TOOLS)), unique=True, max_size=5))
    skill_keys = draw(st.lists(st.sampled_from(sorted(SKILLS)), unique=True))
    model = draw(st.just("inherit") | _stripped.filter(lambda m: m.lower() != "inherit"))
    return agent_definition(
        draw(st.from_regex(r"[a-z][a-z0-9_-]{0,20}", fullmatch=True)),
        draw(st.text(min_size=1, max_size=200).map(str.strip).filter(bool)),
        draw(_prompt_text),
        tools=[TOOLS[key] for key in tool_keys],
        model=model,
        skills=[SKILLS[key] for key in skill_keys],
        disallowed_tools=draw(st.none() | st.lists(_stripped, max_size=3)),
        mcp_servers=draw(st.none() | st.lists(_stripped, max_size=3)),
        initial_prompt=draw(st.none() | _text.filter(str.strip)),
        max_requests=draw(st.none() | st.integers(0, 2**31 - 1)),
        permission_mode=draw(st.none() | st.sampled_from(["standard", "plan", "readonly", "full"])),
        params=draw(st.none() | _params),
    )


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(definition=_definitions())
def test_round_trip_yaml_markdown_yaml(tmp_path: Path, definition: AgentDefinition) -> None:
    for name in os.listdir(tmp_path):
        os.unlink(tmp_path / name)
    first = agent_definition_write(definition, tmp_path / "a.yaml", TOOLS, SKILLS)
    loaded = agent_definition_read(first, TOOLS, SKILLS)
    md = agent_definition_to_markdown(loaded, tmp_path / "a.md", TOOLS, SKILLS)
    from_md = agent_definition_from_markdown(md, TOOLS, SKILLS)
    assert from_md == loaded == definition
    second = agent_definition_write(from_md, tmp_path / "b.yaml", TOOLS, SKILLS)
    assert second.read_bytes() == first.read_bytes()
