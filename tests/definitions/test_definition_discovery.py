"""agent_definitions(): top-level YAML files, code point order, all-or-nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from deputy_runtime.definitions import agent_definitions
from deputy_runtime.errors import DefinitionFileError
from deputy_runtime.tools import Tool
from tests.definitions._definition_helpers import MIN, write

WRITER = MIN.replace("reviewer", "writer")


def test_missing_and_empty_directory(tmp_path: Path) -> None:
    assert agent_definitions(tmp_path / "missing") == {}
    assert agent_definitions(tmp_path) == {}


def test_a_file_is_not_a_directory(tmp_path: Path) -> None:
    file = write(tmp_path / "agent.yaml", MIN)
    with pytest.raises(DefinitionFileError) as info:
        agent_definitions(file)
    assert info.value.path == file
    assert info.value.reason.startswith("Expected a directory of definition files")


def populated(tmp_path: Path) -> Path:
    write(tmp_path / "z.yaml", MIN)
    write(tmp_path / "a.yml", WRITER)
    write(tmp_path / "notes.md", "# not an agent\n")
    write(tmp_path / ".hidden.yaml", "version: 2\n")
    (tmp_path / "nested").mkdir()
    write(tmp_path / "nested" / "hidden.yaml", "invalid: [")
    return tmp_path


def test_top_level_yaml_only_in_name_order(tmp_path: Path) -> None:
    found = agent_definitions(populated(tmp_path))
    assert list(found) == ["writer", "reviewer"]
    assert found["writer"].name == "writer"


def test_uppercase_extension_and_code_point_order(tmp_path: Path) -> None:
    write(tmp_path / "b.YAML", MIN.replace("reviewer", "lower_b"))
    write(tmp_path / "B.yml", MIN.replace("reviewer", "upper_b"))
    write(tmp_path / "é.yaml", MIN.replace("reviewer", "accent"))
    assert list(agent_definitions(tmp_path)) == ["upper_b", "lower_b", "accent"]


def test_duplicate_names_abort_naming_both_files(tmp_path: Path) -> None:
    populated(tmp_path)
    write(tmp_path / "duplicate.yaml", MIN.replace("reviewer", "REVIEWER"))
    with pytest.raises(DefinitionFileError) as info:
        agent_definitions(tmp_path)
    assert info.value.path == tmp_path
    assert info.value.reason.startswith(
        "Duplicate AgentDefinition names: 'reviewer' is defined by both duplicate.yaml and z.yaml"
    )


def test_one_invalid_file_aborts_everything(tmp_path: Path) -> None:
    populated(tmp_path)
    bad = write(tmp_path / "bad.yaml", MIN.replace("version: 1", "version: 3"))
    with pytest.raises(DefinitionFileError) as info:
        agent_definitions(tmp_path)
    assert info.value.path == bad
    assert info.value.line == 1


def test_directory_named_like_a_file_aborts(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", MIN)
    (tmp_path / "x.yaml").mkdir()
    with pytest.raises(DefinitionFileError) as info:
        agent_definitions(tmp_path)
    assert info.value.path == tmp_path / "x.yaml"
    assert "the path is a directory" in info.value.reason


def test_default_location_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_dir = tmp_path / ".deputy" / "agents"
    write_dir.mkdir(parents=True)
    write(write_dir / "agent.yaml", MIN)
    (tmp_path / ".claude" / "agents").mkdir(parents=True)
    write(tmp_path / ".claude" / "agents" / "agent.yaml", MIN.replace("reviewer", "foreign"))
    monkeypatch.chdir(tmp_path)
    assert list(agent_definitions()) == ["reviewer"]


def test_registries_are_shared_and_checked_first(tmp_path: Path, tools: dict[str, Tool]) -> None:
    write(tmp_path / "a.yaml", MIN + "tools: [read_file]\n")
    write(tmp_path / "b.yaml", WRITER + "tools: [read_file, grep_files]\n")
    found = agent_definitions(tmp_path, tools)
    assert found["reviewer"].tools[0] is found["writer"].tools[0] is tools["read_file"]
    with pytest.raises(DefinitionFileError, match="registry key 'a b' is invalid"):
        agent_definitions(tmp_path / "missing", {"a b": tools["read_file"]})


def test_markdown_files_are_read_only_when_asked(tmp_path: Path) -> None:
    pytest.importorskip("deputy_runtime.definitions._markdown")
    write(tmp_path / "a.yaml", MIN)
    write(tmp_path / "b.md", "---\nname: helper\ndescription: Helps\n---\nBe helpful.\n")
    assert list(agent_definitions(tmp_path)) == ["reviewer"]
    found = agent_definitions(tmp_path, markdown=True)
    assert list(found) == ["reviewer", "helper"]
    assert found["helper"].prompt.startswith("Be helpful.")
