"""Claude Code plugin folders given to ``run``, ``validate`` and ``list`` as ``--agents``.

A real plugin folder is written to disk (manifest, README, agents, a skill, a command, a
``hooks.json`` whose PreToolUse command hook refuses ``Write``, and a flat ``.mcp.json``
naming its server by ``${CLAUDE_PLUGIN_ROOT}``); the CLI runs as a subprocess on the
offline model, which calls every tool it is offered once.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli._runhelp import offline_env, run_cli
from tests.mcp._mcp_helpers import process_left
from tests.plugin_folder import write_plugin

pytestmark = pytest.mark.slow


def test_run_on_a_plugin_root_loads_its_agents_skills_commands_hooks_and_servers(
    tmp_path: Path,
) -> None:
    plugin = write_plugin(tmp_path)
    (tmp_path / "notes.txt").write_text("a note\n")
    done = run_cli(
        "run", "--json", "--agents", str(plugin), "Check the notes", cwd=tmp_path, env=offline_env()
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    # The agent is the plugin's, namespaced; the README is not an agent.
    starts = [e for e in events if e["type"] == "delegation_start"]
    assert [e["agent_name"] for e in starts] == ["kit:checker"]
    # The hook the plugin does not know here is named in a warning, not dropped silently.
    assert "hooks.TeammateIdle: no such event here" in done.stderr
    ends = {e["tool_name"]: e for e in events if e["type"] == "tool_end"}
    # The PreToolUse command hook refused Write before it ran; the subagent's model read
    # the hook's stderr as the reason (the offline model repeats what its tools answered).
    assert "write_file" not in ends
    [answer] = [
        e["text"] for e in events if e["type"] == "text" and e["agent_name"] == "kit:checker"
    ]
    assert "write_file failed: Denied by hook: writes are frozen by the kit plugin" in answer
    # The skill came from the plugin's skills folder.
    assert ends["load_skill"]["result_preview"].startswith("Write short lines.")
    seen = json.loads((tmp_path / "hook-input.json").read_text())
    assert (seen["hook_event_name"], seen["tool_name"]) == ("PreToolUse", "Write")
    assert seen["cwd"] == str(tmp_path)
    # The flat .mcp.json's server started for the delegation (owned) and stopped with it.
    servers = [e for e in events if e["type"] == "mcp_server"]
    assert [(e["server"], e["action"]) for e in servers] == [("tiny", "start"), ("tiny", "stop")]
    assert ends["mcp__tiny__whoami"]["error"] is None
    assert "kit" in ends["mcp__tiny__whoami"]["result_preview"]
    assert not process_left(servers[0]["pid"])


def test_validate_and_list_read_a_plugin_root_as_run_does(tmp_path: Path) -> None:
    plugin = write_plugin(tmp_path)
    done = run_cli("validate", str(plugin), cwd=tmp_path, env=offline_env())
    assert done.returncode == 0, done.stdout + done.stderr
    assert "README" not in done.stdout
    assert "checked 1 file(s)" in done.stderr
    # The hooks file is checked as run reads it: the unknown event is a warning.
    hooks_file = plugin / "hooks" / "hooks.json"
    assert f"{hooks_file}: warning: hooks.TeammateIdle: no such event here" in done.stdout
    # The plugin's own server is known to its agent (run attaches it): no MCP warning.
    assert "no MCP server named" not in done.stdout
    # A broken hooks file and a broken server are errors naming their files.
    hooks_file.write_text('{"hooks": {"PreToolUse": [{"matcher": "("}]}}')
    (plugin / ".mcp.json").write_text('{"tiny": {"type": "sse", "url": "http://x"}}')
    broken = run_cli("validate", str(plugin), cwd=tmp_path, env=offline_env())
    assert broken.returncode == 1, broken.stdout + broken.stderr
    lines = broken.stdout.splitlines()
    assert any(
        line.startswith(f"{hooks_file}: ") and "hooks.PreToolUse[0]" in line for line in lines
    )
    assert any(line.startswith(f"{plugin / '.mcp.json'}: ") for line in lines), lines
    listed = run_cli("list", str(plugin), cwd=tmp_path, env=offline_env())
    assert listed.returncode == 0, listed.stderr
    assert "kit:checker" in listed.stdout


def test_a_folder_of_plugins_namespaces_each_plugins_agents(tmp_path: Path) -> None:
    plugins = tmp_path / "plugins"
    write_plugin(plugins)
    other = plugins / "other" / "agents"
    other.mkdir(parents=True)
    (other / "checker.md").write_text(
        "---\nname: checker\ndescription: Another checker.\ntools: Read\n---\nCheck.\n"
    )
    listed = run_cli("list", str(plugins), cwd=tmp_path, env=offline_env())
    assert listed.returncode == 0, listed.stderr
    names = [line.split()[0] for line in listed.stdout.splitlines()[1:] if line.strip()]
    assert names == ["kit:checker", "other:checker"]
