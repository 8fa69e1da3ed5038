"""Output schemas in definition files: YAML format version 2, markdown frontmatter, the
writers and converters, and ``deputy-runtime validate`` naming file, line and field."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest
import yaml

from deputy_runtime import AgentDefinition, Chat, DefinitionFileError, LeadAgent
from deputy_runtime.chat import ScriptedProvider, reply, tool_call
from deputy_runtime.cli import main
from deputy_runtime.definitions import (
    AGENT_DEFINITION_SCHEMA,
    agent_definition_from_markdown,
    agent_definition_read,
    agent_definition_to_markdown,
    agent_definition_write,
    agent_definitions,
)

SCHEMA: dict[str, Any] = {
    "title": "Review",
    "type": "object",
    "properties": {
        "verdict": {"enum": ["approve", "reject"]},
        "issues": {"type": "array", "items": {"type": "string", "minLength": 1}},
    },
    "required": ["verdict"],
    "additionalProperties": False,
}
V2 = (
    "version: 2\n"
    "name: reviewer\n"
    "description: Reviews text\n"
    "prompt: Read carefully\n"
    "output_schema:\n"
    "  type: object\n"
    "  properties:\n"
    "    verdict: {enum: [approve, reject]}\n"
    "  required: [verdict]\n"
)
MARKDOWN = (
    "---\n"
    "name: reviewer\n"
    "description: Reviews text\n"
    "tools: []\n"
    "output_schema:\n"
    "  type: object\n"
    "  properties:\n"
    "    verdict: {enum: [approve, reject]}\n"
    "  required: [verdict]\n"
    "output_retries: 1\n"
    "---\n"
    "Read carefully\n"
)
EXPECTED = {
    "type": "object",
    "properties": {"verdict": {"enum": ["approve", "reject"]}},
    "required": ["verdict"],
}


class Review(msgspec.Struct):
    verdict: str


def _plain(value: Any) -> Any:
    """A frozen schema (read-only mappings, tuples) as plain dicts and lists."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    return value


def _structured() -> AgentDefinition:
    return AgentDefinition(
        "reviewer", "Reviews text", "Read carefully", output_schema=SCHEMA, output_retries=3
    )


# -- YAML ---------------------------------------------------------------------------------------


def test_a_version_2_file_reads_its_schema(tmp_path: Path) -> None:
    path = tmp_path / "reviewer.yaml"
    path.write_text(V2)
    definition = agent_definition_read(path)
    assert _plain(definition.output_schema) == EXPECTED
    assert definition.output_retries is None
    # A version-2 file without a schema is an ordinary definition.
    path.write_text(V2.split("output_schema")[0])
    assert agent_definition_read(path).output_schema is None


def test_a_version_1_file_never_holds_a_schema(tmp_path: Path) -> None:
    path = tmp_path / "reviewer.yaml"
    path.write_text(V2.replace("version: 2", "version: 1") + "output_retries: 1\n")
    with pytest.raises(DefinitionFileError) as info:
        agent_definition_read(path)
    assert info.value.path == path
    assert info.value.line == 5
    assert info.value.reason == (
        "Unknown field 'output_schema'; output_schema is part of format version 2; write "
        "'version: 2' to use it (a format-1 file never holds it)"
    )


@pytest.mark.parametrize(
    ("extra", "line", "reason"),
    [
        (
            "    verdict: {type: text}\n",
            6,
            "output_schema: properties.verdict.type names 'text'; expected one of null",
        ),
        (
            "    verdict: {pattern: '^a'}\n",
            6,
            "output_schema: properties.verdict uses the keyword 'pattern', which output "
            "schemas do not support",
        ),
    ],
)
def test_a_bad_schema_names_the_file_line_and_place(
    tmp_path: Path, extra: str, line: int, reason: str
) -> None:
    path = tmp_path / "reviewer.yaml"
    path.write_text(
        "version: 2\nname: reviewer\ndescription: d\nprompt: p\noutput_schema:\n"
        "  type: object\n  properties:\n" + extra
    )
    with pytest.raises(DefinitionFileError) as info:
        agent_definition_read(path)
    assert info.value.path == path
    assert info.value.reason.startswith(reason), info.value.reason
    # The line where the schema's mapping starts; the message names the place inside it.
    assert info.value.line == line


def test_retries_without_a_schema_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "reviewer.yaml"
    path.write_text(V2.split("output_schema")[0] + "output_retries: 2\n")
    with pytest.raises(DefinitionFileError, match="output_retries: is set but there is no"):
        agent_definition_read(path)


def test_the_writer_writes_version_2_only_for_a_schema(tmp_path: Path) -> None:
    structured = _structured()
    path = agent_definition_write(structured, tmp_path / "a.yaml")
    text = path.read_text()
    assert text.startswith("version: 2\n")
    assert text.endswith("output_retries: 3\n")
    assert agent_definition_read(path) == structured
    # The editors' JSON Schema accepts the file, and refuses it labelled version 1.
    editor = jsonschema.Draft202012Validator(AGENT_DEFINITION_SCHEMA)
    assert editor.is_valid(yaml.safe_load(text))
    assert not editor.is_valid(yaml.safe_load(text.replace("version: 2", "version: 1")))
    plain = structured.replace(output_schema=None, output_retries=None)
    path = agent_definition_write(plain, tmp_path / "b.yaml")
    assert path.read_text().startswith("version: 1\n")
    assert "output" not in path.read_text()


def test_a_python_type_cannot_be_written_to_a_file(tmp_path: Path) -> None:
    typed = AgentDefinition("reviewer", "d", "p", output_schema=Review)
    with pytest.raises(DefinitionFileError, match="output_schema is the Python type Review"):
        agent_definition_write(typed, tmp_path / "a.yaml")
    with pytest.raises(DefinitionFileError, match="output_schema is the Python type Review"):
        agent_definition_to_markdown(typed, tmp_path / "a.md")
    assert not (tmp_path / "a.yaml").exists()
    assert not (tmp_path / "a.md").exists()


# -- markdown ----------------------------------------------------------------------------------


def test_markdown_reads_the_same_keys(tmp_path: Path) -> None:
    path = tmp_path / "reviewer.md"
    path.write_text(MARKDOWN)
    definition = agent_definition_from_markdown(path)
    assert _plain(definition.output_schema) == EXPECTED
    assert definition.output_retries == 1
    # And writes them back so they read equal.
    back = agent_definition_to_markdown(_structured(), tmp_path / "out.md")
    assert agent_definition_from_markdown(back) == _structured()


def test_markdown_names_the_line_of_a_bad_schema(tmp_path: Path) -> None:
    path = tmp_path / "reviewer.md"
    path.write_text(MARKDOWN.replace("{enum: [approve, reject]}", "{$ref: '#/x'}"))
    with pytest.raises(DefinitionFileError) as info:
        agent_definition_from_markdown(path)
    assert info.value.path == path
    assert info.value.line == 5
    assert info.value.reason.startswith("output_schema: properties.verdict uses the keyword '$ref'")
    path.write_text(MARKDOWN.replace("output_retries: 1", "output_retries: many"))
    with pytest.raises(DefinitionFileError) as info:
        agent_definition_from_markdown(path)
    assert info.value.line == 10
    assert "output_retries: expected an int from 0 to 10 or None, got str" in info.value.reason


# -- the command line ----------------------------------------------------------------------------


def test_validate_reports_bad_schemas(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "good.yaml").write_text(V2)
    (tmp_path / "good.md").write_text(MARKDOWN.replace("name: reviewer", "name: other"))
    (tmp_path / "bad.yaml").write_text(
        V2.replace("name: reviewer", "name: bad").replace("enum: [approve, reject]", "enum: []")
    )
    (tmp_path / "bad.md").write_text(
        MARKDOWN.replace("name: reviewer", "name: worse").replace("type: object", "type: map")
    )
    status = main(["validate", str(tmp_path)])
    out, err = capsys.readouterr()
    assert status == 1
    assert out.splitlines() == [
        f"{tmp_path / 'bad.md'}:5: output_schema: type names 'map'; expected one of null, "
        "boolean, integer, number, string, array, object",
        f"{tmp_path / 'bad.yaml'}:6: output_schema: properties.verdict.enum is empty, so no "
        "answer could match",
    ]
    assert err == "checked 4 file(s): 2 error(s)\n"


def test_convert_carries_the_schema_both_ways(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "reviewer.md"
    source.write_text(MARKDOWN)
    yaml_file = tmp_path / "reviewer.yaml"
    assert main(["convert", str(source), str(yaml_file)]) == 0
    assert yaml_file.read_text().startswith("version: 2\n")
    assert agent_definition_read(yaml_file) == agent_definition_from_markdown(source)
    again = tmp_path / "again.md"
    assert main(["convert", str(yaml_file), str(again)]) == 0
    assert agent_definition_from_markdown(again) == agent_definition_from_markdown(source)
    capsys.readouterr()


# -- files to a running delegation ----------------------------------------------------------


@pytest.mark.anyio
async def test_definitions_from_files_run_with_their_schemas(tmp_path: Path) -> None:
    (tmp_path / "reviewer.yaml").write_text(V2)
    (tmp_path / "checker.md").write_text(MARKDOWN.replace("name: reviewer", "name: checker"))
    definitions = [
        *agent_definitions(tmp_path).values(),
        agent_definition_from_markdown(tmp_path / "checker.md"),
    ]
    call = "delegate_to_agent"
    provider = ScriptedProvider(
        {
            "lead": [
                tool_call(call, {"agent_name": "reviewer", "task": "a"}),
                tool_call(call, {"agent_name": "checker", "task": "b"}),
                reply("done"),
            ],
            "reviewer": ['{"verdict": "ok"}', '{"verdict": "approve"}'],
            "checker": ["reject", '"reject"'],
        }
    )
    lead = LeadAgent(Chat(provider), definitions, working_dir=tmp_path)
    await lead.run("go")
    reviewer, checker = lead.list_subagents()
    assert (reviewer.status, reviewer.output, reviewer.usage.requests) == (
        "completed",
        {"verdict": "approve"},
        2,
    )
    # The markdown file allows one retry: two answers, then the delegation fails.
    assert (checker.status, checker.stop_reason, checker.usage.requests) == (
        "failed",
        "invalid_output",
        2,
    )
    assert checker.error is not None
    assert "$: expected object, got string" in checker.error
