"""``validate --mcp-tools`` starts the servers definitions name and checks their tool names.

The server is ``tests/mcp/servers/tiny.py``, a real MCP server over stdio (tools
``whoami`` and ``crash``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.cli._runhelp import REPO_ROOT, run_cli

pytestmark = pytest.mark.slow  # spawns the CLI and MCP servers

TINY = REPO_ROOT / "tests" / "mcp" / "servers" / "tiny.py"


def _agent(directory: Path, name: str, tools: str) -> None:
    text = f"---\nname: {name}\ndescription: {name} agent\ntools: {tools}\n---\nYou are {name}.\n"
    (directory / f"{name}.md").write_text(text, encoding="utf-8")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    agents = tmp_path / "agents"
    agents.mkdir()
    _agent(agents, "alpha", "read_file, mcp__tiny__whoamy, mcp__tiny")
    _agent(agents, "beta", "mcp__tiny__crash")
    _agent(agents, "gamma", "mcp__dead__anything")
    servers = {
        "tiny": {"command": sys.executable, "args": [str(TINY)]},
        "dead": {"command": str(tmp_path / "no-such-server")},
    }
    (tmp_path / ".mcp.json").write_text(json.dumps(servers), encoding="utf-8")
    return tmp_path


def test_a_mistyped_tool_name_is_an_error_with_the_closest_name(project: Path) -> None:
    done = run_cli("validate", "--mcp-tools", "agents", cwd=project)
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stdout.splitlines()
    assert (
        "agents/alpha.md:4: tools: MCP server 'tiny' has no tool 'whoamy'; did you mean "
        "mcp__tiny__whoami? (it lists: crash, whoami)"
    ) in lines
    # A server that cannot be started is named, with the reason, for the file naming it.
    gamma = [line for line in lines if line.startswith("agents/gamma.md:4: ")]
    assert len(gamma) == 1, lines
    assert "MCP server 'dead' could not be started to check it" in gamma[0]
    assert not any("beta.md" in line for line in lines)  # crash exists; whole server ok
    assert len(lines) == 2, lines
    assert "checked 3 file(s): 2 error(s)" in done.stderr


def test_without_the_option_nothing_is_started(project: Path) -> None:
    done = run_cli("validate", "agents", cwd=project)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert done.stdout == ""
    assert "checked 3 file(s): no problems" in done.stderr
