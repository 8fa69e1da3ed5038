"""Markdown agent file edge cases: documented differences, .claude/agents, convert.

Files are written byte for byte in tmp_path; the CLI runs in-process through its ``main``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from deputy_runtime.cli import main
from deputy_runtime.definitions import (
    agent_definition,
    agent_definition_from_markdown,
    agent_definition_read,
    agent_definition_write,
    agent_definitions,
    claude_agent_definitions,
)
from deputy_runtime.errors import DefinitionFileError
from deputy_runtime.tools import Tool

REPO = Path(__file__).resolve().parents[2]


def _tool(name: str) -> Tool:
    return Tool(name, f"The {name} tool.", {"type": "object"}, lambda: name, read_only=True)


TOOLS = {name: _tool(name) for name in ("Read", "Grep", "Bash")}
AGENT = b"---\nname: helper\ndescription: Helps\ntools: Read, Grep\n---\nBe helpful.\n"


def _read(path: Path, data: bytes) -> object:
    path.write_bytes(data)
    try:
        return agent_definition_from_markdown(path, TOOLS)
    except DefinitionFileError as exc:
        return exc


def test_definitions_page_documents_the_deliberate_differences() -> None:
    page = (REPO / "docs" / "concepts" / "definitions.md").read_text(encoding="utf-8")
    section = page[page.index("```markdown") :]
    section = section[: section.index("\n## ")]
    for phrase in (
        "BOM is stripped",
        "invalid UTF-8 is an error",
        "falls back to the file's stem",
        "wrong-typed `tools` is an error",
    ):
        assert phrase in section, phrase


def test_each_documented_difference_behaves_as_documented(tmp_path: Path) -> None:
    with_bom = _read(tmp_path / "bom.md", b"\xef\xbb\xbf" + AGENT)
    assert with_bom == _read(tmp_path / "plain.md", AGENT)
    bad_utf8 = _read(tmp_path / "bad.md", AGENT.replace(b"Helps", b"Help\xffs"))
    assert isinstance(bad_utf8, DefinitionFileError)
    assert (bad_utf8.path, bad_utf8.line) == (tmp_path / "bad.md", 3)
    assert "UTF-8" in bad_utf8.reason
    stem = _read(tmp_path / "Fallback_Name.md", AGENT.replace(b"name: helper\n", b""))
    assert getattr(stem, "name", None) == "fallback_name"
    for wrong in (b"tools: 5", b"tools: {Read: 1}", b"tools: true"):
        error = _read(tmp_path / "typed.md", AGENT.replace(b"tools: Read, Grep", wrong))
        assert isinstance(error, DefinitionFileError), wrong
        assert error.line == 4, (wrong, error)
        assert "tools" in error.reason


# Regression: a control character in the frontmatter (PyYAML ReaderError, no
# problem_mark) used to get no line/column and PyYAML's two-line text.
@pytest.mark.parametrize("char", ["\x00", "\x07"])
def test_control_character_in_frontmatter_names_the_line(tmp_path: Path, char: str) -> None:
    error = _read(tmp_path / "a.md", AGENT.replace(b"Helps", f"He{char}lps".encode()))
    assert isinstance(error, DefinitionFileError)
    assert (error.line, error.column) == (3, 16)
    assert "\n" not in error.reason
    assert f"control character U+{ord(char):04X}" in error.reason


def test_control_character_line_is_relative_to_the_whole_file(tmp_path: Path) -> None:
    # Lines of the frontmatter are file lines: any splitlines() break (here CRLF and a
    # form feed) ends one, and the opening fence is line 1.
    data = b"---\r\nname: helper\x0cdescription: Helps\r\ntools: [Read, \xc3\xa9\x1b]\n---\nB\n"
    error = _read(tmp_path / "a.md", data)
    assert isinstance(error, DefinitionFileError)
    assert (error.line, error.column) == (4, 16)


def test_claude_agents_convenience_defaults_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agents = tmp_path / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "helper.md").write_bytes(AGENT)
    (agents / "planner.yaml").write_text(
        "version: 1\nname: planner\ndescription: Plans\nprompt: Plan.\ntools: [Bash]\n"
    )
    (agents / "nested").mkdir()
    (agents / "nested" / "ignored.md").write_bytes(b"not an agent")
    monkeypatch.chdir(tmp_path)
    found = claude_agent_definitions(tools=TOOLS)
    assert list(found) == ["helper", "planner"]
    assert [t.name for t in found["helper"].tools] == ["Read", "Grep"]
    assert found["planner"].tools == (TOOLS["Bash"],)
    assert found == agent_definitions(agents, TOOLS, markdown=True)


def test_claude_agents_directory_through_a_symlink_and_readme_reported(tmp_path: Path) -> None:
    shared = tmp_path / "shared-agents"
    shared.mkdir()
    (shared / "helper.md").write_bytes(AGENT)
    project = tmp_path / "project"
    (project / ".claude").mkdir(parents=True)
    os.symlink(shared, project / ".claude" / "agents")
    assert list(claude_agent_definitions(project, TOOLS)) == ["helper"]
    (shared / "README.md").write_text("# Our agents\n\nSee the files here.\n")
    with pytest.raises(DefinitionFileError, match="no YAML frontmatter") as info:
        claude_agent_definitions(project, TOOLS)
    assert info.value.path == project / ".claude" / "agents" / "README.md"


def _convert(capsys: pytest.CaptureFixture[str], *args: Path) -> tuple[int, str]:
    status = main(["convert", *map(str, args)])
    _, err = capsys.readouterr()
    return status, err


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"memory": ["Prefers short answers."]}, "memory cannot be written"),
        ({"prompt": "\n".join(["line"] * 1001)}, "prompt cannot be written"),
        ({"description": "d" * 1025}, "description cannot be written"),
        ({"model": "Inherit "}, "model cannot be written"),
    ],
)
def test_convert_names_the_field_markdown_cannot_carry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: dict[str, object], field: str
) -> None:
    fields: dict[str, object] = {"name": "a", "description": "d", "prompt": "p", **changes}
    source = agent_definition_write(agent_definition(**fields), tmp_path / "a.yaml")  # type: ignore[arg-type]
    status, err = _convert(capsys, source, tmp_path / "a.md")
    assert status == 1
    assert f"{tmp_path / 'a.md'}: {field}" in err
    assert sorted(os.listdir(tmp_path)) == ["a.yaml"]


def test_convert_markdown_to_yaml_and_back_keeps_every_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "full.md"
    source.write_bytes(
        b"---\nname: full\ndescription: Does it all\ntools: [Read, Bash]\n"
        b"disallowedTools: Grep\nmodel: openai/gpt-4.1-mini\nmodel_args:\n  temperature: 0.5\n"
        b"permissionMode: plan\nmaxTurns: 7\nskills: []\nmcpServers: [docs]\n"
        b"initialPrompt: Begin.\n---\nLine one.\n\n  Indented line two.\n"
    )
    assert _convert(capsys, source, tmp_path / "full.yaml") == (0, "")
    original = agent_definition_from_markdown(source, TOOLS)
    assert agent_definition_read(tmp_path / "full.yaml", TOOLS) == original
    assert _convert(capsys, tmp_path / "full.yaml", tmp_path / "again.md") == (0, "")
    assert agent_definition_from_markdown(tmp_path / "again.md", TOOLS) == original
    assert original.permission_mode == "plan"
    assert original.max_requests == 7
    assert original.params == {"temperature": 0.5}


# Regression: PyYAML's constructors raise KeyError/IndexError/AttributeError for these,
# which used to escape agent_definition_from_markdown.
@pytest.mark.parametrize("tagged", ["!!bool maybe", "!!int ''", "!!float ''", "!!timestamp ''"])
def test_uninterpretable_core_tag_in_frontmatter_is_a_definition_file_error(
    tmp_path: Path, tagged: str
) -> None:
    error = _read(tmp_path / "a.md", AGENT.replace(b"Helps", tagged.encode()))
    assert isinstance(error, DefinitionFileError)
    assert (error.line, error.column) == (3, 14)
    assert f"could not be read as {tagged.split()[0]}; expected " in error.reason


def test_uninterpretable_core_tag_in_claude_agents_discovery(tmp_path: Path) -> None:
    agents = tmp_path / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "a.md").write_bytes(AGENT.replace(b"tools: Read, Grep", b"tools: !!float ''"))
    with pytest.raises(DefinitionFileError) as info:
        claude_agent_definitions(tmp_path, TOOLS)
    assert (info.value.path, info.value.line) == (agents / "a.md", 4)


@pytest.mark.parametrize(
    ("tagged", "problem"),
    [("!!int 1x", "expected a plain decimal"), ("!!timestamp 2001-02-30", "day is out of range")],
)
def test_rejected_tagged_value_in_frontmatter_names_the_line(
    tmp_path: Path, tagged: str, problem: str
) -> None:
    # Regression: these used to get line=None although the YAML reader locates them.
    error = _read(tmp_path / "a.md", AGENT.replace(b"Helps", tagged.encode()))
    assert isinstance(error, DefinitionFileError)
    assert problem in error.reason
    assert (error.line, error.column) == (3, 14)


def test_implicit_bad_date_in_frontmatter_names_the_line(tmp_path: Path) -> None:
    error = _read(tmp_path / "a.md", AGENT.replace(b"tools: Read, Grep", b"model: 2001-02-30"))
    assert isinstance(error, DefinitionFileError)
    assert (error.line, error.column) == (4, 8)
    assert "day is out of range" in error.reason
