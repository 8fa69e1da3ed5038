"""A corpus of realistic agent files: all valid ones load, broken ones are reported with a line.

The files under ``corpus/`` are written in the styles of public Claude Code agent
collections and AgentLane's docs (own content): comma-string and list ``tools``, folded and
literal descriptions, escaped ``\\n`` example blocks, Claude Code-only keys (``color``,
``hooks``, ``effort``, ``memory``), model aliases, a BOM + CRLF file from a Windows editor.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from deputy_runtime.definitions import (
    agent_definition_from_markdown,
    agent_definitions,
    claude_agent_definitions,
)
from deputy_runtime.errors import DefinitionFileError
from tests.definitions._markdown_helpers import skill_registry, tool_registry

CORPUS = Path(__file__).parent / "corpus"
VALID = sorted((CORPUS / "valid").glob("*.md"))
BROKEN = sorted((CORPUS / "broken").glob("*.md"))
REPO = Path(__file__).resolve().parents[2]

# file -> (line, part of the reason) that `deputy-runtime validate` must print.
EXPECTED_PROBLEMS = {
    "README.md": (1, "no YAML frontmatter: the first line is '# Our agents'"),
    "ask-mode.md": (5, "permissionMode 'ask' has no deputy equivalent"),
    "empty-body.md": (5, "the body is empty"),
    "inline-mcp.md": (6, "mcpServers entries must be names, got an inline configuration"),
    "max-turns-text.md": (5, "maxTurns must be a whole number"),
    "spaced-name.md": (2, "name: 'Code Reviewer' is not a valid agent name"),
    "tab-indented.md": (5, "invalid YAML in frontmatter"),
    "tool-pattern.md": (6, "'Bash(git diff:*)' grants Bash only for arguments matching"),
    "tools-null.md": (5, "tools must be a list of names or a comma-separated string"),
    "unterminated.md": (1, "no YAML frontmatter: the '---' on line 1 is never closed"),
}


def test_corpus_is_large_enough() -> None:
    assert len(VALID) >= 10
    assert sorted(path.name for path in BROKEN) == sorted(EXPECTED_PROBLEMS)


@pytest.mark.parametrize("path", VALID, ids=[path.name for path in VALID])
def test_valid_file_loads(path: Path) -> None:
    registry = tool_registry()
    seen: list[object] = []
    definition = agent_definition_from_markdown(
        path, registry, skill_registry(), on_warning=seen.append
    )
    assert definition.name == path.stem
    assert definition.description
    assert definition.prompt == definition.prompt.strip()
    assert all(tool in registry.values() for tool in definition.tools)


def test_corpus_details() -> None:
    tools, skills = tool_registry(), skill_registry()
    found = {
        p.stem: agent_definition_from_markdown(p, tools, skills, on_warning=lambda _: None)
        for p in VALID
    }
    assert [t.name for t in found["code-reviewer"].tools] == ["Read", "Grep", "Glob", "Bash"]
    assert found["debugger"].model == "inherit"
    assert found["data-scientist"].description == (  # folded, then stripped
        "Data analysis expert for SQL queries, BigQuery operations, and data insights. "
        "Use proactively for data analysis tasks and queries."
    )
    assert found["sql-expert"].description == (  # literal: the newline stays
        "Writes and optimises SQL for PostgreSQL.\n"
        "Use for slow queries, index design and EXPLAIN plans."
    )
    assert "<example>\nContext:" in found["security-auditor"].description
    assert found["api-designer"].permission_mode == "plan"
    assert found["api-designer"].max_requests == 20
    assert found["api-designer"].mcp_servers == ("github",)
    assert found["api-designer"].skills == (skills["api-style"],)
    assert found["chart-reviewer"].params == {"temperature": 0.2, "max_tokens": 4096}
    assert found["chart-reviewer"].disallowed_tools == ("write",)
    assert found["migration-planner"].permission_mode == "full"
    assert found["migration-planner"].memory is None  # Claude Code's memory scope: ignored
    assert (found["migration-planner"].initial_prompt or "").startswith("List the pending")
    assert found["sql-expert"].skills == ("/srv/skills/sql-review",)
    assert "\n---\n" in found["frontend-developer"].prompt
    assert found["triage-lead"].tools == ()
    assert found["test-runner"].disallowed_tools == (
        "webfetch",
        "web_fetch",
        "websearch",
        "web_search",
    )
    assert found["docs-writer"].prompt == (
        "You write documentation for developers.\n\nKeep examples runnable and short."
    )
    assert "日本語" in found["translator"].description


@pytest.mark.parametrize("path", BROKEN, ids=[path.name for path in BROKEN])
def test_broken_file_is_a_located_error(path: Path) -> None:
    line, reason = EXPECTED_PROBLEMS[path.name]
    with pytest.raises(DefinitionFileError) as info:
        agent_definition_from_markdown(path, tool_registry(), skill_registry())
    assert info.value.path == path
    assert info.value.line == line
    assert reason in info.value.reason


def test_claude_code_project_discovery(tmp_path: Path) -> None:
    agents = tmp_path / ".claude" / "agents"
    agents.mkdir(parents=True)
    for path in VALID:
        shutil.copy(path, agents / path.name)
    (agents / ".draft.md").write_text("not an agent, but hidden")
    warnings: list[object] = []
    found = claude_agent_definitions(
        tmp_path, tool_registry(), skill_registry(), on_warning=warnings.append
    )
    assert list(found) == sorted(path.stem for path in VALID)
    assert len(warnings) == 3  # the unhonoured Claude Code keys (see the validate test)
    assert claude_agent_definitions(tmp_path / "elsewhere") == {}


def test_discovery_reports_a_readme_instead_of_dropping_it(tmp_path: Path) -> None:
    shutil.copy(VALID[0], tmp_path / VALID[0].name)
    shutil.copy(CORPUS / "broken" / "README.md", tmp_path / "README.md")
    with pytest.raises(DefinitionFileError, match="no YAML frontmatter") as info:
        agent_definitions(tmp_path, tool_registry(), markdown=True)
    assert info.value.path == tmp_path / "README.md"
    assert "hide it with a leading '.'" in info.value.reason
    (tmp_path / "README.md").rename(tmp_path / ".README.md")
    found = agent_definitions(tmp_path, tool_registry(), skill_registry(), markdown=True)
    assert list(found) == [VALID[0].stem]
    # Without markdown=True, .md files are not definition files at all.
    assert agent_definitions(tmp_path) == {}


# Registers the corpus's tool and skill names, as a host with such tools would.
PLUGIN = Path(__file__).parent / "claude_code_plugin.py"


def _validate(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "deputy_runtime",
            "validate",
            "--plugin",
            str(PLUGIN),
            *map(str, paths),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )


@pytest.mark.slow
def test_validate_cli_accepts_the_valid_corpus() -> None:
    result = _validate(CORPUS / "valid")
    assert result.returncode == 0, result.stdout + result.stderr
    # The only warnings name the Claude Code keys the runtime does not honour.
    named = [
        (Path(line.split(":")[0]).name, line.split(": warning: ")[1].split(":")[0])
        for line in result.stdout.splitlines()
    ]
    assert named == [
        ("migration-planner.md", "isolation"),
        ("migration-planner.md", "memory"),
        ("migration-planner.md", "background"),
    ]
    assert f"checked {len(VALID)} file(s): 3 warning(s)" in result.stderr


@pytest.mark.slow
def test_validate_cli_reports_each_broken_file_with_file_and_line() -> None:
    result = _validate(CORPUS / "broken", CORPUS / "valid" / "debugger.md")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert len(lines) == len(EXPECTED_PROBLEMS)
    for name, (line, reason) in EXPECTED_PROBLEMS.items():
        prefix = f"{CORPUS / 'broken' / name}:{line}: "
        assert any(out.startswith(prefix) and reason in out for out in lines), (name, lines)
