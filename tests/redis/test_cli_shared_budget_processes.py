"""Four ``deputy-runtime run`` processes on one Redis budget, against a counting model.

Everything is real: a loopback OpenAI-compatible server counting every request it
serves, the CLI in four OS processes at once, each lead asking for 100 delegations in
one turn, and the shared budget created and read back with ``deputy-runtime budget``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.chat.agent_server import AgentServer
from tests.cli._runhelp import cli, offline_env, run_cli, tool_free_agents

pytestmark = pytest.mark.slow  # spawns the CLI

PROCESSES = 4
FANOUT = 100
LIMIT = 150


def _budget(tmp_path: Path, redis_url: str, namespace: str, *args: str) -> str:
    done = run_cli(
        "budget", *args[:2], "--redis", redis_url, "--redis-namespace", namespace, *args[2:],
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def _stop(stdout: str) -> dict[str, Any]:
    """The lead's stop event: the last event of its ``--json`` stream."""
    events = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    assert events, stdout
    last: dict[str, Any] = events[-1]
    assert last["type"] == "stop", last
    return last


def test_four_runs_of_a_hundred_delegations_send_at_most_the_shared_150(
    tmp_path: Path, redis_url: str, namespace: str
) -> None:
    agents = tool_free_agents(tmp_path / "agents", "alpha", "beta")
    _budget(tmp_path, redis_url, namespace, "create", "team", "--max-requests", str(LIMIT))
    with AgentServer("openai", fanout=FANOUT) as server:
        env = offline_env(OPENAI_API_KEY="sk-loopback", OPENAI_BASE_URL=server.url + "/v1")
        command = cli(
            *("run", "--agents", str(agents), "--model", "openai/counted", "--json"),
            *("--redis", redis_url, "--redis-namespace", namespace, "--shared-budget", "team"),
            *("--max-requests", "1000", "Fan the work out"),
        )
        processes = [
            subprocess.Popen(
                command,
                cwd=tmp_path,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(PROCESSES)
        ]
        outputs = [p.communicate(timeout=240) for p in processes]
        served = len(server.models)
    for process, (_, err) in zip(processes, outputs, strict=True):
        assert process.returncode in (0, 1), err
    stops = [_stop(out) for out, _ in outputs]
    state = json.loads(_budget(tmp_path, redis_url, namespace, "show", "team", "--json"))

    # The model server saw at most the budget, leads' own requests included, and the
    # ledger counted exactly what it saw and what the runs' records add up to.
    assert 0 < served <= LIMIT
    assert state["used"]["requests"] == served
    assert sum(int(s["usage"]["requests"]) for s in stops) == served
    assert (state["reserved"]["requests"], state["holders"]) == (0, 0)
    assert state["remaining"]["requests"] == LIMIT - served
    # A run that made its first request kept its next one and concluded.
    for stop in stops:
        if stop["usage"]["requests"] > 0:
            assert stop["stop_reason"] == "complete", stop
        else:
            assert stop["stop_reason"] == "request_limit", stop
