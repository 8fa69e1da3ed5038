"""``deputy-runtime worker --plugin``: a plugin's ``hooks`` and ``can_use_tool`` run on the
worker process, which reports how many hooks it registered, and a plugin whose ``hooks``
is not a registry, or whose ``can_use_tool`` is not callable, is refused."""

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
from temporalio.client import Client

from deputy_runtime import UsageLimits, agent_definitions, tools_file
from deputy_runtime.temporal import lead_input, start_lead

REPO_ROOT = Path(__file__).resolve().parents[2]
WAIT_SECONDS = 180.0

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

AGENT_YAML = """\
version: 1
name: explorer
description: Lists files.
prompt: You explore.
tools: [list_files, read_file]
max_requests: 3
"""

PLUGIN = """\
from pathlib import Path

from deputy_runtime import HookDecision, Hooks, PermissionAllow

hooks = Hooks()
LOG = Path(__file__).with_name("seen.log")


def can_use_tool(name, arguments, context):
    with Path(__file__).with_name("asked.log").open("a") as f:
        f.write(f"{name} {context.agent_name}\\n")
    return PermissionAllow()


@hooks.on("PreToolUse", matcher="list_files")
def no_listing(h):
    return HookDecision.deny("listing is off")


@hooks.on("PostToolUse")
@hooks.on("PostToolUseFailure")
def seen(h):
    with LOG.open("a") as f:
        f.write(f"{h.event} {h.tool_name} {h.delegation_id is not None}\\n")
"""


@pytest.fixture
def worker_process() -> Iterator[list[subprocess.Popen[str]]]:
    """The worker a test starts; stopped (SIGTERM, then kill) afterwards."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _command(address: str, agents: Path, plugin: Path, task_queue: str) -> list[str]:
    return [
        sys.executable, "-m", "deputy_runtime", "worker", "--temporal", address,
        "--agents", str(agents), "--task-queue", task_queue, "--plugin", str(plugin),
    ]  # fmt: skip


async def test_a_plugins_hooks_run_on_the_worker(
    temporal_address: str,
    client: Client,
    tmp_path: Path,
    worker_process: list[subprocess.Popen[str]],
) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "explorer.yaml").write_text(AGENT_YAML)
    plugin = tmp_path / "hooks_plugin.py"
    plugin.write_text(PLUGIN)
    (tmp_path / "notes.md").write_text("notes\n")
    log = tmp_path / "worker.log"
    task_queue = f"deputy-hooks-{uuid.uuid4().hex}"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with log.open("w") as log_file:
        worker = subprocess.Popen(
            _command(temporal_address, agents, plugin, task_queue),
            cwd=tmp_path, env=env, stdout=log_file, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
    worker_process.append(worker)
    deadline = time.monotonic() + WAIT_SECONDS
    while "ready" not in log.read_text():
        assert worker.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        await anyio.sleep(0.1)  # poll interval of the log check
    assert "hooks: 3" in log.read_text()

    registry = {t.name: t for t in tools_file(tmp_path)}
    definitions = agent_definitions(agents, tools=registry)
    request = lead_input(
        "Look around",
        definitions,
        model="test",
        usage_limits=UsageLimits(10),
        worker_can_use_tool=True,
    )
    handle = await start_lead(
        client, request, workflow_id=f"hooks-{uuid.uuid4().hex}", task_queue=task_queue
    )
    with anyio.fail_after(WAIT_SECONDS):
        out = await handle.result()
    [child] = out.subagent_results
    assert child is not None
    errors = [getattr(c, "error", None) for t in child.turns for c in t.contents]
    assert "Denied by hook: listing is off" in errors
    # The post hooks ran in the worker's process for the child's call that ran (the test
    # model reads a file called "test", which does not exist).
    lines = (tmp_path / "seen.log").read_text().splitlines()
    assert lines == ["PostToolUseFailure read_file True"]
    # The plugin's callback was asked about every call, the lead's delegation included,
    # before the hooks (list_files was then refused by its PreToolUse hook).
    asked = sorted((tmp_path / "asked.log").read_text().splitlines())
    assert asked == ["delegate_to_agent lead", "list_files explorer", "read_file explorer"]


@pytest.mark.parametrize(
    ("source", "messages"),
    [
        ("hooks = {'PreToolUse': print}\n", ("hooks must be a Hooks registry", "got dict")),
        ("can_use_tool = 'deny'\n", ("can_use_tool must be a function", "got str")),
    ],
)
def test_a_plugin_whose_hooks_is_not_a_registry_is_refused(
    temporal_address: str, tmp_path: Path, source: str, messages: tuple[str, str]
) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "explorer.yaml").write_text(AGENT_YAML)
    plugin = tmp_path / "bad_hooks.py"
    plugin.write_text(source)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        _command(temporal_address, agents, plugin, "deputy"),
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert messages[0] in done.stderr
    assert messages[1] in done.stderr
