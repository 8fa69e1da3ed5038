"""Several OS processes (not tasks) against one redis-server: exclusivity and the budget.

Half the worker processes run on asyncio and half on trio, so both backends share a key.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

from deputy_runtime.redis import RedisBudget

pytestmark = pytest.mark.slow

WORKER = Path(__file__).with_name("worker.py")
PROCESSES = 4
BACKENDS = ("asyncio", "trio")


def start_worker(backend: str, mode: str, args: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), backend, mode, json.dumps(args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen[str]) -> dict[str, Any]:
    # The timeout only guards against a hang; a loaded machine may need a while.
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err
    return dict(json.loads(out.strip().splitlines()[-1]))


def test_four_processes_of_fifty_holders_never_overlap(
    redis_url: str, namespace: str, tmp_path: Path
) -> None:
    log = tmp_path / "holders.log"
    log.touch()
    args = {
        "url": redis_url,
        "namespace": namespace,
        "key": "one-exclusive-key",
        "holders": 50,
        "ttl": 30.0,
        "file": str(log),
    }
    workers = [start_worker(BACKENDS[i % 2], "lease", args) for i in range(PROCESSES)]
    results = [finish(w) for w in workers]
    assert sum(r["grants"] for r in results) == PROCESSES * 50

    lines = log.read_text().splitlines()
    assert len(lines) == 2 * PROCESSES * 50
    previous_token = -1
    holders = set()
    # Every start is followed directly by the end of the same holder and token: nobody
    # else wrote in between, so no two holders overlapped.
    for start, end in zip(lines[0::2], lines[1::2], strict=True):
        kind, token, holder = start.split()
        assert kind == "start", start
        assert end == f"end {token} {holder}", (start, end)
        assert int(token) > previous_token, "fencing tokens must strictly increase"
        previous_token = int(token)
        holders.add(holder)
    assert len(holders) == PROCESSES * 50


def test_four_processes_of_a_hundred_reservations_share_150_requests(
    redis_url: str, namespace: str
) -> None:
    name = f"budget-{uuid.uuid4().hex[:8]}"
    args = {
        "url": redis_url,
        "namespace": namespace,
        "name": name,
        "limit": 150,
        "holders": 100,
    }
    workers = [start_worker(BACKENDS[i % 2], "budget", args) for i in range(PROCESSES)]
    results = [finish(w) for w in workers]
    assert sum(r["granted"] for r in results) == 150

    async def read_state() -> Any:
        async with RedisBudget(redis_url, name, {"requests": 150}, namespace=namespace) as b:
            return await b.state()

    state = anyio.run(read_state)
    assert state.used.requests == 150
    assert state.reserved.requests == 0
    assert state.remaining.requests == 0
    assert state.holders == 0


@pytest.fixture
def kill_on_exit() -> Any:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate()
