"""``deputy-runtime run`` reads definitions as ``validate`` and ``list`` do.

The same path checks (and messages), the same tool and skill registries (plugins'
``tools`` included) and the same plugin import; definition warnings are one
``file:line: warning: message`` line each on stderr, before the model line.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from deputy_runtime import decode_event
from deputy_runtime.runtime import DelegationEnd, ToolStart
from tests.cli._runhelp import run_cli, tool_free_agents

pytestmark = pytest.mark.slow

COLON_MD = (
    "---\nname: notes\ndescription: Use when: notes are due\ntools: read_file\n---\nWrite notes.\n"
)
COLON_WARNING = "warning: the value of 'description' contains ': ' without quotes"
SEARCH_PLUGIN = '''\
from deputy_runtime import tool


@tool(read_only=True)
def search_web(query: str) -> str:
    """Search the web."""
    return f"results for {query}"


tools = [search_web]
'''
SEARCHER_MD = "---\nname: searcher\ndescription: Searches\ntools: search_web\n---\nSearch.\n"


POINT = "; point --agents at a directory of definition files, e.g. --agents examples/agents"


def _usage_error(done: subprocess.CompletedProcess[str], message: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr == f"deputy-runtime run: {message}\n"
    assert done.stdout == ""


def test_a_missing_agents_path_is_exit_2_with_the_message_of_validate(tmp_path: Path) -> None:
    done = run_cli("run", "--agents", "nowhere", "Do it", cwd=tmp_path)
    _usage_error(done, f"--agents 'nowhere' does not exist{POINT}")
    validate = run_cli("validate", "nowhere", cwd=tmp_path)
    assert validate.returncode == 2
    assert validate.stderr == "deputy-runtime validate: 'nowhere' does not exist\n"


def test_a_directory_without_definitions_is_exit_2(tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "README.txt").write_text("not a definition", encoding="utf-8")
    (agents / ".hidden.yaml").write_text("version: 1\n", encoding="utf-8")
    done = run_cli("run", "--agents", "agents", "Do it", cwd=tmp_path)
    _usage_error(
        done,
        "--agents 'agents' holds no definition files (*.yaml, *.yml or *.md at its top level; "
        f"hidden files are skipped){POINT}",
    )


def test_a_file_as_agents_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text(COLON_MD, encoding="utf-8")
    done = run_cli("run", "--agents", "notes.md", "Do it", cwd=tmp_path)
    assert done.returncode == 2
    assert "--agents 'notes.md' is a file; point it at a directory" in done.stderr
    assert "Model:" not in done.stdout + done.stderr


def test_a_plugin_tool_that_passes_validate_is_used_by_run(tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "searcher.md").write_text(SEARCHER_MD, encoding="utf-8")
    (tmp_path / "search_plugin.py").write_text(SEARCH_PLUGIN, encoding="utf-8")
    plugin = ("--plugin", "search_plugin.py")
    validate = run_cli("validate", *plugin, "agents", cwd=tmp_path)
    assert (validate.returncode, validate.stdout) == (0, ""), validate.stderr
    done = run_cli("run", *plugin, "--json", "--agents", "agents", "Find it", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    events = [decode_event(line) for line in done.stdout.splitlines()]
    calls = [e for e in events if isinstance(e, ToolStart) and e.agent_name == "searcher"]
    assert [e.tool_name for e in calls] == ["search_web"]
    ends = [e for e in events if isinstance(e, DelegationEnd)]
    assert [(e.agent_name, e.status) for e in ends] == [("searcher", "completed")]


def test_a_plugin_tools_function_that_raises_shows_its_own_line(tmp_path: Path) -> None:
    (tmp_path / "index_plugin.py").write_text(
        "def tools():\n    raise RuntimeError('no index')\n", encoding="utf-8"
    )
    agents = tool_free_agents(tmp_path / "agents", "alpha")
    done = run_cli(
        "run", "--plugin", "index_plugin.py", "--agents", str(agents), "Go", cwd=tmp_path
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "tools() failed: RuntimeError: no index" in done.stderr
    assert "index_plugin.py:2 in tools: raise RuntimeError('no index')" in done.stderr
    assert "Traceback" not in done.stderr
    assert "Model:" not in done.stdout + done.stderr


def test_definition_warnings_are_lines_on_stderr_before_the_model_line(tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "notes.md").write_text(COLON_MD, encoding="utf-8")
    done = run_cli("run", "--json", "--agents", "agents", "Write notes", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith(f"{Path('agents') / 'notes.md'}:3: {COLON_WARNING}")
    assert lines[1].startswith("Model: test")
    assert "DefinitionWarning" not in done.stderr
    # stdout is the events and nothing else
    events = [decode_event(line) for line in done.stdout.splitlines()]
    assert any(isinstance(e, DelegationEnd) and e.agent_name == "notes" for e in events)
    assert COLON_WARNING not in done.stdout


def test_without_json_the_warning_is_still_on_stderr_only(tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "notes.md").write_text(COLON_MD, encoding="utf-8")
    done = run_cli("run", "--agents", "agents", "Write notes", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"{Path('agents') / 'notes.md'}:3: {COLON_WARNING}")
    assert done.stdout.startswith("Model: test")
    assert COLON_WARNING not in done.stdout
