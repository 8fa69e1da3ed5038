"""examples/mcp_agent.py runs offline on both backends, as a user would run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_mcp_agent_example(backend: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "examples" / "mcp_agent.py"), backend],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "tool mcp__notes__search_notes: read_only=True destructive=False" in out
    assert "tool mcp__notes__forget_all: read_only=False destructive=False" in out
    assert "result: {'result': ['buy milk', 'call the plumber about the milk pipe']}" in out
    assert "Permission denied: Tool 'mcp__notes__add_note' is not read-only" in out
    assert out.index("McpServerStarted") < out.index("McpServerStopped")
    assert "server stderr (captured): ('notes server ready',)" in out
    assert "notes server ready" not in done.stderr
