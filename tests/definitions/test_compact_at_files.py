"""``compact_at``: a subagent's compaction threshold in Python, YAML format version 2,
markdown frontmatter and the editors' JSON Schema."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
import yaml

from deputy_runtime import AgentDefinition, DefinitionError, DefinitionFileError
from deputy_runtime.definitions import (
    AGENT_DEFINITION_SCHEMA,
    agent_definition_from_markdown,
    agent_definition_read,
    agent_definition_to_markdown,
    agent_definition_write,
)

V2 = "version: 2\nname: reader\ndescription: Reads\nprompt: Read carefully\ncompact_at: 0.6\n"


@pytest.mark.parametrize("value", [0.25, 1, 1.0, None])
def test_valid_values_are_kept_as_floats(value: float | None) -> None:
    definition = AgentDefinition("reader", "d", "p", compact_at=value)
    assert definition.compact_at == (None if value is None else float(value))
    if value is not None:
        assert type(definition.compact_at) is float


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0, "0"),
        (-0.1, "-0.1"),
        (1.5, "1.5"),
        (True, "True"),
        ("0.5", "'0.5'"),
        (float("nan"), "nan"),
    ],
)
def test_bad_values_name_the_field(value: object, shown: str) -> None:
    with pytest.raises(DefinitionError) as info:
        AgentDefinition("reader", "d", "p", compact_at=value)  # type: ignore[arg-type]
    message = str(info.value)
    assert message.startswith("compact_at: expected a fraction of the context window above 0")
    assert message.endswith(f"got {shown}")


def test_a_version_2_file_reads_it_and_the_writer_writes_version_2(tmp_path: Path) -> None:
    path = tmp_path / "reader.yaml"
    path.write_text(V2)
    definition = agent_definition_read(path)
    assert definition.compact_at == 0.6
    written = agent_definition_write(definition, tmp_path / "out.yaml")
    text = written.read_text()
    assert text.startswith("version: 2\n")
    assert text.endswith("compact_at: 0.6\n")
    assert "output_schema" not in text  # only the format-2 fields that are set
    assert agent_definition_read(written) == definition
    editor = jsonschema.Draft202012Validator(AGENT_DEFINITION_SCHEMA)
    assert editor.is_valid(yaml.safe_load(text))
    assert not editor.is_valid(yaml.safe_load(text.replace("version: 2", "version: 1")))
    assert not editor.is_valid(yaml.safe_load(text.replace("0.6", "1.5")))
    plain = agent_definition_write(definition.replace(compact_at=None), tmp_path / "plain.yaml")
    assert plain.read_text().startswith("version: 1\n")


def test_a_version_1_file_never_holds_it(tmp_path: Path) -> None:
    path = tmp_path / "reader.yaml"
    path.write_text(V2.replace("version: 2", "version: 1"))
    with pytest.raises(DefinitionFileError) as info:
        agent_definition_read(path)
    assert info.value.line == 5
    assert info.value.reason == (
        "Unknown field 'compact_at'; compact_at is part of format version 2; write "
        "'version: 2' to use it (a format-1 file never holds it)"
    )


def test_a_bad_value_in_a_file_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "reader.yaml"
    path.write_text(V2.replace("0.6", "yes"))
    with pytest.raises(DefinitionFileError) as info:
        agent_definition_read(path)
    assert info.value.line == 5
    assert info.value.reason.startswith("compact_at: expected a fraction")


def test_markdown_reads_and_writes_it(tmp_path: Path) -> None:
    path = tmp_path / "reader.md"
    path.write_text("---\nname: reader\ndescription: Reads\ncompact_at: 0.7\n---\nRead it.\n")
    definition = agent_definition_from_markdown(path)
    assert definition.compact_at == 0.7
    back = agent_definition_to_markdown(definition, tmp_path / "out.md")
    assert "compact_at: 0.7\n" in back.read_text()
    assert agent_definition_from_markdown(back) == definition
    path.write_text("---\nname: reader\ndescription: Reads\ncompact_at: 2\n---\nRead it.\n")
    with pytest.raises(DefinitionFileError) as info:
        agent_definition_from_markdown(path)
    assert info.value.line == 4
    assert "compact_at: expected a fraction" in info.value.reason
