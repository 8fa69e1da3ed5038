"""``deputy-runtime worker`` processes: refusing bad input, and surviving a SIGKILL of the
worker in the middle of a fan-out (another worker finishes the run, every delegation
appears once, and the killed worker's tool calls run again: activities are at least
once)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from deputy_runtime import UsageLimits, agent_definitions, tools_file
from deputy_runtime.temporal import lead_input, start_lead
from tests.temporal import crash_plugin
from tests.temporal.helpers import assert_replays, run_workflow_ids

REPO_ROOT = Path(__file__).resolve().parents[2]
PLUGIN = Path(crash_plugin.__file__)
WAIT_SECONDS = 180.0

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

AGENT_YAML = """\
version: 1
name: {name}
description: Holds until released.
prompt: You wait.
tools: [hold]
max_requests: 3
"""


def _worker_command(address: str, agents: Path, task_queue: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "deputy_runtime",
        "worker",
        "--temporal",
        address,
        "--agents",
        str(agents),
        "--task-queue",
        task_queue,
        "--plugin",
        str(PLUGIN),
    ]


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Worker processes started by a test; any still running are killed afterwards."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait()


def test_worker_refuses_a_tool_it_cannot_serve(temporal_address: str, tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "a.yaml").write_text(AGENT_YAML.format(name="a"))
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "deputy_runtime", "worker", "--temporal", temporal_address,
         "--agents", str(agents)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "hold" in done.stderr
    assert "a.yaml" in done.stderr


async def test_sigkill_mid_fanout_another_worker_completes_the_run(
    temporal_address: str, client: Client, tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    names = ("one", "two", "three")
    for name in names:
        (agents / f"{name}.yaml").write_text(AGENT_YAML.format(name=name))
    log, gate = tmp_path / "calls.log", tmp_path / "gate"
    log.touch()
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "DEPUTY_TEST_LOG": str(log),
        "DEPUTY_TEST_GATE": str(gate),
    }
    task_queue = f"deputy-crash-{uuid.uuid4().hex}"
    command = _worker_command(temporal_address, agents, task_queue)

    def spawn(tag: str) -> subprocess.Popen[bytes]:
        out = open(tmp_path / f"worker-{tag}.log", "wb")  # noqa: SIM115 - closed below
        p = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=out, stderr=out)
        out.close()
        processes.append(p)
        return p

    first = spawn("first")
    registry = {t.name: t for t in tools_file(tmp_path)} | {"hold": crash_plugin.hold}
    definitions = agent_definitions(agents, tools=registry)
    request = lead_input("Hold on", definitions, model="test", usage_limits=UsageLimits(20))
    handle = await start_lead(
        client, request, workflow_id=f"crash-{uuid.uuid4().hex}", task_queue=task_queue
    )
    deadline = time.monotonic() + WAIT_SECONDS
    while len(log.read_text().split()) < 3:  # all three children are inside `hold`
        assert first.poll() is None, (tmp_path / "worker-first.log").read_text()
        assert time.monotonic() < deadline, "the children never reached their tool call"
        await anyio.sleep(0.1)  # poll interval of the log check
    first.send_signal(signal.SIGKILL)
    first.wait()
    gate.touch()
    second = spawn("second")
    with anyio.fail_after(WAIT_SECONDS):
        out = await handle.result()

    assert out.result.stop_reason == "complete"
    assert sorted(r.agent_name for r in out.subagents) == sorted(names)
    assert {(r.status, r.stop_reason) for r in out.subagents} == {("completed", "complete")}
    assert len({r.delegation_id for r in out.subagents}) == 3
    started = [
        e
        async for e in handle.fetch_history_events()
        if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
    ]
    assert len(started) == 3  # each delegation's child workflow was started once
    # The killed worker's calls ran again on the second worker: at least once, not once.
    pids = log.read_text().split()
    assert pids.count(str(first.pid)) == 3
    assert pids.count(str(second.pid)) == 3
    for result in out.subagent_results:
        assert result is not None
        assert "released" in result.response
    # The histories written across the crash replay without nondeterminism.
    assert await assert_replays(client, run_workflow_ids(handle.id, out)) == 4
