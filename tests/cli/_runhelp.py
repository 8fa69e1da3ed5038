"""Shared helpers for the ``deputy-runtime run`` tests: subprocess environment, agent dirs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_AGENTS = REPO_ROOT / "examples" / "agents"
SLOW_PLUGIN = Path(__file__).resolve().parent / "slow_plugin.py"
# Keys and endpoints that would make the CLI pick a real provider.
_PROVIDER_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL")


def offline_env(root: Path = REPO_ROOT, **extra: str) -> dict[str, str]:
    """The environment for a CLI subprocess: package importable from ``root``, no API keys."""
    env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_VARIABLES}
    env["PYTHONPATH"] = str(root)
    env.pop("NO_COLOR", None)
    env.update(extra)
    return env


def cli(*args: str) -> list[str]:
    """The command line for ``python -m deputy_runtime ARGS``."""
    return [sys.executable, "-m", "deputy_runtime", *args]


def run_cli(
    *args: str, cwd: Path = REPO_ROOT, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run the CLI to completion with pipes (so stdout is not a terminal)."""
    return subprocess.run(
        cli(*args),
        cwd=cwd,
        env=env if env is not None else offline_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


_DEFINITION = """\
version: 1
name: {name}
description: {name} agent used by the CLI tests.
prompt: You are the {name} agent.
tools: []
model: inherit
skills: []
disallowed_tools: null
memory: null
mcp_servers: null
initial_prompt: null
max_requests: 4
permission_mode: {mode}
"""


def tool_free_agents(directory: Path, *names: str, mode: str = "readonly") -> Path:
    """Write tool-free YAML definitions (usable in owned mode) and return the directory."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        text = _DEFINITION.format(name=name, mode=mode)
        (directory / f"{name}.yaml").write_text(text, encoding="utf-8")
    return directory


def read_until(process: subprocess.Popen[str], pattern: str, timeout: float) -> str:
    """Read stdout lines until one matches ``pattern``; return everything read."""
    assert process.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen.append(line)
        if re.search(pattern, line):
            return "".join(seen)
    raise AssertionError(f"no line matching {pattern!r} in:\n{''.join(seen)}")
