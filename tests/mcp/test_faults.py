"""Servers that fail: at start, mid-call, by hanging, by oversized messages, by ignoring
SIGTERM; and callers that cancel. Every case ends in a typed error and a reaped process."""

from __future__ import annotations

import anyio
import pytest

from deputy_runtime.errors import (
    McpCallTimeoutError,
    McpServerGoneError,
    McpStartError,
    McpToolError,
)
from deputy_runtime.mcp import (
    McpEvent,
    McpLimits,
    McpServer,
    McpServerStopped,
    McpStdio,
    McpStopKind,
    SessionState,
)
from tests.mcp._mcp_helpers import assert_reaped, of_type, stdio_server

pytestmark = pytest.mark.anyio

QUICK_CLOSE = McpLimits(close_grace=0.5, terminate_grace=0.5, call_timeout=60)


def stopped(events: list[McpEvent]) -> McpServerStopped:
    (event,) = of_type(events, McpServerStopped)
    return event  # type: ignore[no-any-return]


async def test_a_command_that_does_not_exist_is_a_start_error() -> None:
    events: list[McpEvent] = []
    server = McpServer("ghost", McpStdio(command="/nonexistent/mcp-server"), on_event=events.append)
    with pytest.raises(McpStartError, match=r"'ghost': cannot start '/nonexistent/mcp-server'"):
        async with server.session():
            pass
    assert stopped(events).kind is McpStopKind.FAILED


async def test_a_missing_working_directory_is_named() -> None:
    server = McpServer("lost", McpStdio(command="srv", cwd="/nonexistent/dir"))
    with pytest.raises(McpStartError, match=r"cwd '/nonexistent/dir' is not an existing"):
        async with server.session():
            pass


async def test_a_server_that_exits_before_the_handshake() -> None:
    events: list[McpEvent] = []
    server = stdio_server("faulty", env={"FAULT": "exit"}, events=events)
    session = server.session()
    with pytest.raises(McpStartError) as info:
        async with session:
            pass
    assert "closed its output" in str(info.value)
    assert "exiting before the handshake" in info.value.stderr
    assert "exiting before the handshake" in str(info.value)
    event = stopped(events)
    assert (event.kind, event.exit_code) == (McpStopKind.FAILED, 7)
    assert_reaped(session.pid)


async def test_a_server_that_never_answers_misses_the_start_timeout() -> None:
    limits = McpLimits(start_timeout=3, close_grace=0.2, terminate_grace=0.5)
    server = stdio_server("faulty", env={"FAULT": "hang"}, limits=limits)
    session = server.session()
    with pytest.raises(McpStartError, match=r"start_timeout \(3s\)"):
        async with session:
            pass
    assert session.state is SessionState.FAILED
    assert_reaped(session.pid)


async def test_a_crash_mid_call_is_a_tool_error_and_the_process_is_reaped() -> None:
    events: list[McpEvent] = []
    server = stdio_server("faulty", events=events)
    async with server.session() as session:
        with pytest.raises(McpServerGoneError) as info:
            await session.call("crash", {"code": 3})
        assert "'faulty' is gone" in str(info.value)
        assert session.state is SessionState.FAILED
        # Later calls fail at once with the same kind of error.
        with pytest.raises(McpServerGoneError):
            await session.call("ok", {})
        pid = session.pid
    assert_reaped(pid)
    event = stopped(events)
    assert (event.kind, event.exit_code) == (McpStopKind.FAILED, 3)
    assert "crashing with 3" in session.stderr_lines


async def test_an_error_result_is_a_tool_error_and_the_session_stays_usable() -> None:
    async with stdio_server("faulty").session() as session:
        with pytest.raises(McpToolError, match="Error executing tool fail"):
            await session.call("fail", {"message": "boom"})
        with pytest.raises(McpToolError, match="Unknown tool: missing"):
            await session.call("missing", {})
        assert await session.call("ok", {}) == {"result": "ok"}


async def test_a_hung_call_times_out_and_close_escalates_to_sigterm() -> None:
    events: list[McpEvent] = []
    limits = McpLimits(call_timeout=1.0, close_grace=0.5, terminate_grace=5)
    async with stdio_server("faulty", limits=limits, events=events).session() as session:
        with pytest.raises(McpCallTimeoutError, match=r"call_timeout \(1.0s\)"):
            await session.call("hang", {})
        pid = session.pid
    assert_reaped(pid)
    # The hung server cannot notice its input closing; SIGTERM ends it.
    event = stopped(events)
    assert (event.kind, event.exit_code) == (McpStopKind.TERMINATED, -15)


async def test_a_server_ignoring_sigterm_is_killed() -> None:
    events: list[McpEvent] = []
    server = stdio_server("faulty", env={"FAULT": "stubborn"}, limits=QUICK_CLOSE, events=events)
    async with server.session() as session:
        assert await session.call("ok", {}) == {"result": "ok"}
        pid = session.pid
    assert_reaped(pid)
    event = stopped(events)
    assert (event.kind, event.exit_code) == (McpStopKind.KILLED, -9)


async def test_an_oversized_message_ends_the_session() -> None:
    limits = McpLimits(max_message_bytes=64 * 1024, close_grace=0.5, terminate_grace=0.5)
    async with stdio_server("faulty", limits=limits).session() as session:
        assert await session.call("big", {"size": 1000}) == {"result": "x" * 1000}
        with pytest.raises(McpServerGoneError, match=r"larger than max_message_bytes \(65536"):
            await session.call("big", {"size": 200_000})
        assert session.state is SessionState.FAILED
        pid = session.pid
    assert_reaped(pid)


async def test_cancelling_a_call_or_a_start_still_reaps_the_server() -> None:
    # Cancelled mid-call: the caller's scope ends while the server hangs in a tool.
    session = stdio_server("faulty", limits=QUICK_CLOSE).session()
    with anyio.move_on_after(60) as outer:
        async with session:
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(session.call, "hang", {})
                    await anyio.sleep(0.2)
                    scope.cancel()
    assert not outer.cancelled_caught
    assert_reaped(session.pid)

    # Cancelled while starting: the whole `async with` is cancelled before the handshake.
    starting = stdio_server("faulty", env={"FAULT": "hang"}, limits=QUICK_CLOSE).session()
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:

            async def enter() -> None:
                async with starting:
                    pass

            tg.start_soon(enter)
            with anyio.fail_after(60):
                while starting.pid is None:
                    await anyio.sleep(0.01)
            scope.cancel()
    assert scope.cancelled_caught
    assert starting.state is SessionState.FAILED
    assert_reaped(starting.pid)
