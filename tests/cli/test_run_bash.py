"""``run`` gives agent files that name ``Bash`` the sandboxed shell tools.

The offline model calls every tool it is offered once (``bash`` with the command
``test``, which exits 1): under ``--permission-mode full`` it runs in bubblewrap; under
the default ``standard`` mode the destructive tool is refused before anything runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli._runhelp import offline_env, run_cli

pytestmark = pytest.mark.slow

_AGENT = """\
---
name: shell
description: Runs shell commands.
tools: Bash, BashOutput, KillShell
---
Run things.
"""


def _events(tmp_path: Path, *options: str) -> list[dict[str, object]]:
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "shell.md").write_text(_AGENT)
    done = run_cli(
        "run", "--json", "--agents", "agents", *options, "Go", cwd=tmp_path, env=offline_env()
    )
    assert done.returncode == 0, done.stderr
    assert ": warning: tools:" not in done.stderr  # Bash, BashOutput, KillShell honoured
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_bash_runs_sandboxed_under_full_mode(tmp_path: Path) -> None:
    events = _events(tmp_path, "--permission-mode", "full")
    [end] = [e for e in events if e["type"] == "tool_end" and e["tool_name"] == "bash"]
    # `test` with no arguments ran in the sandbox and exited 1.
    assert end["error"] is None
    assert end["result_preview"] == "Exit code 1"


def test_bash_is_refused_in_standard_mode(tmp_path: Path) -> None:
    events = _events(tmp_path)
    assert not [e for e in events if e["type"] == "tool_start" and e["tool_name"] == "bash"]
    [denied] = [e for e in events if e["type"] == "permission" and e.get("tool_name") == "bash"]
    assert denied["decision"] == "deny"
    assert "needs mode 'full' or the allow list" in str(denied["reason"])
