"""``deputy-runtime run`` and ``validate`` with MCP servers from ``.mcp.json``: real CLI
subprocesses starting the standard-library test server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.cli._runhelp import offline_env, run_cli
from tests.mcp._mcp_helpers import SERVERS, process_left

pytestmark = pytest.mark.slow

_DEFINITION = """\
version: 1
name: probe
description: Asks the tiny MCP server who it is.
prompt: You are the probe agent.
tools: [mcp__tiny__whoami]
max_requests: 4
permission_mode: readonly
"""


def _setup(tmp_path: Path, config_name: str = ".mcp.json") -> Path:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "probe.yaml").write_text(_DEFINITION, encoding="utf-8")
    config = {
        "mcpServers": {
            "tiny": {"command": sys.executable, "args": [str(SERVERS / "tiny.py"), "cli"]}
        }
    }
    path = tmp_path / config_name
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


@pytest.mark.parametrize("mode", ["owned", "shared", "exclusive"])
def test_run_attaches_the_servers_of_mcp_json(tmp_path: Path, mode: str) -> None:
    _setup(tmp_path)
    done = run_cli(
        "run",
        "Ask the probe",
        "--agents",
        "agents",
        "--json",
        "--mcp-mode",
        f"tiny={mode}",
        cwd=tmp_path,
        env=offline_env(),
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    starts = [e for e in events if e["type"] == "mcp_server" and e["action"] == "start"]
    assert len(starts) == 1
    assert starts[0]["server"] == "tiny"
    calls = [e for e in events if e["type"] == "tool_end" and e["tool_name"] == "mcp__tiny__whoami"]
    assert len(calls) == 1
    assert calls[0]["error"] is None
    assert str(starts[0]["pid"]) in calls[0]["result_preview"]
    # The CLI closed the lead: the server is gone, whatever its mode.
    assert not process_left(starts[0]["pid"])
    if mode == "owned":  # stopped at settlement, inside the run
        assert any(e["type"] == "mcp_server" and e["action"] == "stop" for e in events)


def test_run_refuses_a_mode_for_an_unknown_server(tmp_path: Path) -> None:
    _setup(tmp_path, "servers.json")
    done = run_cli(
        "run",
        "x",
        "--agents",
        "agents",
        "--mcp-config",
        "servers.json",
        "--mcp-mode",
        "files=owned",
        cwd=tmp_path,
        env=offline_env(),
    )
    assert done.returncode == 2
    assert "no MCP server named 'files'; configured: tiny" in done.stderr


def test_validate_resolves_mcp_names_against_the_configuration(tmp_path: Path) -> None:
    _setup(tmp_path, "servers.json")
    without = run_cli("validate", "agents", cwd=tmp_path, env=offline_env())
    # Without a configuration the name cannot resolve yet: a warning naming the server.
    assert "warning" in without.stdout
    assert "'tiny'" in without.stdout
    with_config = run_cli(
        "validate", "agents", "--mcp-config", "servers.json", cwd=tmp_path, env=offline_env()
    )
    assert with_config.returncode == 0, with_config.stdout + with_config.stderr
    assert "tiny" not in with_config.stdout
    assert "warning" not in with_config.stderr


def test_an_agent_file_naming_a_server_in_mcp_servers_gets_all_its_tools(
    tmp_path: Path,
) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    # Claude Code's mcpServers: [name], with no MCP tool named in tools.
    (agents / "probe.md").write_text(
        "---\nname: probe\ndescription: Asks the server.\ntools: Read\n"
        "mcpServers: [tiny]\n---\nYou probe.\n"
    )
    config = {"tiny": {"command": sys.executable, "args": [str(SERVERS / "tiny.py"), "all"]}}
    (tmp_path / ".mcp.json").write_text(json.dumps(config), encoding="utf-8")
    done = run_cli("run", "Probe", "--agents", "agents", "--json", cwd=tmp_path, env=offline_env())
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    # Every tool of the server was offered, as Claude Code gives them (the offline model
    # calls each once: `crash` ends the server, so what `whoami` answers is not checked).
    started = {e["tool_name"] for e in events if e["type"] == "tool_start"}
    assert {"mcp__tiny__whoami", "mcp__tiny__crash", "read_file"} <= started
