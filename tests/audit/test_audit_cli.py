"""Audit of ``deputy-runtime`` (issue 8, DESIGN.md section 7): gaps the CLI tests missed.

Real subprocesses of ``python -m deputy_runtime`` with pipes (so stdout is not a terminal),
real definition files in tmp_path, real signals. No API keys reach the subprocess.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deputy_runtime.cli import _parser

REPO_ROOT = Path(__file__).resolve().parents[2]
SLOW_PLUGIN = REPO_ROOT / "tests" / "cli" / "slow_plugin.py"
_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL")

_DEFINITION = """\
version: 1
name: {name}
description: {name} agent used by the CLI audit.
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

_BROKEN_PLUGIN = """\
from deputy_runtime import ProviderError, register_provider


class BrokenProvider:
    def __init__(self, model="v1"):
        self.name = "broken"
        self.model = model

    async def complete(self, request):
        raise ProviderError("upstream exploded", provider="broken", status=500)

    async def stream(self, request):
        raise ProviderError("upstream exploded", provider="broken", status=500)
        yield  # an async generator that fails on first use

    def with_model(self, model):
        return BrokenProvider(model)


register_provider("broken", lambda model, **_: BrokenProvider(model), default_model="v1",
                  replace=True)
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _KEYS}
    env["PYTHONPATH"] = str(REPO_ROOT)
    env.update(extra)
    return env


def _agents(directory: Path, mode: str = "readonly", *names: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        text = _DEFINITION.format(name=name, mode=mode)
        (directory / f"{name}.yaml").write_text(text, encoding="utf-8")
    return directory


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deputy_runtime", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_commands_and_run_options_match_design() -> None:
    parser = _parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(sub.choices) == {"validate", "list", "convert", "schema", "run", "bench"}  # type: ignore[arg-type]
    run = sub.choices["run"]  # type: ignore[index]
    options = {o for a in run._actions for o in a.option_strings}
    assert {"--agents", "--model", "--permission-mode", "--max-requests", "--json"} <= options
    args = run.parse_args(["--agents", "d", "the task"])
    assert (args.task, args.model, args.permission_mode, args.max_requests, args.json) == (
        "the task",
        None,
        "standard",
        25,
        False,
    )


def test_provider_failure_exits_1_with_the_error_and_no_traceback(tmp_path: Path) -> None:
    agents = _agents(tmp_path / "agents", "readonly", "alpha")
    plugin = tmp_path / "broken_plugin.py"
    plugin.write_text(_BROKEN_PLUGIN, encoding="utf-8")
    done = _run(
        *("run", "--plugin", str(plugin), "--model", "broken/v1"),
        *("--agents", str(agents), "Do it"),
        cwd=tmp_path,
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stdout.splitlines()[0] == "Model: broken/v1 (from --model)"
    assert "upstream exploded" in done.stdout
    assert "Traceback" not in done.stderr + done.stdout


def test_a_child_wider_than_the_cli_ceiling_fails_setup_and_is_reported(tmp_path: Path) -> None:
    # --permission-mode readonly is every subagent's ceiling; a definition asking for
    # standard fails its delegation before any request, and the summary says why.
    agents = _agents(tmp_path / "agents", "standard", "writer")
    done = _run(
        *("run", "--permission-mode", "readonly", "--agents", str(agents), "Write things"),
        cwd=tmp_path,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    row = re.search(r"^delegation_\w+\s+writer\s+(\w+)\s+(\w+)", done.stdout, re.M)
    assert row is not None, done.stdout
    assert row.groups() == ("failed", "setup_error")
    assert "cannot delegate with mode standard" in done.stdout
    assert "Traceback" not in done.stderr


def _read_until(process: subprocess.Popen[str], pattern: str, timeout: float) -> str:
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


def test_a_second_ctrl_c_still_exits_130_cleanly_with_cleanup(tmp_path: Path) -> None:
    agents = _agents(tmp_path / "agents", "readonly", "slow_one", "slow_two")
    markers = tmp_path / "markers"
    markers.mkdir()
    env = _env(SLOW_PLUGIN_MARKERS=str(markers), SLOW_PLUGIN_SECONDS="60")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "deputy_runtime",
            *("run", "--plugin", str(SLOW_PLUGIN), "--model", "slow/v1"),
            *("--backend", "trio", "--agents", str(agents), "Do everything"),
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        head = _read_until(process, r"delegation started", timeout=30)
        while head.count("delegation started") < 2:
            head += _read_until(process, r"delegation started", timeout=30)
        process.send_signal(signal.SIGINT)
        process.send_signal(signal.SIGINT)  # impatient user: cancel at once
        rest, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    out = head + rest
    assert process.returncode == 130, (out, stderr)
    assert "Traceback" not in stderr, stderr
    assert "KeyboardInterrupt" not in stderr, stderr
    created = {p.name.removeprefix("created-") for p in markers.glob("created-*")}
    cleaned = {p.name.removeprefix("cleaned-") for p in markers.glob("cleaned-*")}
    assert len(created) == 2
    assert cleaned == created
    assert "Interrupted: 0 of 2 delegations had completed" in out


@pytest.mark.parametrize("command", [["list", "{agents}"], ["validate", "{agents}"]])
def test_list_and_validate_accept_the_run_agents_directory(
    tmp_path: Path, command: list[str]
) -> None:
    agents = _agents(tmp_path / "agents", "readonly", "alpha", "beta")
    done = _run(*[c.format(agents=agents) for c in command], cwd=tmp_path)
    assert done.returncode == 0, (done.stdout, done.stderr)
    if command[0] == "list":
        assert "alpha" in done.stdout
        assert "beta" in done.stdout
