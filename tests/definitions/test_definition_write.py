"""Writing YAML definition files: registries, no-clobber, canonical bytes, size limit."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from deputy_runtime.definitions import (
    AgentDefinition,
    agent_definition,
    agent_definition_read,
    agent_definition_write,
)
from deputy_runtime.definitions._files import MAX_DEFINITION_BYTES
from deputy_runtime.errors import DefinitionFileError
from deputy_runtime.skills import Skill
from deputy_runtime.tools import Tool
from tests.definitions._definition_helpers import make_tool, write


def full(tools: dict[str, Tool], skill: Skill) -> AgentDefinition:
    return agent_definition(
        "Reviewer",
        "Reviews text",
        "Read carefully.\nThen report.\n",
        tools=[tools["read_file"], tools["grep_files"]],
        skills=[skill, "skills/checklist"],
        disallowed_tools=["run_bash", "write_file"],
        memory=["fact one", "fact two"],
        mcp_servers=["local"],
        initial_prompt="Start here",
        max_requests=3,
        permission_mode="readonly",
    )


def test_full_round_trip(
    tmp_path: Path, tools: dict[str, Tool], skills: dict[str, Skill | str], skill: Skill
) -> None:
    original = full(tools, skill)
    path = agent_definition_write(original, tmp_path / "agent.yaml", tools, skills)
    assert path == tmp_path / "agent.yaml"
    restored = agent_definition_read(path, tools, skills)
    assert restored == original
    assert restored.tools[0] is tools["read_file"]
    assert restored.tools[0].read_only
    assert restored.skills[0] is skill


def test_canonical_bytes(tmp_path: Path, tools: dict[str, Tool], skill: Skill) -> None:
    definition = agent_definition(
        "reviewer",
        "Reviews text",
        "Line one.\nLine two.",
        tools=[tools["read_file"]],
        memory=("fact",),
        mcp_servers=(),
    )
    path = agent_definition_write(definition, tmp_path / "agent.yaml", tools)
    assert path.read_bytes() == (
        b"version: 1\n"
        b"name: reviewer\n"
        b"description: Reviews text\n"
        b"prompt: |-\n"
        b"  Line one.\n"
        b"  Line two.\n"
        b"tools:\n"
        b"- read_file\n"
        b"model: inherit\n"
        b"skills: []\n"
        b"disallowed_tools: null\n"
        b"memory:\n"
        b"- fact\n"
        b"mcp_servers: []\n"
        b"initial_prompt: null\n"
        b"max_requests: null\n"
        b"permission_mode: null\n"
    )


def test_strings_that_yaml11_would_retype_are_quoted(tmp_path: Path) -> None:
    definition = agent_definition(
        "yes", "123", "on", model="null", memory=["no", "1.5", "~", "2024-01-01", "<<"]
    )
    path = agent_definition_write(definition, tmp_path / "agent.yaml")
    text = path.read_text()
    for line in ("name: 'yes'", "description: '123'", "prompt: 'on'", "model: 'null'", "- '~'"):
        assert line in text
    assert agent_definition_read(path) == definition
    # y/Y/n/N are YAML 1.1 booleans too (R's yaml package reads them so), though PyYAML's
    # resolver leaves them strings; every position is quoted: values, list items, params.
    definition = agent_definition(
        "y",
        "n",
        "Y",
        model="N",
        memory=["N", "y", "OFF", "Yes"],
        initial_prompt="n",
        mcp_servers=["Y"],
        params={"y": "n", "N": ["Y", {"n": "y"}], "stop": "NO"},
    )
    path = agent_definition_write(definition, tmp_path / "yn.yaml")
    text = path.read_text()
    for line in ("name: 'y'", "description: 'n'", "prompt: 'Y'", "model: 'N'"):
        assert line in text
    for line in ("- 'N'", "- 'y'", "- 'OFF'", "- 'Yes'", "initial_prompt: 'n'", "- 'Y'"):
        assert line in text
    for line in ("  'y': 'n'", "  'N':", "  - 'Y'", "  - 'n': 'y'", "  stop: 'NO'"):
        assert line in text
    assert agent_definition_read(path) == definition


def test_unicode_and_params_round_trip(tmp_path: Path) -> None:
    definition = agent_definition(
        "lab",
        "µmol/L 🧪 é",
        "Measure µmol/L 🧪\nCafé\n",
        params={"temperature": 0.2, "stop": ["END", "yes"], "nested": {"a": None, "b": 1e-05}},
    )
    path = agent_definition_write(definition, tmp_path / "agent.yaml")
    data = path.read_bytes()
    assert "µmol/L 🧪 é".encode() in data
    assert b"\r" not in data
    assert not data.startswith(b"\xef\xbb\xbf")
    assert agent_definition_read(path) == definition


def test_params_are_omitted_when_none(tmp_path: Path) -> None:
    path = agent_definition_write(agent_definition("a", "b", "c"), tmp_path / "agent.yaml")
    assert b"params" not in path.read_bytes()


def test_tools_need_a_registry(tmp_path: Path, read_tool: Tool) -> None:
    dest = write(tmp_path / "agent.yaml", "original")
    definition = agent_definition("a", "b", "c", tools=[read_tool])
    for registry in (None, {"read": read_tool, "alias": read_tool}, {"other": make_tool("x")}):
        with pytest.raises(DefinitionFileError) as info:
            agent_definition_write(definition, dest, registry, overwrite=True)
        assert info.value.reason.startswith("Each tools object must match exactly one registry")
        assert dest.read_text() == "original"
    assert os.listdir(tmp_path) == ["agent.yaml"]


def test_skill_paths_match_by_equality(tmp_path: Path) -> None:
    path_value = "".join(["skills/", "checklist"])  # equal to, not identical with, the key's
    definition = agent_definition("a", "b", "c", skills=[path_value])
    dest = agent_definition_write(definition, tmp_path / "a.yaml", None, {"c": "skills/checklist"})
    assert "- c\n" in dest.read_text()


def test_no_clobber(tmp_path: Path, tools: dict[str, Tool]) -> None:
    dest = write(tmp_path / "agent.yaml", "original")
    definition = agent_definition("a", "b", "c", tools=[tools["read_file"]])
    with pytest.raises(DefinitionFileError) as info:
        agent_definition_write(definition, dest, tools)
    assert info.value.reason == "File already exists; pass overwrite=True to replace it"
    assert dest.read_text() == "original"
    agent_definition_write(definition, dest, tools, overwrite=True)
    assert agent_definition_read(dest, tools) == definition


def test_bad_arguments(tmp_path: Path) -> None:
    definition = agent_definition("a", "b", "c")
    with pytest.raises(DefinitionFileError, match="overwrite must be True or False"):
        agent_definition_write(definition, tmp_path / "a.yaml", overwrite="yes")  # type: ignore[arg-type]
    with pytest.raises(DefinitionFileError, match="Expected an AgentDefinition to write, got dict"):
        agent_definition_write({"name": "a"}, tmp_path / "a.yaml")  # type: ignore[arg-type]
    with pytest.raises(DefinitionFileError, match="Expected a file path"):
        agent_definition_write(definition, "")
    assert os.listdir(tmp_path) == []


def sized_definition(size: int) -> AgentDefinition:
    """A definition whose canonical file has exactly ``size`` bytes."""
    probe = agent_definition("big", "Big", "x")
    overhead = len(probe_bytes(probe)) - 1
    return probe.replace(prompt="x" * (size - overhead))


def probe_bytes(definition: AgentDefinition) -> bytes:
    from deputy_runtime.definitions._format import definition_to_yaml

    return definition_to_yaml(definition, Path("probe.yaml"), {}, {})


def test_write_size_boundary(tmp_path: Path) -> None:
    dest = tmp_path / "big.yaml"
    exact = sized_definition(MAX_DEFINITION_BYTES)
    agent_definition_write(exact, dest)
    assert dest.stat().st_size == MAX_DEFINITION_BYTES
    assert agent_definition_read(dest) == exact

    bigger = exact.replace(prompt=exact.prompt + "x")
    with pytest.raises(DefinitionFileError) as info:
        agent_definition_write(bigger, dest, overwrite=True)
    assert "exceeds 1 MiB" in info.value.reason
    assert agent_definition_read(dest) == exact
    assert os.listdir(tmp_path) == ["big.yaml"]


def test_prompt_that_literal_style_cannot_hold_is_quoted(tmp_path: Path) -> None:
    # Trailing spaces before a newline and a lone CR cannot live in a literal block.
    definition = agent_definition("a", "b", "line one  \nline\rtwo\n\x85end")
    dest = agent_definition_write(definition, tmp_path / "a.yaml")
    assert agent_definition_read(dest) == definition
    assert b"\r" not in dest.read_bytes()


def test_unpaired_surrogate_cannot_be_written(tmp_path: Path) -> None:
    definition = agent_definition("a", "b", "bad \ud800 text")
    with pytest.raises(DefinitionFileError, match="round-trip check failed"):
        agent_definition_write(definition, tmp_path / "a.yaml")
    assert os.listdir(tmp_path) == []
