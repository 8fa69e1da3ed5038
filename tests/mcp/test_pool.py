"""The pool: shared sessions started once on first use, owned sessions per holder,
released from any task, all closed when the pool closes."""

from __future__ import annotations

import json

import anyio
import pytest

from deputy_runtime.errors import McpError, McpStartError
from deputy_runtime.mcp import (
    McpEvent,
    McpServerPool,
    McpServerStarted,
    McpServerStopped,
    McpSession,
    McpStderrLine,
    SessionState,
)
from tests.mcp._mcp_helpers import assert_reaped, of_type, stdio_server

pytestmark = pytest.mark.anyio


def whoami(session: McpSession) -> dict[str, object]:
    return {"pid": session.pid, "token": "t"}


async def test_shared_starts_once_for_concurrent_first_users_and_closes_with_the_pool() -> None:
    events: list[McpEvent] = []
    server = stdio_server("tiny", args=("t",), events=events)
    got: list[McpSession] = []
    async with McpServerPool() as pool:

        async def user() -> None:
            session = await pool.shared(server)
            got.append(session)
            assert json.loads(await session.call("whoami", {})) == whoami(session)

        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(user)
        assert len({id(s) for s in got}) == 1
        assert len(of_type(events, McpServerStarted)) == 1
        assert await pool.shared(server) is got[0]
    assert got[0].state is SessionState.CLOSED
    assert_reaped(got[0].pid)
    assert len(of_type(events, McpServerStopped)) == 1


async def test_a_failed_shared_session_is_replaced_on_next_use() -> None:
    server = stdio_server("tiny", args=("t",))
    async with McpServerPool() as pool:
        first = await pool.shared(server)
        with pytest.raises(McpError):
            await first.call("crash", {})
        assert first.state is SessionState.FAILED
        second = await pool.shared(server)
        assert second is not first
        assert second.state is SessionState.READY
        assert_reaped(first.pid)
    assert_reaped(second.pid)


async def test_owned_sessions_are_per_holder_and_released_from_another_task() -> None:
    server = stdio_server("tiny", args=("t",))
    async with McpServerPool() as pool:
        a = await pool.owned(server)
        b = await pool.owned(server)
        assert a.pid != b.pid
        assert set(pool.sessions()) == {a, b}

        async def settle(session: McpSession) -> None:
            await pool.release(session)

        async with anyio.create_task_group() as tg:
            tg.start_soon(settle, a)
        assert a.state is SessionState.CLOSED
        assert_reaped(a.pid)
        assert pool.sessions() == (b,)
    assert_reaped(b.pid)


async def test_owned_start_failure_is_raised_and_nothing_is_left() -> None:
    server = stdio_server("faulty", env={"FAULT": "exit"})
    async with McpServerPool() as pool:
        with pytest.raises(McpStartError):
            await pool.owned(server)
        assert pool.sessions() == ()
    with pytest.raises(McpError, match="not open"):
        await pool.owned(server)


async def test_a_session_starts_only_once() -> None:
    session = stdio_server("tiny", args=("t",)).session()
    async with session:
        pass
    with pytest.raises(McpError, match="already started"):
        async with session:
            pass


async def test_stdout_lines_that_are_not_json_rpc_go_with_stderr() -> None:
    events: list[McpEvent] = []
    server = stdio_server("tiny", args=("t",), env={"NOISY": "1"}, events=events)
    async with server.session() as session:
        assert json.loads(await session.call("whoami", {})) == whoami(session)
        assert session.stderr_lines == ("[stdout, not JSON-RPC] tiny server says hello on stdout",)
    assert [e.line for e in of_type(events, McpStderrLine)] == list(session.stderr_lines)


async def test_describe_is_plain_data_for_logs() -> None:
    session = stdio_server("tiny", name="tiny", args=("t",), env={"KEY": "v"}).session()
    async with session:
        live = session.describe()
        assert json.loads(json.dumps(live)) == live
        assert live["name"] == "tiny"
        assert live["state"] == "ready"
        assert live["pid"] == session.pid
        assert live["env"] == ["KEY"]
        assert live["tools"] == ["mcp__tiny__crash", "mcp__tiny__whoami"]
    assert session.describe()["state"] == "closed"
