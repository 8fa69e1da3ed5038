"""Real Claude Code agent files: their tool names resolve through the Claude Code table.

The files under ``/work/shared/fixtures/agent-files`` are copied unchanged from public
repositories. ``validate`` accepts each one that names Claude Code's tools, with one
warning per tool this host lacks (``SendMessage``, ``Task``, ...) and none for the tools
it has (``Bash``, ``WebFetch`` and ``WebSearch`` included: the command line has the
sandboxed shell tools and, with the ``web`` extra the tests install, the web tools); ``run``
on the offline test model gives the agents the mapped deputy tools. (Files naming MCP
tools are not run here: without their server a delegation stops at setup.)
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from deputy_runtime import decode_event
from deputy_runtime.runtime import DelegationEnd, ToolStart
from tests.cli._runhelp import run_cli

pytestmark = pytest.mark.slow

FIXTURES = Path("/work/shared/fixtures/agent-files")
VOLT = "VoltAgent+awesome-claude-code-subagents/categories"
#: file -> (Claude Code tools this host lacks, so warned; the errors the file still has)
EXPECTED: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    f"{VOLT}/08-business-product/growth-loops.md": ((), ()),
    f"{VOLT}/03-infrastructure/deployment-engineer.md": ((), ()),
    # Its name has a dot, which no reader accepts: the one error left, tools resolve.
    f"{VOLT}/02-language-specialists/powershell-5.1-expert.md": ((), ("name",)),
    "wshobson+agents/plugins/agent-teams/agents/team-reviewer.md": (
        ("SendMessage",),
        (),
    ),
    "lst97+claude-code-sub-agents/agents/business/product-manager.md": (
        ("Task",),
        (),
    ),
    "anthropics+claude-plugins-official/plugins/claude-security/agents/patch-generator.md": (
        ("Agent(claude-security:explore)",),  # Agent(...) is dropped while parsing
        (),
    ),
    "anthropics+claude-plugins-official/plugins/plugin-dev/agents/agent-creator.md": ((), ()),
}
_TOOL_WARNING = re.compile(r":\d+: warning: tools: '([^']+)' ")
_ERROR = re.compile(r".*?\.md:\d+: (?!warning: )([A-Za-z]+)")

needs_fixtures = pytest.mark.skipif(
    not FIXTURES.is_dir(), reason=f"the real agent files are not at {FIXTURES}"
)


def _tools_line(path: Path) -> str:
    return next(
        (
            line
            for line in path.read_text(encoding="utf-8").splitlines()
            if line.startswith("tools:")
        ),
        "",
    )


@needs_fixtures
def test_every_fixture_naming_claude_code_tools_is_listed() -> None:
    """A file added to the fixtures that names Claude Code tools gets an expectation."""
    names = ("Read", "Grep", "Glob", "Write", "Edit", "Bash", "WebFetch", "Task", "Agent")
    with_names = {
        str(path.relative_to(FIXTURES))
        for path in FIXTURES.rglob("*.md")
        if any(re.search(rf"\b{name}\b", _tools_line(path)) for name in names)
    }
    assert with_names == set(EXPECTED)


@needs_fixtures
@pytest.mark.parametrize("relative", sorted(EXPECTED))
def test_validate_resolves_claude_code_tools_with_a_warning_per_missing_one(
    relative: str, tmp_path: Path
) -> None:
    warned, errors = EXPECTED[relative]
    done = run_cli("validate", str(FIXTURES / relative), cwd=tmp_path)
    assert done.returncode == (1 if errors else 0), done.stdout
    assert "unknown tool" not in done.stdout
    lines = done.stdout.splitlines()
    assert [m[1] for line in lines if (m := _TOOL_WARNING.search(line))] == list(warned)
    assert [m[1] for line in lines if (m := _ERROR.match(line))] == list(errors)
    for name in warned:
        if not name.startswith(("Task", "Agent")):
            assert f"so {name} was dropped and the agent runs without it" in done.stdout


def _run_one(relative: str, tmp_path: Path, backend: str) -> list[object]:
    agents = tmp_path / "agents"
    agents.mkdir()
    shutil.copy(FIXTURES / relative, agents)
    validate = run_cli("validate", "agents", cwd=tmp_path)
    done = run_cli(
        "run", "--backend", backend, "--json", "--agents", "agents", "Look around", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    # run reads the file as validate does: the same warnings, in the same order.
    warnings = [line for line in done.stderr.splitlines() if ": warning: " in line]
    assert warnings == [line for line in validate.stdout.splitlines() if ": warning: " in line]
    tool_warnings = [line for line in warnings if ": warning: tools: " in line]
    assert len(tool_warnings) == len(EXPECTED[relative][0])  # one per tool this host lacks
    return [decode_event(line) for line in done.stdout.splitlines()]


@needs_fixtures
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize(
    ("relative", "agent", "tools"),
    [
        (
            f"{VOLT}/03-infrastructure/deployment-engineer.md",
            "deployment-engineer",
            ["read_file", "write_file", "edit_file", "glob_files", "grep_files"],
        ),
        (
            f"{VOLT}/08-business-product/growth-loops.md",
            "growth-loops",
            # WebFetch and WebSearch are called (the offline model's arguments are refused).
            [
                "read_file",
                "write_file",
                "edit_file",
                "glob_files",
                "grep_files",
                "web_fetch",
                "web_search",
            ],
        ),
        (
            "wshobson+agents/plugins/agent-teams/agents/team-reviewer.md",
            "team-reviewer",
            ["read_file", "glob_files", "grep_files", "todo_write"],
        ),
    ],
)
def test_run_gives_the_agent_the_mapped_tools(
    relative: str, agent: str, tools: list[str], backend: str, tmp_path: Path
) -> None:
    events = _run_one(relative, tmp_path, backend)
    calls = [e for e in events if isinstance(e, ToolStart) and e.agent_name == agent]
    # The offline model calls every tool it is offered once: exactly the mapped ones.
    assert sorted(e.tool_name for e in calls) == sorted(tools)
    ends = [e for e in events if isinstance(e, DelegationEnd)]
    assert [(e.agent_name, e.status) for e in ends] == [(agent, "completed")]
