"""``deputy-runtime`` edge cases: the command set, provider failures, ceilings, Ctrl-C twice.

Real subprocesses of ``python -m deputy_runtime`` with pipes (so stdout is not a terminal),
real definition files in tmp_path, real signals. No API keys reach the subprocess.
"""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import pytest

from deputy_runtime.cli import _parser
from tests.cli._runhelp import (
    SLOW_PLUGIN,
    cli,
    offline_env,
    read_until,
    run_cli,
    tool_free_agents,
    wait_for_markers,
)

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


def test_commands_and_run_options_match_design() -> None:
    parser = _parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert isinstance(sub.choices, dict)
    assert set(sub.choices) == {
        "validate",
        "list",
        "convert",
        "schema",
        "run",
        "bench",
        "serve",
        "worker",
        "attach",
        "answer",
        "budget",
        "mcp-serve",
    }
    run = sub.choices["run"]
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


@pytest.mark.slow
def test_provider_failure_exits_1_with_the_error_and_no_traceback(tmp_path: Path) -> None:
    agents = tool_free_agents(tmp_path / "agents", "alpha", mode="readonly")
    plugin = tmp_path / "broken_plugin.py"
    plugin.write_text(_BROKEN_PLUGIN, encoding="utf-8")
    done = run_cli(
        *("run", "--plugin", str(plugin), "--model", "broken/v1"),
        *("--agents", str(agents), "Do it"),
        cwd=tmp_path,
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stdout.splitlines()[0] == "Model: broken/v1 (from --model)"
    assert "upstream exploded" in done.stdout
    assert "Traceback" not in done.stderr + done.stdout


@pytest.mark.slow
def test_a_child_wider_than_the_cli_ceiling_fails_setup_and_is_reported(tmp_path: Path) -> None:
    # --permission-mode readonly is every subagent's ceiling; a definition asking for
    # standard fails its delegation before any request, and the summary says why.
    agents = tool_free_agents(tmp_path / "agents", "writer", mode="standard")
    done = run_cli(
        *("run", "--permission-mode", "readonly", "--agents", str(agents), "Write things"),
        cwd=tmp_path,
    )
    # The only delegation failed, so the run is exit 4 (the answer rests on no subagent).
    assert done.returncode == 4, (done.stdout, done.stderr)
    row = re.search(r"^delegation_\w+\s+writer\s+(\w+)\s+(\w+)", done.stdout, re.M)
    assert row is not None, done.stdout
    assert row.groups() == ("failed", "setup_error")
    assert "cannot delegate with mode standard" in done.stdout
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_a_second_ctrl_c_still_exits_130_cleanly_with_cleanup(tmp_path: Path) -> None:
    agents = tool_free_agents(tmp_path / "agents", "slow_one", "slow_two", mode="readonly")
    markers = tmp_path / "markers"
    markers.mkdir()
    env = offline_env(SLOW_PLUGIN_MARKERS=str(markers), SLOW_PLUGIN_SECONDS="60")
    process = subprocess.Popen(
        cli(
            *("run", "--plugin", str(SLOW_PLUGIN), "--model", "slow/v1"),
            *("--backend", "trio", "--agents", str(agents), "Do everything"),
        ),
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        head = read_until(process, r"delegation started", timeout=30)
        while head.count("delegation started") < 2:
            head += read_until(process, r"delegation started", timeout=30)
        wait_for_markers(markers, "created-", 2)
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


@pytest.mark.slow
@pytest.mark.parametrize("command", [["list", "{agents}"], ["validate", "{agents}"]])
def test_list_and_validate_accept_the_run_agents_directory(
    tmp_path: Path, command: list[str]
) -> None:
    agents = tool_free_agents(tmp_path / "agents", "alpha", "beta", mode="readonly")
    done = run_cli(*[c.format(agents=agents) for c in command], cwd=tmp_path)
    assert done.returncode == 0, (done.stdout, done.stderr)
    if command[0] == "list":
        assert "alpha" in done.stdout
        assert "beta" in done.stdout
