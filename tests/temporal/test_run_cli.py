"""``deputy-runtime run --temporal``: a durable run started from the command line and
followed to the end, served by a ``deputy-runtime worker`` process, with the same
delegations and usage as the in-process ``run`` of the same task."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from temporalio.client import Client

from deputy_runtime import decode_event
from deputy_runtime.runtime import DelegationEnd, DelegationStart, Event, StopEvent
from deputy_runtime.temporal import data_converter
from tests.temporal.helpers import was_signalled

REPO_ROOT = Path(__file__).resolve().parents[2]
AGENTS = REPO_ROOT / "examples" / "agents"
TASK = "Review the examples directory"

pytestmark = pytest.mark.slow  # subprocesses


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("OPENAI_BASE_URL", None)
    env["PYTHONPATH"] = str(REPO_ROOT)
    return env


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deputy_runtime", *args],
        cwd=REPO_ROOT, env=_env(), capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


@pytest.fixture
def worker_queue(temporal_address: str, tmp_path: Path) -> Iterator[str]:
    """A ``deputy-runtime worker`` process serving a fresh task queue."""
    queue = f"deputy-cli-{uuid.uuid4().hex}"
    log = open(tmp_path / "worker.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [sys.executable, "-m", "deputy_runtime", "worker", "--temporal", temporal_address,
         "--agents", str(AGENTS), "--task-queue", queue],
        cwd=REPO_ROOT, env=_env(), stdout=log, stderr=log,
    )  # fmt: skip
    log.close()
    try:
        yield queue
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_run_on_temporal_matches_the_in_process_run(
    temporal_address: str, worker_queue: str
) -> None:
    common = ("run", "--agents", str(AGENTS), "--json", TASK)
    expected = _cli(*common)
    assert expected.returncode == 0, expected.stderr
    done = _cli(*common[:-1], "--temporal", temporal_address, "--task-queue", worker_queue, TASK)
    assert done.returncode == 0, done.stderr
    assert "Temporal: " in done.stderr
    events = [decode_event(line) for line in done.stdout.splitlines()]
    in_process = [decode_event(line) for line in expected.stdout.splitlines()]

    def ends(stream: Sequence[Event]) -> list[tuple[str | None, str, str, int]]:
        return sorted(
            (e.agent_name, e.status, e.stop_reason, e.usage.requests)
            for e in stream
            if isinstance(e, DelegationEnd)
        )

    assert ends(events) == ends(in_process)
    assert len(ends(events)) == len(list(AGENTS.iterdir()))
    last, expected_last = events[-1], in_process[-1]
    assert isinstance(last, StopEvent)
    assert isinstance(expected_last, StopEvent)
    assert (last.delegation_id, last.stop_reason) == (None, "complete")
    assert last.usage == expected_last.usage


def test_run_on_temporal_prints_the_summary(temporal_address: str, worker_queue: str) -> None:
    done = _cli("run", "--agents", str(AGENTS), "--temporal", temporal_address,
                "--task-queue", worker_queue, TASK)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "lead + subagents" in done.stdout
    assert "\nAnswer:\n" in done.stdout
    assert done.stdout.count(" completed ") >= len(list(AGENTS.iterdir()))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--test-fanout", "2"), "--test-fanout and --temporal do not combine"),
        (("--mcp-config", "servers.json"), "--mcp-config and --temporal do not combine"),
        (("--mcp-mode", "git=owned"), "give it to deputy-runtime worker"),
        (("--shared-budget", "team"), "--shared-budget and --temporal do not combine"),
        (("--plugin", "no_such_plugin.py"), "--plugin 'no_such_plugin.py': no such file"),
        (("--backend", "trio"), "asyncio-only"),
        (("--agents", "no-such-dir"), "'no-such-dir' does not exist"),
        (("--model", "nosuch/x"), "--model 'nosuch/x': no provider named 'nosuch'"),
    ],
)
def test_run_on_temporal_refuses_bad_options(extra: tuple[str, ...], message: str) -> None:
    done = _cli("run", "--temporal", "127.0.0.1:1", "--agents", str(AGENTS), *extra, TASK)
    assert done.returncode == 2
    assert message in done.stderr
    assert done.stdout == ""  # nothing announced before the mistake


@pytest.mark.parametrize("durable", [False, True], ids=["in-process", "temporal"])
def test_every_delegation_stopped_is_exit_4_on_both_engines(
    temporal_address: str, worker_queue: str, tmp_path: Path, durable: bool
) -> None:
    # One request is too few for the summarizer (it reads, then answers): every
    # delegation stops at request_limit, and the lead's answer rests on none of them.
    agents = tmp_path / "agents"
    agents.mkdir()
    summarizer = (AGENTS / "summarizer.yaml").read_text(encoding="utf-8")
    assert "max_requests: 3" in summarizer
    (agents / "summarizer.yaml").write_text(
        summarizer.replace("max_requests: 3", "max_requests: 1")
    )
    backend = ("--temporal", temporal_address, "--task-queue", worker_queue) if durable else ()
    done = _cli("run", "--agents", str(agents), *backend, "Summarise")
    assert done.returncode == 4, (done.stdout, done.stderr)
    assert "every delegation failed or stopped; none completed" in done.stderr
    assert "summarizer stopped (request_limit) without an answer" in done.stdout


def test_run_on_temporal_refuses_a_policy_that_cannot_travel(tmp_path: Path) -> None:
    # An owned-resource factory lives in this process; the workers could never call it.
    plugin = tmp_path / "policy_plugin.py"
    plugin.write_text(
        "from deputy_runtime import DelegationPolicy, DelegationResources\n"
        "delegation_policy = DelegationPolicy(\n"
        "    resource_mode='owned', resources=lambda *a: DelegationResources()\n"
        ")\n"
    )
    done = _cli("run", "--temporal", "127.0.0.1:1", "--agents", str(AGENTS),
                "--plugin", str(plugin), TASK)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "OwnedResources" in done.stderr or "owned" in done.stderr
    assert done.stdout == ""


async def _wait_children_signalled(address: str, lead_id: str, count: int) -> None:
    client = await Client.connect(address, data_converter=data_converter)
    handle = client.get_workflow_handle(lead_id)
    deadline = time.monotonic() + 180
    while True:
        events = [decode_event(e) for e in await handle.query("events", 0)]
        ids = [f"{lead_id}/{e.delegation_id}" for e in events if isinstance(e, DelegationStart)]
        if len(ids) == count and all([await was_signalled(client, i) for i in ids]):
            return
        assert time.monotonic() < deadline, "the interrupt never reached the children"
        await asyncio.sleep(0.1)  # poll interval of the history check


def test_ctrl_c_interrupts_the_durable_run(temporal_address: str, tmp_path: Path) -> None:
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
    worker_log = open(tmp_path / "worker.log", "wb")  # noqa: SIM115 - closed below
    worker = subprocess.Popen(
        [sys.executable, "-m", "deputy_runtime", "worker", "--temporal", temporal_address,
         "--agents", str(agents), "--task-queue", queue, "--plugin", crash_plugin.__file__],
        cwd=tmp_path, env=env, stdout=worker_log, stderr=worker_log,
    )  # fmt: skip
    worker_log.close()
    notes = tmp_path / "run.stderr"
    with open(notes, "wb") as err:
        runner = subprocess.Popen(
            [sys.executable, "-m", "deputy_runtime", "run", "--agents", str(agents), "--json",
             "--temporal", temporal_address, "--task-queue", queue, "--plugin",
             crash_plugin.__file__, "Hold on"],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=err,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while len(log.read_text().split()) < 2:  # both children are inside `hold`
            assert runner.poll() is None, notes.read_text()
            assert time.monotonic() < deadline, "the children never reached their tool call"
            time.sleep(0.1)  # poll interval of the log check
        [lead_id] = re.findall(r"workflow (deputy-run-\w+)", notes.read_text())
        runner.send_signal(signal.SIGINT)
        # Open the gate only once the interrupt has reached both children.
        asyncio.run(_wait_children_signalled(temporal_address, lead_id, 2))
        gate.touch()
        stdout, _ = runner.communicate(timeout=180)
        stderr = notes.read_text()
    finally:
        for p in (runner, worker):
            if p.poll() is None:
                p.kill()
            p.wait()
    assert runner.returncode == 130, stderr
    events = [decode_event(line) for line in stdout.splitlines()]
    ends = sorted(
        (e.agent_name, e.status, e.stop_reason) for e in events if isinstance(e, DelegationEnd)
    )
    assert ends == [("one", "stopped", "interrupted"), ("two", "stopped", "interrupted")]
    last = events[-1]
    assert isinstance(last, StopEvent)
    assert (last.delegation_id, last.stop_reason) == (None, "interrupted")
