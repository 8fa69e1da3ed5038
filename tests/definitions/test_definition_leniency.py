"""The leniency rules for markdown agent files, one by one, and the MCP name helpers."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deputy_runtime.definitions import (
    DefinitionProblem,
    McpToolName,
    Severity,
    agent_definition_from_markdown,
    agent_definition_read,
    agent_definition_write,
    missing_mcp_server_message,
    split_tool_names,
    validate_definitions,
)
from deputy_runtime.definitions._markdown_read import split_names
from deputy_runtime.errors import DefinitionFileError
from tests.definitions._markdown_helpers import agent_file, tool_registry

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def read(path: Path, **kwargs: object) -> tuple[object, list[DefinitionProblem]]:
    warnings: list[DefinitionProblem] = []
    definition = agent_definition_from_markdown(path, on_warning=warnings.append, **kwargs)  # type: ignore[arg-type]
    return definition, warnings


# -- unquoted ': ' ----------------------------------------------------------------------

# Text a one-line plain YAML value can start with and hold (no quotes or indicators first,
# no line breaks, no ' #' comment), always containing ': '.
_WORD = st.text(
    alphabet=st.characters(codec="utf-8", categories=["L", "N"], include_characters="-.,;()'?!/"),
    min_size=1,
    max_size=12,
)
colon_values = st.builds(
    lambda first, rest, tail: f"{first} {rest}: {tail}",
    _WORD.filter(lambda w: w[0].isalnum()),
    _WORD,
    st.lists(_WORD, min_size=1, max_size=5).map(" ".join),
)


@SETTINGS
@given(value=colon_values)
def test_an_unquoted_colon_value_reads_as_its_text_with_a_warning(
    value: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    directory = tmp_path_factory.getbasetemp()
    path = agent_file(directory, f"---\nname: a\ndescription: {value}\n---\nbody\n")
    definition, warnings = read(path)
    assert definition.description == value.strip()  # type: ignore[attr-defined]
    assert [(w.line, w.field, w.severity) for w in warnings] == [
        (3, "description", Severity.WARNING)
    ]
    assert 'put the value in double quotes (description: "...")' in warnings[0].message


def test_only_the_offending_lines_are_quoted_and_typing_elsewhere_is_kept(
    tmp_path: Path,
) -> None:
    path = agent_file(
        tmp_path,
        "---\nname: a\ndescription: Use when: x\nmaxTurns: 7\ninitialPrompt: Start: now\n"
        'model: "inherit"\n---\nbody\n',
    )
    definition, warnings = read(path)
    assert definition.max_requests == 7  # type: ignore[attr-defined]
    assert definition.initial_prompt == "Start: now"  # type: ignore[attr-defined]
    assert [w.line for w in warnings] == [3, 5]


@pytest.mark.parametrize(
    ("frontmatter", "line", "reason"),
    [
        # Quoting the colon line is not enough (a tab indents a list): the original error
        # stays, and says to quote the value, the first of the two fixes.
        (
            "description: Use when: x\ntools:\n\t- Read\n",
            3,
            "mapping values are not allowed in this context (the value of 'description' "
            "contains ': ': put it in double quotes",
        ),
        # A multi-line plain value is not a one-line value: not quoted, still an error.
        ("description: Use when: x\n  and more\n", 3, "mapping values are not allowed"),
        # Indented keys are not top-level lines.
        ("model_args:\n  note: a: b\n", 4, "mapping values are not allowed"),
    ],
)
def test_other_yaml_errors_stay_errors(
    tmp_path: Path, frontmatter: str, line: int, reason: str
) -> None:
    path = agent_file(tmp_path, f"---\nname: a\n{frontmatter}---\nbody\n")
    with pytest.raises(DefinitionFileError) as info:
        read(path, tools=tool_registry())
    assert reason in info.value.reason
    assert info.value.line == line


# -- Agent(...) / Task(...) -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "items"),
    [
        ("Read, Agent(a, b), Grep", ["Read", " Agent(a, b)", " Grep"]),
        ("Task(x),Bash(git log:*, git diff:*)", ["Task(x)", "Bash(git log:*, git diff:*)"]),
        ("Agent(a, b", ["Agent(a, b"]),
        ("a),b", ["a)", "b"]),
    ],
)
def test_names_split_on_commas_outside_parentheses(text: str, items: list[str]) -> None:
    assert split_names(text) == items


def test_subagent_entries_are_dropped_but_a_host_task_tool_is_kept(tmp_path: Path) -> None:
    tools = tool_registry()
    path = agent_file(
        tmp_path, "---\nname: a\ndescription: d\ntools: [Read, 'Agent(x, y)', Task]\n---\nb\n"
    )
    definition, warnings = read(path, tools=tools)
    assert [t.name for t in definition.tools] == ["Read"]  # type: ignore[attr-defined]
    assert len(warnings) == 2
    assert all("deputy subagents never start subagents" in w.message for w in warnings)
    host = {**tools, "Task": tools["Read"]}  # a host that registers a tool named Task
    definition, warnings = read(path, tools=host)
    assert len(definition.tools) == 1  # type: ignore[attr-defined]  # the same object twice
    assert len(warnings) == 1


# -- MCP names --------------------------------------------------------------------------


def test_split_tool_names_and_wildcards() -> None:
    mcp, rest = split_tool_names(
        ["read_file", "mcp__github__create_issue", "mcp__slack", "mcp__jira__*", "grep"]
    )
    assert rest == ("read_file", "grep")
    assert mcp == (
        McpToolName("mcp__github__create_issue", "github", "create_issue"),
        McpToolName("mcp__slack", "slack", None),
        McpToolName("mcp__jira__*", "jira", None),
    )
    assert split_tool_names(["mcp__a__b__c"])[0] == (McpToolName("mcp__a__b__c", "a", "b__c"),)
    for bad in ("mcp__*", "mcp__git*__x", "mcp__s__get_*", "mcp__", "mcp__a__"):
        with pytest.raises(ValueError, match="mcp__"):
            split_tool_names([bad])


def test_missing_server_message_says_how_to_attach() -> None:
    message = missing_mcp_server_message("github", "triager")
    assert message.startswith("no MCP server named 'github': agent 'triager' names its tools")
    assert "attach it with an MCP server called 'github'" in message


def test_mcp_names_round_trip_through_yaml_and_warn_in_validate(
    tmp_path: Path, tools: dict[str, object]
) -> None:
    path = tmp_path / "a.yaml"
    path.write_text(
        "version: 1\nname: a\ndescription: d\nprompt: p\n"
        "tools: [read_file, mcp__github__create_issue, mcp__slack]\nmcp_servers: [slack]\n"
    )
    definition = agent_definition_read(path, tools)  # type: ignore[arg-type]
    assert definition.mcp_tools == ("mcp__github__create_issue", "mcp__slack")
    agent_definition_write(definition, tmp_path / "b.yaml", tools)  # type: ignore[arg-type]
    assert "- mcp__github__create_issue\n- mcp__slack\n" in (tmp_path / "b.yaml").read_text()
    assert agent_definition_read(tmp_path / "b.yaml", tools) == definition  # type: ignore[arg-type]
    report = validate_definitions([path], tools)  # type: ignore[arg-type]
    assert [(p.line, p.field, p.severity) for p in report.problems] == [
        (5, "tools", Severity.WARNING)
    ]
    assert report.problems[0].message.startswith(
        "tools: no MCP server named 'github' is configured, so mcp__github__create_issue "
        "cannot resolve yet"
    )
    assert validate_definitions([path], tools, known_mcp_servers={"github"}).problems == ()  # type: ignore[arg-type]


def test_malformed_mcp_names_are_errors_in_both_formats(
    tmp_path: Path, tools: dict[str, object]
) -> None:
    yaml_path = tmp_path / "a.yaml"
    yaml_path.write_text("version: 1\nname: a\ndescription: d\nprompt: p\ntools: [mcp__x__*y]\n")
    with pytest.raises(DefinitionFileError, match="wildcard pattern") as info:
        agent_definition_read(yaml_path, tools)  # type: ignore[arg-type]
    assert info.value.line == 5
    md = agent_file(tmp_path, "---\nname: a\ndescription: d\ntools: mcp__\n---\nb\n")
    with pytest.raises(DefinitionFileError, match="is not an MCP tool name"):
        read(md)


# -- descriptions -----------------------------------------------------------------------


def test_a_cut_description_loses_the_whitespace_at_the_cut_and_can_be_written(
    tmp_path: Path, tools: dict[str, object]
) -> None:
    text = "x" * 1020 + "    <example>more</example>"
    path = agent_file(tmp_path, f"---\nname: a\ndescription: '{text}'\ntools: []\n---\nb\n")
    definition, warnings = read(path)
    assert definition.description == "x" * 1020  # type: ignore[attr-defined]
    assert "routing examples" in warnings[0].message
    agent_definition_write(definition, tmp_path / "a.yaml")  # type: ignore[arg-type]
    from deputy_runtime.definitions import agent_definition_to_markdown

    agent_definition_to_markdown(definition, tmp_path / "b.md")  # type: ignore[arg-type]
    assert read(tmp_path / "b.md") == (definition, [])


def test_the_schema_accepts_mcp_names_in_tools() -> None:
    import jsonschema

    from deputy_runtime.definitions import AGENT_DEFINITION_SCHEMA

    base = {"version": 1, "name": "a", "description": "d", "prompt": "p"}
    for tools in (["read_file", "mcp__github__create_issue"], ["mcp__slack", "mcp__jira__*"]):
        jsonschema.validate({**base, "tools": tools}, AGENT_DEFINITION_SCHEMA)
    for tools in (["mcp__*"], ["Bash(git:*)"]):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**base, "tools": tools}, AGENT_DEFINITION_SCHEMA)


_ENTRIES = st.sampled_from(
    [
        "Read",
        "Grep",
        "Bash",
        "Agent",
        "Task",
        "Agent(explorer)",
        "Task(a, b)",
        "Bash(git:*)",
        "Read(/etc/*)",
        "mcp__github__create_issue",
        "mcp__slack",
        "mcp__jira__*",
        "mcp__*",
        "mcp__git*__x",
    ]
)


@SETTINGS
@given(entries=st.lists(_ENTRIES, min_size=1, max_size=6), as_list=st.booleans())
def test_lenient_tools_never_grant_more_than_the_file_names(
    entries: list[str], as_list: bool, tmp_path_factory: pytest.TempPathFactory
) -> None:
    tools = tool_registry()
    value = "[" + ", ".join(f"'{e}'" for e in entries) + "]" if as_list else ", ".join(entries)
    path = agent_file(
        tmp_path_factory.getbasetemp(), f"---\nname: a\ndescription: d\ntools: {value}\n---\nb\n"
    )
    widening = {"Bash(git:*)", "Read(/etc/*)", "mcp__*", "mcp__git*__x"}
    if widening & set(entries):  # entries that would widen access are errors
        with pytest.raises(DefinitionFileError):
            read(path, tools=tools)
        return
    definition, _ = read(path, tools=tools)
    plain = {e for e in entries if "(" not in e and not e.startswith("mcp__")}
    granted = {tool.name for tool in definition.tools}  # type: ignore[attr-defined]
    assert granted <= plain - {"Agent", "Task"}
    assert set(definition.mcp_tools or ()) <= set(entries)  # type: ignore[attr-defined]
