"""``deputy-runtime run --temporal`` draws delegations while they run, and
``deputy-runtime attach`` follows a run again after ``run`` stopped following it (the
second Ctrl-C), through real worker and CLI processes."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from temporalio.client import Client

from deputy_runtime import decode_event
from deputy_runtime.runtime import Event, StopEvent, ToolStart
from deputy_runtime.temporal import data_converter
from tests.temporal.helpers import was_signalled
from tests.temporal.test_run_cli import _env

pytestmark = pytest.mark.slow  # subprocesses

DEADLINE_SECONDS = 180.0  # generous: the machine is shared; every wait is on a condition


def _wait_for(check: Callable[[], object], what: str, *processes: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not check():
        for p in processes:
            assert p.poll() is None, f"{p.args!r} exited early while waiting for {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)  # poll interval of the condition above


def _events(path: Path) -> list[Event]:
    lines = path.read_text().splitlines() if path.exists() else []
    return [decode_event(line) for line in lines if line.strip()]


def _held(path: Path) -> set[str | None]:
    """Delegations whose ``hold`` call the output shows started."""
    return {
        e.delegation_id
        for e in _events(path)
        if isinstance(e, ToolStart) and e.tool_name == "hold" and e.delegation_id
    }


async def _lead_log(address: str, workflow_id: str) -> list[str]:
    client = await Client.connect(address, data_converter=data_converter)
    log: list[str] = await client.get_workflow_handle(workflow_id).query("events", 0)
    return log


async def _signalled(address: str, workflow_id: str) -> bool:
    client = await Client.connect(address, data_converter=data_converter)
    return await was_signalled(client, workflow_id)


def test_run_draws_delegations_live_and_attach_follows_again(
    temporal_address: str, tmp_path: Path
) -> None:
    from tests.temporal import crash_plugin

    agents = tmp_path / "agents"
    agents.mkdir()
    for name in ("one", "two"):
        (agents / f"{name}.yaml").write_text(
            f"version: 1\nname: {name}\ndescription: Holds.\nprompt: You wait.\n"
            "tools: [hold]\nmax_requests: 3\n"
        )
    log, gate = tmp_path / "calls.log", tmp_path / "gate"
    log.touch()
    env = {**_env(), "DEPUTY_TEST_LOG": str(log), "DEPUTY_TEST_GATE": str(gate)}
    queue = f"deputy-cli-{uuid.uuid4().hex}"
    with open(tmp_path / "worker.log", "wb") as worker_log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "deputy_runtime", "worker", "--temporal", temporal_address,
             "--agents", str(agents), "--task-queue", queue, "--plugin", crash_plugin.__file__],
            cwd=tmp_path, env=env, stdout=worker_log, stderr=worker_log,
        )  # fmt: skip
    run_out, run_err = tmp_path / "run.jsonl", tmp_path / "run.stderr"
    attach_out, attach_err = tmp_path / "attach.jsonl", tmp_path / "attach.stderr"
    processes = [worker]
    try:
        with open(run_out, "wb") as out, open(run_err, "wb") as err:
            runner = subprocess.Popen(
                [sys.executable, "-m", "deputy_runtime", "run", "--agents", str(agents),
                 "--json", "--temporal", temporal_address, "--task-queue", queue,
                 "--plugin", crash_plugin.__file__, "Hold on"],
                cwd=tmp_path, env=env, stdout=out, stderr=err,
            )  # fmt: skip
        processes.append(runner)
        # Both delegations' held calls are drawn while they are still held: the events
        # came from the children's own logs, not from the lead's when they settled.
        _wait_for(lambda: len(_held(run_out)) == 2, "run to draw both held calls", runner)
        assert not gate.exists()
        assert len(log.read_text().split()) == 2
        [lead_id] = re.findall(r"workflow (deputy-run-\w+)", run_err.read_text())
        lead_log = asyncio.run(_lead_log(temporal_address, lead_id))
        assert not any(
            isinstance(e, ToolStart) and e.delegation_id for e in map(decode_event, lead_log)
        )
        # First Ctrl-C: the run is sent `interrupt`; second: run stops following.
        runner.send_signal(signal.SIGINT)
        _wait_for(lambda: asyncio.run(_signalled(temporal_address, lead_id)), "the interrupt")
        runner.send_signal(signal.SIGINT)
        assert runner.wait(timeout=DEADLINE_SECONDS) == 130
        assert f"deputy-runtime attach --temporal {temporal_address} {lead_id}" in (
            run_err.read_text()
        )
        with open(attach_out, "wb") as out, open(attach_err, "wb") as err:
            attacher = subprocess.Popen(
                [sys.executable, "-m", "deputy_runtime", "attach", "--json",
                 "--temporal", temporal_address, lead_id],
                cwd=tmp_path, env=env, stdout=out, stderr=err,
            )  # fmt: skip
        processes.append(attacher)
        # attach draws the whole run so far, the held calls included, before they end.
        _wait_for(lambda: len(_held(attach_out)) == 2, "attach to draw both held calls", attacher)
        gate.touch()
        assert attacher.wait(timeout=DEADLINE_SECONDS) == 130, attach_err.read_text()
        lead_log = asyncio.run(_lead_log(temporal_address, lead_id))  # the worker answers
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
            p.wait()
    followed = _events(attach_out)
    last = followed[-1]
    assert isinstance(last, StopEvent)
    assert (last.delegation_id, last.stop_reason) == (None, "interrupted")
    # Every event of the run exactly once.
    assert Counter(attach_out.read_text().split("\n")[:-1]) == Counter(lead_log)


def test_attach_to_an_unknown_workflow_fails(temporal_address: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "deputy_runtime", "attach", "--temporal", temporal_address,
         "no-such-run"],
        env=_env(), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert "cannot reach workflow no-such-run" in done.stderr
