"""``deputy-runtime worker`` with MCP servers: refusing definitions it cannot serve, and a
worker process running a shared stdio server for its lifetime (the server is a real
subprocess of the worker; it ends with the worker, also when the worker is SIGKILLed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from deputy_runtime import UsageLimits, agent_definitions
from deputy_runtime.temporal import lead_input, start_lead
from deputy_runtime.tools import tools_file
from tests.mcp._mcp_helpers import SERVERS
from tests.plugin_folder import write_plugin
from tests.temporal import crash_plugin
from tests.temporal.helpers import assert_replays, run_workflow_ids

REPO_ROOT = Path(__file__).resolve().parents[2]
WAIT_SECONDS = 120.0
PLUGIN = Path(crash_plugin.__file__)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

AGENT_MD = """\
---
name: asker
description: Asks the server who it is.
tools: mcp__tiny__whoami
---
You ask.
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT)}


def _worker(address: str, tmp_path: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "deputy_runtime", "worker", "--temporal", address,
        "--agents", str(tmp_path / "agents"), *extra,
    ]  # fmt: skip


def _setup(tmp_path: Path, pid_dir: Path | None = None) -> Path:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "asker.md").write_text(AGENT_MD)
    config = tmp_path / "servers.json"
    server: dict[str, object] = {
        "command": sys.executable,
        "args": [str(SERVERS / "tiny.py"), "tok"],
    }
    if pid_dir is not None:
        server["env"] = {"PID_DIR": str(pid_dir)}
    config.write_text(json.dumps({"mcpServers": {"tiny": server}}))
    return config


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Worker processes started by a test; any still running are killed afterwards."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait()


def test_worker_refuses_a_definition_naming_an_unconfigured_server(
    temporal_address: str, tmp_path: Path
) -> None:
    _setup(tmp_path)
    done = subprocess.run(
        _worker(temporal_address, tmp_path), cwd=tmp_path, env=_env(), capture_output=True,
        text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "asker.md" in done.stderr
    assert "MCP server 'tiny'" in done.stderr


def test_worker_refuses_an_exclusive_mcp_server_without_a_lease_backend(
    temporal_address: str, tmp_path: Path
) -> None:
    config = _setup(tmp_path)
    command = _worker(
        temporal_address, tmp_path, "--mcp-config", str(config), "--mcp-mode", "tiny=exclusive"
    )
    done = subprocess.run(
        command, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "--mcp-mode tiny=exclusive" in done.stderr
    assert "needs the workers' lease backend" in done.stderr


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


async def test_a_worker_process_serves_a_shared_server_for_its_lifetime(
    temporal_address: str, client: Client, tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    config = _setup(tmp_path, pid_dir)
    task_queue = f"deputy-test-{uuid.uuid4().hex}"
    log = tmp_path / "worker.log"
    command = _worker(
        temporal_address, tmp_path, "--mcp-config", str(config), "--task-queue", task_queue
    )
    with log.open("wb") as log_file:
        worker = subprocess.Popen(
            command, cwd=tmp_path, env=_env(), stdout=log_file, stderr=log_file
        )
    processes.append(worker)
    with anyio.fail_after(WAIT_SECONDS):
        while b"worker: ready" not in log.read_bytes():
            assert worker.poll() is None, log.read_text()
            await anyio.sleep(0.1)
    # The shared server started with the worker, before any delegation.
    (server_pid,) = (int(p.name) for p in pid_dir.iterdir())

    definitions = agent_definitions(tmp_path / "agents", markdown=True)
    limits = UsageLimits(max_requests=6)
    request = lead_input("Who are you?", definitions, model="test", usage_limits=limits)
    handle = await start_lead(
        client, request, workflow_id=f"lead-{uuid.uuid4().hex}", task_queue=task_queue
    )
    with anyio.fail_after(WAIT_SECONDS):
        out = await handle.result()
    (record,) = out.subagents
    assert record.status == "completed", record.error
    result = out.subagent_results[0]
    assert result is not None
    values = [getattr(c, "value", None) for t in result.turns for c in t.contents]
    answer = next(v for v in values if v is not None)
    assert json.loads(answer) == {"pid": server_pid, "token": "tok"}
    assert await assert_replays(client, run_workflow_ids(handle.id, out)) == 2

    # A SIGKILLed worker takes its server with it (the server reads EOF on its stdin).
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    with anyio.fail_after(WAIT_SECONDS):
        while _alive(server_pid):
            await anyio.sleep(0.1)


HOLDER_MD = """\
---
name: holder
description: Holds, and asks its own server who it is.
tools: hold, mcp__tiny__whoami
---
You wait.
"""


async def test_a_dead_workers_owned_server_dies_with_it_and_the_run_goes_on(
    temporal_address: str, client: Client, tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    config = _setup(tmp_path, pid_dir)
    (tmp_path / "agents" / "asker.md").unlink()
    (tmp_path / "agents" / "holder.md").write_text(HOLDER_MD)
    log, gate = tmp_path / "calls.log", tmp_path / "gate"
    log.touch()
    env = {**_env(), "DEPUTY_TEST_LOG": str(log), "DEPUTY_TEST_GATE": str(gate)}
    task_queue = f"deputy-test-{uuid.uuid4().hex}"
    command = _worker(
        temporal_address, tmp_path, "--mcp-config", str(config), "--mcp-mode", "tiny=owned",
        "--task-queue", task_queue, "--plugin", str(PLUGIN),
    )  # fmt: skip

    def spawn(tag: str) -> subprocess.Popen[bytes]:
        with (tmp_path / f"worker-{tag}.log").open("wb") as out:
            p = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=out, stderr=out)
        processes.append(p)
        return p

    first = spawn("first")
    definitions = agent_definitions(
        tmp_path / "agents", tools={"hold": crash_plugin.hold}, markdown=True
    )
    limits = UsageLimits(max_requests=10)
    request = lead_input("Hold on", definitions, model="test", usage_limits=limits)
    handle = await start_lead(
        client, request, workflow_id=f"lead-{uuid.uuid4().hex}", task_queue=task_queue
    )
    with anyio.fail_after(WAIT_SECONDS):
        while not log.read_text().split():  # the delegation is inside `hold`
            assert first.poll() is None, (tmp_path / "worker-first.log").read_text()
            await anyio.sleep(0.1)
    (owned_pid,) = (int(p.name) for p in pid_dir.iterdir())  # made for the delegation
    first.send_signal(signal.SIGKILL)
    first.wait()
    with anyio.fail_after(WAIT_SECONDS):
        while _alive(owned_pid):  # the server read end of file and exited
            await anyio.sleep(0.1)
    gate.touch()
    second = spawn("second")
    with anyio.fail_after(WAIT_SECONDS):
        out = await handle.result()

    (record,) = out.subagents
    assert (record.status, record.stop_reason) == ("completed", "complete")
    # The dead server's cleanup became a reclaim on the live worker, which had nothing
    # left to remove and said so without an error.
    assert record.cleanup_error is None
    child = client.get_workflow_handle(f"{handle.id}/{record.delegation_id}")
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        async for e in child.fetch_history_events()
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert "deputy_owned_reclaim" in scheduled
    with anyio.fail_after(WAIT_SECONDS):
        while [pid for pid in map(int, (p.name for p in pid_dir.iterdir())) if _alive(pid)]:
            await anyio.sleep(0.1)  # any server the second worker made is stopped too
    assert await assert_replays(client, run_workflow_ids(handle.id, out)) == 2
    second.send_signal(signal.SIGTERM)
    assert second.wait(timeout=WAIT_SECONDS) == 0


async def test_a_worker_serves_a_plugin_folder_its_agents_servers_and_hooks(
    temporal_address: str, client: Client, tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    plugin = write_plugin(tmp_path)
    task_queue = f"deputy-test-{uuid.uuid4().hex}"
    log = tmp_path / "worker.log"
    command = [
        sys.executable, "-m", "deputy_runtime", "worker", "--temporal", temporal_address,
        "--agents", str(plugin), "--task-queue", task_queue,
    ]  # fmt: skip
    with log.open("wb") as log_file:
        worker = subprocess.Popen(
            command, cwd=tmp_path, env=_env(), stdout=log_file, stderr=log_file
        )
    processes.append(worker)
    with anyio.fail_after(WAIT_SECONDS):
        while b"worker: ready" not in log.read_bytes():
            assert worker.poll() is None, log.read_text()
            await anyio.sleep(0.1)
    # The worker read the plugin's flat .mcp.json (no --mcp-config) and its hooks.json.
    assert "hooks.TeammateIdle: no such event here" in log.read_text()

    # The client names the tools the worker runs (its file tools, for the same directory).
    files = {t.name: t for t in tools_file(tmp_path)}
    definitions = agent_definitions(plugin, files, markdown=True, on_warning=lambda _: None)
    assert list(definitions) == ["kit:checker"]
    request = lead_input(
        "Check", definitions, model="test", usage_limits=UsageLimits(max_requests=6)
    )
    handle = await start_lead(
        client, request, workflow_id=f"lead-{uuid.uuid4().hex}", task_queue=task_queue
    )
    with anyio.fail_after(WAIT_SECONDS):
        out = await handle.result()
    (record,) = out.subagents
    assert (record.agent_name, record.status) == ("kit:checker", "completed"), record.error
    result = out.subagent_results[0]
    assert result is not None
    texts = [
        str(getattr(c, "value", None) or getattr(c, "error", None))
        for t in result.turns
        for c in t.contents
    ]
    # The owned server answered (its token is the plugin's), and the plugin's PreToolUse
    # command hook refused the write on the worker.
    assert any('"token": "kit"' in t for t in texts), texts
    assert any("writes are frozen by the kit plugin" in t for t in texts), result.turns


def test_a_definition_with_its_own_hooks_is_refused_durably() -> None:
    from deputy_runtime import AgentDefinition, DelegationBindingError

    hooks = {"PreToolUse": [{"hooks": [{"command": "true"}]}]}
    guarded = AgentDefinition("guarded", "d", "p", hooks=hooks)
    with pytest.raises(DelegationBindingError, match="hooks of its own, which durable runs"):
        lead_input("x", {"guarded": guarded}, model="test")
