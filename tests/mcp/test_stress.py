"""Owned-style lifecycle under stress: many sessions, random cancellations and crashes.

Uses the standard-library test server (``servers/tiny.py``): the SDK's import alone costs
over a second of CPU per process, too much for two hundred servers on a small machine.
Each server records its pid in a directory when it starts, so "started" is counted by
the servers themselves, not by the code under test. All 200 sessions run as concurrent
tasks; at most 25 servers are alive at once, which keeps the test within a small
machine's memory and CPU.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import anyio
import pytest

from deputy_runtime.errors import McpServerGoneError
from deputy_runtime.mcp import (
    McpEvent,
    McpLimits,
    McpServerPool,
    McpServerStopped,
    McpSession,
)
from tests.mcp._mcp_helpers import of_type, process_left, stdio_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SESSIONS = 200
LIVE_AT_ONCE = 25
PLANS = ("call", "call", "crash", "cancel", "cancel")


async def test_owned_sessions_under_random_cancellation_and_crashes(tmp_path: Path) -> None:
    rng = random.Random(20261203)
    events: list[McpEvent] = []
    limits = McpLimits(start_timeout=60, close_grace=1, terminate_grace=1)
    limiter = anyio.CapacityLimiter(LIVE_AT_ONCE)
    outcomes: Counter[str] = Counter()
    wrong_server: list[str] = []

    async def cancel_later(scope: anyio.CancelScope, delay: float) -> None:
        await anyio.sleep(delay)
        scope.cancel()

    async def use(session: McpSession, token: str, plan: str) -> None:
        answer = json.loads(await session.call("whoami", {}))
        if answer != {"pid": session.pid, "token": token}:
            wrong_server.append(f"{token}: {answer} (session pid {session.pid})")
        outcomes["answered"] += 1
        if plan == "crash":
            try:
                await session.call("crash", {})
            except McpServerGoneError:
                outcomes["crashed"] += 1
        if plan == "cancel":
            await anyio.sleep_forever()

    async def one(pool: McpServerPool, i: int, plan: str, delay: float) -> None:
        token = f"session-{i}"
        server = stdio_server(
            "tiny",
            name=f"tiny{i}",
            args=(token,),
            env={"PID_DIR": str(tmp_path)},
            limits=limits,
            events=events,
        )
        async with limiter:
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as tg:
                    if plan == "cancel":
                        tg.start_soon(cancel_later, scope, delay)
                    if i % 2:  # half in the caller's task, half hosted by the pool
                        async with server.session() as session:
                            await use(session, token, plan)
                    else:
                        session = await pool.owned(server)
                        try:
                            await use(session, token, plan)
                        finally:
                            await pool.release(session)
                    tg.cancel_scope.cancel()
            if scope.cancelled_caught:
                outcomes["cancelled"] += 1

    with anyio.fail_after(300):
        async with McpServerPool() as pool, anyio.create_task_group() as tg:
            for i in range(SESSIONS):
                tg.start_soon(one, pool, i, rng.choice(PLANS), rng.uniform(0, 0.3))

    stops = of_type(events, McpServerStopped)
    assert len(stops) == SESSIONS  # every session reports its end, started or not
    spawned = {e.pid for e in stops if e.pid is not None}
    # A session cancelled before its spawn has no process; every other one had its own.
    assert all(e.error == "cancelled while starting" for e in stops if e.pid is None)
    assert len(spawned) == sum(1 for e in stops if e.pid is not None)
    # Every server that ran far enough to record itself is one the sessions spawned (so
    # none was spawned untracked), and every spawned process is gone and reaped.
    recorded = {int(p.name) for p in tmp_path.iterdir()}
    assert recorded <= spawned
    assert [pid for pid in spawned if process_left(pid)] == []
    assert wrong_server == []
    # The run exercised every path.
    assert outcomes["answered"] > SESSIONS // 3
    assert outcomes["crashed"] > 0
    assert outcomes["cancelled"] > 0
