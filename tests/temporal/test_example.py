"""``examples/temporal_fanout.py`` runs as a user would run it: a lead process on either
host backend, which spawns a ``deputy-runtime worker`` process, runs the lead on it and
stops it. Its result matches the in-process run of the same lead, the histories show
that the worker process (not the lead's) ran every workflow task and activity, and no
process is left behind."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from deputy_runtime import LeadAgent, UsageLimits, agent_definitions, chat, tools_file

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = REPO_ROOT / "examples" / "temporal_fanout.py"
#: The whole example on a loaded machine: server start, worker start, the run.
EXAMPLE_SECONDS = 300.0

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # subprocesses


async def _in_process() -> tuple[dict[str, int], str]:
    """Per-agent requests and the lead's summary line of the same lead, in-process."""
    registry = {t.name: t for t in tools_file(REPO_ROOT)}
    definitions = agent_definitions(
        REPO_ROOT / "examples" / "agents", tools=registry, markdown=True
    )
    lead = LeadAgent(
        chat("test"),
        definitions,
        tools=[registry[n] for n in ("read_file", "list_files", "grep_files")],
        usage_limits=UsageLimits(max_requests=25),
        working_dir=REPO_ROOT,
    )
    result = await lead.run("Review the examples directory and summarise what each agent does")
    usage = result.usage
    line = f"lead: {result.stop_reason}, {usage.requests} requests, {usage.tool_calls} calls"
    return {r.agent_name: r.usage.requests for r in lead.list_subagents()}, line


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of the group exists (exiting, owned elsewhere)
        return True
    return True


def _run_example(logs: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], bool]:
    """Run the example in a process group of its own; return its outcome and whether any
    process of the group (the worker, the dev server) was still alive once it exited.
    Whatever is left, or everything on a timeout, is killed before returning.

    Its output goes to files in ``logs``, not pipes: a process it left running would hold
    a pipe open, and the test would wait for that instead of seeing the example exit."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    command = [sys.executable, str(EXAMPLE), *args]
    out_path, err_path = logs / "stdout.txt", logs / "stderr.txt"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        process = subprocess.Popen(
            command, cwd=REPO_ROOT, env=env, stdout=out, stderr=err, start_new_session=True
        )
    try:
        process.wait(timeout=EXAMPLE_SECONDS)
        left_behind = _group_alive(process.pid)
    finally:
        if _group_alive(process.pid):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    stdout = out_path.read_text(encoding="utf-8", errors="replace")
    stderr = err_path.read_text(encoding="utf-8", errors="replace")
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr), left_behind


def _field(stdout: str, pattern: str) -> str:
    found = re.search(pattern, stdout, re.M)
    assert found is not None, f"{pattern!r} not in the output:\n{stdout}"
    return found.group(1)


async def _identities(client: Client, workflow_id: str) -> tuple[set[str], int]:
    """Identities of the workers that started workflow tasks and activities of the lead
    and of every child it started, and how many children there were."""
    identities: set[str] = set()
    pending, children = [workflow_id], 0
    while pending:
        handle = client.get_workflow_handle(pending.pop())
        async for event in handle.fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
                identities.add(event.workflow_task_started_event_attributes.identity)
            elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                identities.add(event.activity_task_started_event_attributes.identity)
            elif event.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED:
                started = event.child_workflow_execution_started_event_attributes
                pending.append(started.workflow_execution.workflow_id)
                children += 1
    return identities, children


async def _check_result(stdout: str, backend: str) -> None:
    assert stdout.startswith(f"[{backend}]\n")
    rows = re.findall(r"^  (\S+)\s+(\S+)\s+(\S+)\s+requests (\d+)/(\d+)$", stdout, re.M)
    names = sorted(p.stem for p in (REPO_ROOT / "examples" / "agents").iterdir())
    assert sorted(r[0] for r in rows) == names
    assert {(r[1], r[2]) for r in rows} == {("completed", "complete")}
    assert all(int(used) <= int(granted) for *_, used, granted in rows)
    per_agent, lead_line = await _in_process()
    assert {r[0]: int(r[3]) for r in rows} == per_agent
    assert stdout.rstrip().splitlines()[-1] == lead_line


@pytest.mark.parametrize("host", ["asyncio", "trio"])
async def test_lead_and_worker_run_in_two_processes(
    temporal_address: str, host: str, tmp_path: Path
) -> None:
    done, left_behind = await anyio.to_thread.run_sync(
        _run_example, tmp_path, host, "--temporal", temporal_address
    )
    assert done.returncode == 0, done.stderr
    assert not left_behind, "the worker process outlived the example"
    await _check_result(done.stdout, host)
    lead_pid = int(_field(done.stdout, r"^lead process: pid (\d+)$"))
    worker_pid = int(_field(done.stdout, r"^worker process: pid (\d+),"))
    assert lead_pid != worker_pid
    workflow_id = _field(done.stdout, r"^workflow: (\S+)$")
    client = await Client.connect(temporal_address)
    identities, children = await _identities(client, workflow_id)
    assert children == len(list((REPO_ROOT / "examples" / "agents").iterdir()))
    # Temporal names a worker "<pid>@<host>": only the spawned worker process did work.
    assert identities
    assert {i.split("@", 1)[0] for i in identities} == {str(worker_pid)}


async def test_one_command_starts_and_stops_its_own_server_and_worker(
    temporal_address: str,  # only so the test is skipped where no dev server can start
    tmp_path: Path,
) -> None:
    done, left_behind = await anyio.to_thread.run_sync(_run_example, tmp_path, "trio")
    assert done.returncode == 0, done.stderr
    assert not left_behind, "the worker or the dev server outlived the example"
    await _check_result(done.stdout, "trio")
    host, port = _field(done.stdout, r"^server: (\S+)$").rsplit(":", 1)
    with pytest.raises(OSError), socket.create_connection((host, int(port)), timeout=5):
        pass  # the server is gone


def test_no_worker_needs_the_server_and_the_task_queue() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--no-worker"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert "--no-worker needs --temporal and --task-queue" in done.stderr
