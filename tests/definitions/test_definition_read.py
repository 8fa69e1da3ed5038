"""Reading YAML definition files (format 1): valid input and every rejection, on real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from deputy_runtime.definitions import agent_definition, agent_definition_read
from deputy_runtime.errors import DefinitionFileError
from deputy_runtime.skills import Skill
from deputy_runtime.tools import Tool
from tests.definitions._definition_helpers import MIN, make_tool, write


def read_error(
    tmp_path: Path, text: str, tools: object = None, skills: object = None
) -> DefinitionFileError:
    path = write(tmp_path / "agent.yaml", text)
    with pytest.raises(DefinitionFileError) as info:
        agent_definition_read(path, tools, skills)  # type: ignore[arg-type]
    assert info.value.path == path
    return info.value


def test_minimal_file(tmp_path: Path) -> None:
    path = write(tmp_path / "agent.yaml", MIN)
    assert agent_definition_read(path) == agent_definition(
        "reviewer", "Reviews text", "Read carefully"
    )
    assert agent_definition_read(str(path), {}, {}) == agent_definition_read(path)


def test_full_file_resolves_registries_in_file_order(
    tmp_path: Path, tools: dict[str, Tool], skills: dict[str, Skill | str], skill: Skill
) -> None:
    text = MIN + (
        "tools: [grep_files, read_file]\n"
        "model: anthropic/claude-sonnet-5\n"
        "skills: [checklist, style]\n"
        "disallowed_tools: [Run_Bash]\n"
        "memory: [fact one, fact two]\n"
        "mcp_servers: local\n"
        "initial_prompt: Start here\n"
        "max_requests: 3\n"
        "permission_mode: readonly\n"
        "params: {temperature: 0.2, max_tokens: 500}\n"
    )
    definition = agent_definition_read(write(tmp_path / "a.yaml", text), tools, skills)
    assert definition.tools == (tools["grep_files"], tools["read_file"])
    assert definition.tools[1] is tools["read_file"]
    assert definition.skills[0] == "skills/checklist"
    assert definition.skills[1] is skill
    assert definition.disallowed_tools == ("run_bash",)
    assert definition.memory == ("fact one", "fact two")
    assert definition.mcp_servers == ("local",)
    assert (definition.model, definition.initial_prompt) == (
        "anthropic/claude-sonnet-5",
        "Start here",
    )
    assert (definition.max_requests, definition.permission_mode) == (3, "readonly")
    assert definition.params == {"temperature": 0.2, "max_tokens": 500}


def test_single_string_shorthand(tmp_path: Path, tools: dict[str, Tool]) -> None:
    path = write(tmp_path / "a.yaml", MIN + "tools: read_file\nmemory: fact\n")
    definition = agent_definition_read(path, tools)
    assert definition.tools == (tools["read_file"],)
    assert definition.memory == ("fact",)


def test_multiline_prompt_and_name_canonicalised(tmp_path: Path) -> None:
    text = MIN.replace("name: reviewer", "name: REVIEWER").replace(
        "prompt: Read carefully", "prompt: |\n  Line one.\n    Indented.\n"
    )
    definition = agent_definition_read(write(tmp_path / "a.yaml", text))
    assert definition.prompt == "Line one.\n  Indented.\n"
    assert definition.name == "reviewer"


def test_nulls_where_allowed(tmp_path: Path) -> None:
    fields = ("memory", "disallowed_tools", "mcp_servers", "initial_prompt", "max_requests")
    text = MIN + "".join(f"{f}: null\n" for f in (*fields, "permission_mode"))
    definition = agent_definition_read(write(tmp_path / "a.yaml", text))
    for field in (*fields, "permission_mode"):
        assert getattr(definition, field) is None


def test_empty_sequences_are_not_null(tmp_path: Path) -> None:
    text = MIN + "memory: []\ndisallowed_tools: []\nmcp_servers: []\nmax_requests: 0\n"
    definition = agent_definition_read(write(tmp_path / "a.yaml", text))
    assert (definition.memory, definition.disallowed_tools, definition.mcp_servers) == ((), (), ())
    assert definition.max_requests == 0


def test_quoted_yaml11_words_are_strings(tmp_path: Path) -> None:
    text = MIN.replace("reviewer", '"yes"').replace("Read carefully", '"123"')
    definition = agent_definition_read(write(tmp_path / "a.yaml", text))
    assert (definition.name, definition.prompt) == ("yes", "123")


@pytest.mark.parametrize(
    ("extra", "line", "problem"),
    [
        ("unexpected: true\n", 5, "Unknown field 'unexpected'; Allowed fields: version, name,"),
        ("sub_agents: []\n", 5, "Unknown field 'sub_agents'; nested subagents are not part"),
        ("promt: x\n", 5, "Unknown field 'promt'; did you mean 'prompt'?"),
        ("name: duplicate\n", 5, "Duplicate key 'name' (first at line 2)"),
        ("params: {a: 1, a: 2}\n", 5, "Duplicate key 'a' (first at line 5)"),
        ("tools: null\n", 5, "tools may not be null; write tools: [] for none"),
        ("skills: null\n", 5, "skills may not be null; write skills: [] for none"),
        ("model: null\n", 5, "model may not be null; omit the field to use the lead's model"),
        ("memory: [true]\n", 5, "memory: item 1 is the boolean true, expected a non-empty string"),
        ("memory: [no]\n", 5, "memory: item 1 is the boolean false, expected a non-empty string;"),
        ("disallowed_tools: ['']\n", 5, "disallowed_tools: item 1 is the string ''"),
        ("memory: {a: b}\n", 5, "memory: expected a sequence of strings (or one string), got a"),
        ("permission_mode: invalid\n", 5, "permission_mode: Invalid permission mode 'invalid'"),
        ("max_requests: -1\n", 5, "max_requests: expected a non-negative integer (e.g. 10) or"),
        ("max_requests: '2'\n", 5, "max_requests: expected a non-negative integer (e.g. 10) or"),
        ("max_requests: 2.5\n", 5, "max_requests: expected a non-negative integer"),
        ("max_requests: 2.0\n", 5, "max_requests: expected a non-negative integer"),
        ("max_requests: true\n", 5, "max_requests: expected a non-negative integer"),
        ("max_requests: 99999999999\n", 5, "max_requests: expected a non-negative int of at most"),
        ("initial_prompt: [one, two]\n", 5, "initial_prompt: expected a string, got a sequence"),
        ("model: 2024-01-01\n", 5, "model: expected a string, got the date 2024-01-01; put it"),
        ("params: [temperature]\n", 5, "params: expected a mapping of model parameters"),
        ("params: {t: .nan}\n", 5, "params: params['t'] is nan; expected a finite number"),
        ("<<: {a: 1}\n", 5, "Merge keys ('<<') are not supported"),
        ("tools: &t []\nskills: *t\n", 5, "YAML anchors (&t / *t) are not supported"),
        ("memory: [*undefined]\n", 5, "YAML aliases are not supported"),
        ("---\nname: other\n", 5, "Expected exactly one YAML document"),
        ("memory:\n\t- a\n", 6, "(a tab; YAML indentation must use spaces)"),
    ],
)
def test_bad_content_points_at_the_line(
    tmp_path: Path, extra: str, line: int, problem: str
) -> None:
    error = read_error(tmp_path, MIN + extra)
    assert error.reason.startswith(problem) or problem in error.reason, error.reason
    assert error.line == line


@pytest.mark.parametrize(
    ("replace", "by", "line", "problem"),
    [
        ("version: 1", "version: 3", 1, "version must be the integer 1 or 2, got the number 3;"),
        (
            "version: 1",
            'version: "1"',
            1,
            "version must be the integer 1 or 2, got the string '1'; write it",
        ),
        (
            "version: 1",
            "version: true",
            1,
            "version must be the integer 1 or 2, got the boolean true;",
        ),
        ("name: reviewer", "name: null", 2, "name may not be null; give name a non-empty string"),
        (
            "version: 1",
            "version: 1.0",
            1,
            "version must be the integer 1 or 2, got the number 1.0;",
        ),
        ("version: 1\n", "", None, "Missing 'version: 1'"),
        ("name: reviewer", "name: yes", 2, "name: expected a string, got the boolean true; put it"),
        ("Read carefully", "123", 4, "prompt: expected a string, got the number 123; put it in"),
        ("name: reviewer", "name: two words", 2, "name: 'two words' is not a valid agent name"),
        ("description: Reviews text", "description: ' '", 3, "description: expected a non-empty"),
    ],
)
def test_bad_scalar_fields(
    tmp_path: Path, replace: str, by: str, line: int | None, problem: str
) -> None:
    error = read_error(tmp_path, MIN.replace(replace, by))
    assert error.reason.startswith(problem), error.reason
    assert error.line == line


@pytest.mark.parametrize("field", ["name", "description", "prompt"])
def test_missing_required_field(tmp_path: Path, field: str) -> None:
    text = "".join(line + "\n" for line in MIN.splitlines() if not line.startswith(field))
    error = read_error(tmp_path, text)
    assert error.reason == f"Required fields: name, description, prompt; missing: {field}"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("- not\n- a mapping\n", "but it holds a sequence"),
        ("", "but the file is empty"),
        ("# only a comment\n", "but the file is empty"),
        ("just a scalar\n", "but it holds the string 'just a scalar'"),
    ],
)
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str, problem: str) -> None:
    error = read_error(tmp_path, text)
    assert error.reason.startswith("Expected a mapping containing only documented fields")
    assert error.reason.endswith(problem)


def test_expression_tags_are_rejected_and_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for tagged in (
        "!expr writeLines('executed','marker')",
        "!!python/object/apply:os.system ['touch marker']",
        "!!python/name:os.system",
        "!custom value",
        "!!binary aGVsbG8=",
    ):
        error = read_error(tmp_path, MIN.replace("Read carefully", tagged))
        assert "is not allowed; definition files may only use the core YAML tags" in error.reason
        assert (error.line, error.column) == (4, 9)
    assert not (tmp_path / "marker").exists()


@pytest.mark.parametrize(
    ("line", "registry_keys", "problem"),
    [
        ("tools: [unregistered]", ["read"], "'unregistered' is not a registry key; the tools"),
        (
            "tools: [read, read]",
            ["read"],
            "Unknown or duplicate tools references: 'read' is listed",
        ),
        ("tools: [Read]", ["read"], "keys are case-sensitive; did you mean 'read'?"),
        ("tools: [read]", [], "no tools registry was passed"),
        ("tools: [read, 3]", ["read"], "tools: item 2 is the number 3, expected a non-empty"),
    ],
)
def test_tool_references(tmp_path: Path, line: str, registry_keys: list[str], problem: str) -> None:
    registry = {key: make_tool(key) for key in registry_keys}
    error = read_error(tmp_path, MIN + line + "\n", registry)
    assert problem in error.reason
    assert error.line == 5
    assert error.column is not None


def test_a_literal_path_as_skill_is_just_an_unknown_key(
    tmp_path: Path, skills: dict[str, Skill | str]
) -> None:
    error = read_error(tmp_path, MIN + "skills: [/unapproved/path]\n", None, skills)
    assert "Unknown or duplicate skills references: '/unapproved/path'" in error.reason


def never_call() -> None:
    raise AssertionError("a registry value was called")


@pytest.mark.parametrize(
    ("tools", "problem"),
    [
        ([make_tool("read")], "The tools registry must be a mapping of key -> a Tool object"),
        ({"read": never_call}, "The tools registry entry 'read' is function; expected a Tool"),
        ({"package::read": make_tool("read")}, "The tools registry key 'package::read' is invalid"),
        ({"": make_tool("read")}, "The tools registry key '' is invalid"),
        ({1: make_tool("read")}, "The tools registry key 1 is invalid"),
    ],
)
def test_bad_tool_registries_fail_before_reading(
    tmp_path: Path, tools: object, problem: str
) -> None:
    missing = tmp_path / "does-not-exist.yaml"
    with pytest.raises(DefinitionFileError) as info:
        agent_definition_read(missing, tools)  # type: ignore[arg-type]
    assert info.value.reason.startswith(problem)


@pytest.mark.parametrize(
    ("skills", "problem"),
    [
        ({"s": 3}, "The skills registry entry 's' is int; expected a Skill object or a non-empty"),
        ({"s": ""}, "The skills registry entry 's' is str; expected"),
        ("skills/x", "The skills registry must be a mapping"),
    ],
)
def test_bad_skill_registries(tmp_path: Path, skills: object, problem: str) -> None:
    with pytest.raises(DefinitionFileError) as info:
        agent_definition_read(tmp_path / "missing.yaml", None, skills)  # type: ignore[arg-type]
    assert info.value.reason.startswith(problem)


def test_invalid_utf8_in_prompt(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_bytes(MIN.encode().replace(b"carefully", b"\xff\xfe"))
    with pytest.raises(DefinitionFileError, match="is not valid UTF-8"):
        agent_definition_read(path)


def test_constructor_error_becomes_file_error(tmp_path: Path) -> None:
    error = read_error(tmp_path, MIN.replace("reviewer", '"two words"'))
    assert type(error) is DefinitionFileError
    assert error.reason.startswith("name: 'two words' is not a valid agent name")
    assert str(error).startswith(f"{error.path}:2: name:")


def test_reading_has_no_side_effects(tmp_path: Path) -> None:
    path = write(tmp_path / "agent.yaml", MIN + "unexpected: 1\n")
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(DefinitionFileError):
        agent_definition_read(path)
    assert sorted(os.listdir(tmp_path)) == before
