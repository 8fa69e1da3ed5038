"""Real SDK servers over stdio: tools, results, annotations, tool-list changes, locking."""

from __future__ import annotations

from pathlib import Path

import anyio
import msgspec
import pytest

from deputy_runtime import PermissionMode
from deputy_runtime.errors import McpToolError, ToolArgumentError
from deputy_runtime.mcp import (
    McpEvent,
    McpServerStarted,
    McpServerStopped,
    McpStderrLine,
    McpStopKind,
    McpToolCall,
    McpToolsChanged,
    SessionState,
)
from deputy_runtime.runtime._permissions import Permissions
from deputy_runtime.tools import Tool, invoke_tool
from tests.mcp._mcp_helpers import of_type, process_left, stdio_server

pytestmark = pytest.mark.anyio


def by_name(tools: tuple[Tool, ...]) -> dict[str, Tool]:
    return {t.name: t for t in tools}


async def test_read_only_server_structured_results_errors_and_events(
    capfd: pytest.CaptureFixture[str],
) -> None:
    events: list[McpEvent] = []
    server = stdio_server("reader", env={"SERVER_TOKEN": "tok-1"}, events=events)
    async with server.session() as session:
        assert session.state is SessionState.READY
        tools = by_name(session.tools())
        assert sorted(tools) == [
            "mcp__reader__lookup",
            "mcp__reader__shout_loud",
            "mcp__reader__whoami",
        ]
        lookup = tools["mcp__reader__lookup"]
        assert lookup.parameters["properties"]["title"]["type"] == "string"
        assert lookup.parameters["required"] == ["title"]
        assert lookup.description == "The year a book was first published."
        assert await invoke_tool(lookup, {"title": "dune"}) == {"title": "dune", "year": 1965}
        who = await invoke_tool(tools["mcp__reader__whoami"], {})
        assert who == {"pid": session.pid, "token": "tok-1"}
        # The runtime's own validation runs first: a bad argument never reaches the server.
        with pytest.raises(ToolArgumentError):
            await invoke_tool(lookup, {"title": 3})
        # An isError result is a tool error carrying the server's text.
        with pytest.raises(McpToolError) as info:
            await invoke_tool(lookup, {"title": "nope"})
        assert info.value.server == "reader"
        assert info.value.tool == "lookup"
        assert "Error executing tool lookup" in str(info.value)
        # The server's stderr is kept, line by line.
        with anyio.fail_after(30):
            while not any("unknown book" in line for line in session.stderr_lines):
                await anyio.sleep(0.01)
        pid = session.pid
    assert pid is not None
    closed: SessionState = session.state  # re-read: leaving the block changed it
    assert closed is SessionState.CLOSED
    assert not process_left(pid)
    started = of_type(events, McpServerStarted)
    stopped = of_type(events, McpServerStopped)
    assert [(e.pid, e.tools, e.transport) for e in started] == [(pid, 3, "stdio")]
    assert [(e.pid, e.kind, e.exit_code) for e in stopped] == [(pid, McpStopKind.CLOSED, 0)]
    calls = of_type(events, McpToolCall)
    assert [(c.mcp_tool, c.error is None) for c in calls] == [
        ("lookup", True),
        ("whoami", True),
        ("lookup", False),
    ]
    assert any(e.line == "reader server starting" for e in of_type(events, McpStderrLine))
    # Events are JSON values, decoded back into the same union.
    assert msgspec.json.decode(msgspec.json.encode(events), type=list[McpEvent]) == events
    # Nothing the server wrote reached this process's terminal.
    out, err = capfd.readouterr()
    assert "unknown book" not in err + out
    assert "reader server starting" not in err + out


async def test_annotations_map_onto_permission_flags(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    server = stdio_server("writer", env={"NOTES_FILE": str(notes)})
    async with server.session() as session:
        tools = by_name(session.tools())
        append = tools["mcp__writer__append"]
        unannotated = tools["mcp__writer__unannotated"]
        wipe = tools["mcp__writer__wipe"]
        assert (append.read_only, append.destructive) == (False, False)
        assert (unannotated.read_only, unannotated.destructive) == (False, False)
        assert (wipe.read_only, wipe.destructive) == (False, True)
        readonly = Permissions(mode=PermissionMode.READONLY)
        standard = Permissions(mode=PermissionMode.STANDARD)
        # A tool without annotations is treated as writing: refused in readonly mode.
        assert readonly.check_static(unannotated, {"text": "x"}) is not None
        assert readonly.check_static(append, {"text": "x"}) is not None
        assert standard.check_static(unannotated, {"text": "x"}) is None
        assert standard.check_static(wipe, {}) is not None
        assert (
            Permissions(mode=PermissionMode.STANDARD, allow=frozenset({wipe.name})).check_static(
                wipe, {}
            )
            is None
        )
        assert (
            Permissions(mode=PermissionMode.FULL, deny=frozenset({append.name})).check_static(
                append, {}
            )
            is not None
        )
        assert await invoke_tool(append, {"text": "hello"}) == {"result": "appended 5 characters"}
    assert notes.read_text() == "hello\n"


async def test_tool_list_is_refreshed_when_the_server_announces_a_change(
    tmp_path: Path,
) -> None:
    events: list[McpEvent] = []
    server = stdio_server("writer", env={"NOTES_FILE": str(tmp_path / "n")}, events=events)
    async with server.session() as session:
        before = session.tools_version
        assert "mcp__writer__late" not in by_name(session.tools())
        await invoke_tool(by_name(session.tools())["mcp__writer__grow"], {"name": "late"})
        with anyio.fail_after(30):
            await session.wait_tools_changed(before)
        late = by_name(session.tools())["mcp__writer__late"]
        assert await invoke_tool(late, {}) == {"result": "late is here"}
    assert [e.tools for e in of_type(events, McpToolsChanged)] == [len(session.tools())]


async def test_a_locked_session_serialises_its_users(tmp_path: Path) -> None:
    server = stdio_server("writer", env={"NOTES_FILE": str(tmp_path / "n")})
    async with server.session() as session:
        tracked = by_name(session.tools())["mcp__writer__tracked_write"]
        results: list[dict[str, int]] = []

        async def user() -> None:
            for _ in range(5):
                async with session.lock:
                    results.append(await invoke_tool(tracked, {"pause": 0.02}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(user)
            tg.start_soon(user)
        assert len(results) == 10
        assert max(r["max_active"] for r in results) == 1
        # Control: without the lock the server does see the two callers overlap, so the
        # check above measures the lock, not a server that cannot run calls at once.
        async with anyio.create_task_group() as tg:
            for _ in range(2):
                tg.start_soon(invoke_tool, tracked, {"pause": 0.02, "wait_for": 2})
        last = await invoke_tool(tracked, {"pause": 0.0})
        assert last["max_active"] == 2
