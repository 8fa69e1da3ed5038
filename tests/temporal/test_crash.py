"""SIGKILL of the only worker in the middle of a 20-way fan-out whose delegations hold
owned resources, on a loopback OpenAI-compatible server (a real socket on 127.0.0.1).

The server answers the lead with twenty ``delegate_to_agent`` calls; each child makes
its workspace (an owned resource), calls its ``note`` tool, and sends its second model
request, which the server holds. Once all twenty are held, the worker is killed and a
fresh one started: the held requests are retried (same ``Idempotency-Key``) and answered
with a second ``note`` call, which finds the dead worker's queue unpolled, so each
delegation reclaims its dead workspace, makes a fresh one on the new worker and goes on.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest
from temporalio.client import Client

from deputy_runtime import UsageLimits, agent_definitions
from deputy_runtime.temporal import OwnedResourceSpec, lead_input, start_lead
from tests.temporal.helpers import assert_replays, run_workflow_ids

REPO_ROOT = Path(__file__).resolve().parents[2]
# Loaded by the worker processes only: importing it here would register its provider
# in the test process for the rest of the session.
PLUGIN = Path(__file__).with_name("resource_plugin.py")
FANOUT = 20
WAIT_SECONDS = 240.0

SCRIBE_YAML = """\
version: 1
name: scribe
description: Takes notes in its own workspace.
prompt: You take notes.
max_requests: 3
"""

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


class Loopback:
    """The scripted model server. It records every request's idempotency key and whether
    its response was written, and holds each child's first second-request until the
    test abandons it (the worker that sent it is dead by then)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.keys: list[str] = []
        self.completed: Counter[str] = Counter()
        self.held: set[str] = set()
        self.abandon = threading.Event()

    def reply(self, key: str, body: dict[str, Any]) -> dict[str, Any] | None:
        tools = [t["function"]["name"] for t in body.get("tools", [])]
        results = sum(1 for m in body["messages"] if m["role"] == "tool")
        with self.lock:
            seen = self.keys.count(key)
            self.keys.append(key)
        if "delegate_to_agent" in tools:
            if results == 0:
                return _calls(
                    "delegate_to_agent",
                    [{"agent_name": "scribe", "task": f"note {i}"} for i in range(FANOUT)],
                )
            return _text("all twenty noted")
        if results == 0:
            return _calls("note", [{"text": "first"}])
        if results == 1 and seen == 0:
            with self.lock:
                self.held.add(key)
            self.abandon.wait()
            return None  # its worker is dead: no answer
        if results == 1:
            return _calls("note", [{"text": "again"}])
        return _text("done")


def _calls(name: str, arguments: list[dict[str, Any]]) -> dict[str, Any]:
    calls = [
        {
            "id": f"call_{uuid.uuid4().hex[:12]}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(a)},
        }
        for a in arguments
    ]
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    return _completion(message, "tool_calls")


def _text(text: str) -> dict[str, Any]:
    return _completion({"role": "assistant", "content": text}, "stop")


def _completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-loopback",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


@pytest.fixture
def loopback() -> Iterator[tuple[str, Loopback]]:
    state = Loopback()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            key = self.headers.get("idempotency-key", "")
            answer = state.reply(key, body)
            if answer is None:
                self.close_connection = True
                return
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
            with state.lock:
                state.completed[key] += 1

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", state
    finally:
        state.abandon.set()
        server.shutdown()
        server.server_close()


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Worker processes started by a test; any still running are killed afterwards."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait()


def _records(root: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(root.glob("*.json"))]


async def test_sigkill_mid_fanout_with_owned_resources_and_idempotent_requests(
    temporal_address: str,
    client: Client,
    tmp_path: Path,
    loopback: tuple[str, Loopback],
    processes: list[subprocess.Popen[bytes]],
) -> None:
    url, server = loopback
    resources = tmp_path / "resources"
    resources.mkdir()
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "scribe.yaml").write_text(SCRIBE_YAML)
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "DEPUTY_TEST_LLM": url,
        "DEPUTY_TEST_RESOURCES": str(resources),
    }
    task_queue = f"deputy-crash-{uuid.uuid4().hex}"
    command = [
        sys.executable, "-m", "deputy_runtime", "worker", "--temporal", temporal_address,
        "--agents", str(agents), "--task-queue", task_queue, "--plugin", str(PLUGIN),
    ]  # fmt: skip

    def spawn(tag: str) -> subprocess.Popen[bytes]:
        out = open(tmp_path / f"worker-{tag}.log", "wb")  # noqa: SIM115 - closed below
        p = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=out, stderr=out)
        out.close()
        processes.append(p)
        return p

    first = spawn("first")
    scribe = agent_definitions(agents)["scribe"]
    limits = UsageLimits(max_requests=FANOUT * 3 + 2)
    request = lead_input(
        "Take twenty notes",
        [scribe],
        model="loopback/m",
        usage_limits=limits,
        resources=(OwnedResourceSpec(name="workspace"),),
    )
    handle = await start_lead(
        client, request, workflow_id=f"crash-{uuid.uuid4().hex}", task_queue=task_queue
    )
    deadline = time.monotonic() + WAIT_SECONDS
    # Every child made its workspace on the first worker and sent its second request.
    while len(server.held) < FANOUT:
        assert first.poll() is None, (tmp_path / "worker-first.log").read_text()
        assert time.monotonic() < deadline, f"only {len(server.held)} requests held"
        await anyio.sleep(0.1)  # poll interval of the held-request check
    created_before = _records(resources)
    first.send_signal(signal.SIGKILL)
    first.wait()
    server.abandon.set()
    spawn("second")
    with anyio.fail_after(WAIT_SECONDS):
        out = await handle.result()

    assert out.result.stop_reason == "complete", out.result.error
    assert len(out.subagents) == FANOUT
    assert len({r.delegation_id for r in out.subagents}) == FANOUT
    assert {(r.status, r.stop_reason, r.cleanup_error) for r in out.subagents} == {
        ("completed", "complete", None)
    }
    # Budget: nothing over the lead's limit, and the grants fit in it together.
    assert limits.max_requests is not None
    assert out.result.usage.requests <= limits.max_requests
    grants = [r.limits.max_requests for r in out.subagents if r.limits is not None]
    assert len(grants) == FANOUT
    assert sum(g or 0 for g in grants) <= limits.max_requests
    for record in out.subagents:
        assert record.limits is not None
        assert record.usage.requests <= (record.limits.max_requests or 0)
    # Idempotency: a key was sent twice only for the held requests, which never got an
    # answer; every answered request was answered once; every request carried a key.
    sent = Counter(server.keys)
    assert "" not in sent
    assert {k for k, n in sent.items() if n > 1} == server.held
    assert all(n == 1 for n in server.completed.values())
    assert set(server.completed) == set(sent)
    # Resources: the first worker made one per delegation; each was reclaimed from the
    # second worker, which made a fresh one and cleaned it up itself.
    pid_first = str(first.pid)
    assert len(created_before) == FANOUT
    assert {str(r["pid"]) for r in created_before} == {pid_first}
    after = {r["resource"]: r for r in _records(resources)}
    for made in created_before:
        assert after[made["resource"]]["state"] == "reclaimed"
    fresh = [r for r in after.values() if r["resource"].endswith("/2")]
    assert sorted(r["delegation"] for r in fresh) == sorted(r.delegation_id for r in out.subagents)
    assert {r["state"] for r in fresh} == {"cleaned"}
    assert len(after) == 2 * FANOUT
    # The histories written across the crash replay without nondeterminism.
    assert await assert_replays(client, run_workflow_ids(handle.id, out)) == FANOUT + 1
