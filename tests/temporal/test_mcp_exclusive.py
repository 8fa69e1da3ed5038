"""Exclusive MCP servers on workers: the delegations using one take the lease
``mcp:<server>`` in the workers' lease backend (a real redis-server through
``RedisLeases``), so they use the server one at a time, on a real dev server."""

from __future__ import annotations

import itertools
import json
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from temporalio.client import Client

pytest.importorskip("coredis", reason="the redis extra is not installed")

from deputy_runtime import AgentDefinition, UsageLimits, tool
from deputy_runtime.mcp import McpResource, McpServer, McpStdio
from deputy_runtime.redis import RedisLeases
from deputy_runtime.temporal import (
    DeputyActivities,
    current_delegation,
    deputy_worker,
    lead_input,
    start_lead,
)
from tests.mcp._mcp_helpers import SERVERS
from tests.redis.redis_support import RedisServer
from tests.temporal.helpers import assert_replays, run_workflow_ids

pytestmark = pytest.mark.anyio

#: How long the guarded tool keeps the server busy, so unguarded delegations would overlap.
WORK_SECONDS = 0.3


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


async def test_delegations_use_an_exclusive_server_one_at_a_time(
    client: Client, task_queue: str, redis_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "work.log"

    @tool
    async def busy() -> str:
        """Work with the server for a while."""
        context = current_delegation()
        assert context is not None
        start = time.time()
        await anyio.sleep(WORK_SECONDS)
        with log.open("a") as f:
            f.write(json.dumps([context.delegation_id, context.lease_token, start, time.time()]))
            f.write("\n")
        return "done"

    definitions = [
        AgentDefinition(
            n, f"Uses the server ({n}).", "You work.", tools=(busy,),
            mcp_tools=("mcp__tiny__whoami",), max_requests=2,
        )
        for n in ("alpha", "beta", "gamma")
    ]  # fmt: skip
    config = McpStdio(command=sys.executable, args=(str(SERVERS / "tiny.py"), "tok"))
    request = lead_input(
        "Use the server", definitions, model="test", usage_limits=UsageLimits(max_requests=20)
    )
    async with RedisLeases(redis_url, namespace=f"t-{uuid.uuid4().hex[:8]}") as leases:
        tiny = McpResource(McpServer("tiny", config), mode="exclusive", wait=True, backend=leases)
        activities = DeputyActivities(
            [busy], working_dir=tmp_path, mcp=[tiny], lease_backend=leases
        )
        async with activities, deputy_worker(client, activities, task_queue=task_queue):
            handle = await start_lead(
                client, request, workflow_id=f"lead-{uuid.uuid4().hex}", task_queue=task_queue
            )
            out = await handle.result()
            assert await assert_replays(client, run_workflow_ids(handle.id, out)) == 4
    assert {(r.status, r.cleanup_error) for r in out.subagents} == {("completed", None)}
    for result in out.subagent_results:
        assert result is not None
        values = [getattr(c, "value", None) for t in result.turns for c in t.contents]
        assert any(isinstance(v, str) and '"token": "tok"' in v for v in values)
    entries = sorted(
        (json.loads(line) for line in log.read_text().splitlines()), key=lambda e: e[2]
    )
    assert len(entries) == 3
    # Each delegation held a grant of mcp:tiny, later grants for later holders, and their
    # work never overlapped.
    for earlier, later in itertools.pairwise(entries):
        assert earlier[1] is not None
        assert earlier[1] < later[1]
        assert earlier[3] <= later[2], (earlier, later)
