"""Shared helpers for the ``deputy-runtime run`` tests: subprocess environment, agent dirs."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import threading
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
    """Read stdout lines until one matches ``pattern``; return everything read.

    Bounded even if the child stops writing without exiting: a watchdog kills it at the
    deadline, which ends the blocking read, so a failing test reports instead of hanging.
    """
    stdout = process.stdout
    assert stdout is not None
    seen: list[str] = []
    watchdog = threading.Timer(timeout, process.kill)
    watchdog.start()
    try:
        while True:
            line = stdout.readline()
            if not line:
                break
            seen.append(line)
            if re.search(pattern, line):
                return "".join(seen)
    finally:
        watchdog.cancel()
    raise AssertionError(f"no line matching {pattern!r} within {timeout}s in:\n{''.join(seen)}")


def wait_for_markers(directory: Path, prefix: str, count: int, timeout: float = 30) -> None:
    """Wait until ``count`` marker files named ``prefix*`` exist (slow_plugin.py writes them).

    "delegation started" is printed when a delegation is admitted, before its owned
    resources are built; a test that interrupts "after it started" and then counts the
    resources must wait for them, or a loaded machine interrupts in between.
    """
    deadline = time.monotonic() + timeout
    while len(list(directory.glob(f"{prefix}*"))) < count:
        if time.monotonic() > deadline:
            found = sorted(p.name for p in directory.iterdir())
            raise AssertionError(f"expected {count} {prefix}* markers within {timeout}s: {found}")
        time.sleep(0.02)


def reap(pid: int, fd: int | None = None, grace: float = 10.0) -> int:
    """Wait for a forked child and return its wait status; kill it after ``grace`` s.

    A test that fails half way must not hang CI: a child writing to a pty nobody reads
    blocks for ever, so while waiting the pty ``fd`` is drained, and a child still alive
    after ``grace`` seconds is killed.
    """
    deadline = time.monotonic() + grace
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            return os.waitpid(pid, 0)[1]
        if fd is not None:
            ready, _, _ = select.select([fd], [], [], 0.05)
            if ready:
                try:
                    os.read(fd, 65536)
                except OSError:
                    fd = None  # EIO: the child closed the terminal
        else:
            time.sleep(0.05)
