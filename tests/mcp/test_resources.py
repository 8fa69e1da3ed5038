"""MCP servers attached to a lead (McpResource): real servers, real delegations.

Shared: one server for every delegation, stopped when the lead closes. Exclusive: one
server, never used by two delegations at once. Owned: a server per delegation, stopped at
settlement. Names resolve against the attached servers; the ceiling and hooks apply.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deputy_runtime import Hooks, LeadAgent, PermissionMode, Permissions, agent_definition, chat
from deputy_runtime.chat import ContentToolResult, ModelRequest, reply, tool_call, tool_calls
from deputy_runtime.errors import DelegationBindingError
from deputy_runtime.mcp import (
    McpEvent,
    McpResource,
    McpServerStarted,
    McpServerStopped,
)
from deputy_runtime.runtime import (
    IN_PROCESS_LEASES,
    DelegationPolicy,
    DelegationStatus,
    Event,
    HookDecision,
    HookEvent,
    McpServerEvent,
    decode_event,
    encode_event,
)
from tests.mcp._mcp_helpers import assert_reaped, of_type, process_left, stdio_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def results(request: ModelRequest) -> list[ContentToolResult]:
    return [c for c in request.turns[-1].contents if isinstance(c, ContentToolResult)]


def delegating(n: int, agent: str = "worker") -> Any:
    """A lead script: ``n`` parallel delegations to ``agent``, then a reply."""

    def lead(request: ModelRequest) -> Any:
        if not results(request):
            calls = [
                ("delegate_to_agent", {"agent_name": agent, "task": f"t{i}"}) for i in range(n)
            ]
            return tool_calls(*calls)
        return reply("delegated")

    return lead


def calling(
    tool: str, seen: list[ContentToolResult], arguments: dict[str, Any] | None = None
) -> Any:
    """A subagent script: one call of ``tool``, then a reply; results go to ``seen``."""

    def worker(request: ModelRequest) -> Any:
        got = results(request)
        if not got:
            return tool_call(tool, arguments or {})
        seen.extend(got)
        return reply("done")

    return worker


def payload(result: ContentToolResult) -> dict[str, Any]:
    """A tool result's structured value (a dict, or JSON text)."""
    assert result.error is None, result.error
    value = result.value
    return value if isinstance(value, dict) else dict(json.loads(str(value)))


def pid_of(result: ContentToolResult) -> int:
    return int(payload(result)["pid"])


def worker_definition(*mcp_tools: str) -> Any:
    return agent_definition("worker", "Works.", "Work.", mcp_tools=mcp_tools, max_requests=3)


async def test_shared_one_server_for_all_delegations_until_the_lead_closes() -> None:
    mcp_events: list[McpEvent] = []
    run_events: list[Event] = []
    seen: list[ContentToolResult] = []
    server = stdio_server("tiny", events=mcp_events)
    lead = LeadAgent(
        chat(
            "scripted", script={"lead": delegating(3), "worker": calling("mcp__tiny__whoami", seen)}
        ),
        [worker_definition("mcp__tiny__whoami")],
        delegation_policy=DelegationPolicy(resource_modes=(McpResource(server),)),
    )
    async with lead:
        result = await lead.run("go", on_event=run_events.append)
        assert result.response == "delegated"
        assert len({pid_of(r) for r in seen}) == 1
        started = of_type(mcp_events, McpServerStarted)
        assert len(started) == 1
        assert not of_type(mcp_events, McpServerStopped)
        assert process_left(started[0].pid)
    stopped = of_type(mcp_events, McpServerStopped)
    assert [s.pid for s in stopped] == [started[0].pid]
    assert_reaped(started[0].pid)
    starts = [e for e in run_events if isinstance(e, McpServerEvent)]
    assert [(e.action, e.server, e.pid) for e in starts] == [("start", "tiny", started[0].pid)]
    assert starts[0].delegation_id is not None
    assert decode_event(encode_event(starts[0])) == starts[0]


async def test_owned_a_server_per_delegation_stopped_at_settlement() -> None:
    mcp_events: list[McpEvent] = []
    run_events: list[Event] = []
    seen: list[ContentToolResult] = []
    server = stdio_server("tiny", events=mcp_events)
    lead = LeadAgent(
        chat(
            "scripted", script={"lead": delegating(3), "worker": calling("mcp__tiny__whoami", seen)}
        ),
        [worker_definition("mcp__tiny")],
        delegation_policy=DelegationPolicy(resource_modes=(McpResource(server, mode="owned"),)),
    )
    async with lead:
        # The whole-server name grants every tool of the server.
        result = await lead.run("go", on_event=run_events.append)
        assert result.response == "delegated"
        assert len(seen) == 3
        # Every delegation had its own server, and every server is gone already.
        started = of_type(mcp_events, McpServerStarted)
        stopped = of_type(mcp_events, McpServerStopped)
        assert len(started) == len(stopped) == 3
        assert len({s.pid for s in started}) == 3
        for s in started:
            assert_reaped(s.pid)
    by_delegation: dict[str | None, set[str]] = {}
    for e in run_events:
        if isinstance(e, McpServerEvent):
            by_delegation.setdefault(e.delegation_id, set()).add(e.action)
    assert len(by_delegation) == 3
    assert all(actions == {"start", "stop"} for actions in by_delegation.values())


async def test_owned_tools_talk_only_to_their_own_server() -> None:
    mcp_events: list[McpEvent] = []
    seen: list[ContentToolResult] = []
    server = stdio_server("tiny", events=mcp_events)
    lead = LeadAgent(
        chat(
            "scripted", script={"lead": delegating(4), "worker": calling("mcp__tiny__whoami", seen)}
        ),
        [worker_definition("mcp__tiny__whoami")],
        delegation_policy=DelegationPolicy(resource_modes=(McpResource(server, mode="owned"),)),
    )
    async with lead:
        await lead.run("go")
    started = {s.pid for s in of_type(mcp_events, McpServerStarted)}
    assert {pid_of(r) for r in seen} == started
    assert len(started) == 4


async def test_exclusive_never_two_delegations_on_the_server_at_once(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    seen: list[ContentToolResult] = []
    server = stdio_server("writer", env={"NOTES_FILE": str(notes)})
    lead = LeadAgent(
        chat(
            "scripted",
            script={
                "lead": delegating(3),
                "worker": calling("mcp__writer__tracked_write", seen, {"pause": 0.02}),
            },
        ),
        [worker_definition("mcp__writer__tracked_write")],
        delegation_policy=DelegationPolicy(
            resource_modes=(McpResource(server, mode="exclusive", wait=True),)
        ),
        permissions=Permissions(mode=PermissionMode.STANDARD),
        working_dir=tmp_path,
    )
    async with lead:
        await lead.run("go")
    assert len(seen) == 3
    outcomes = [payload(r) for r in seen]
    assert all(o["max_active"] == 1 for o in outcomes)
    assert len({o["pid"] for o in outcomes}) == 1
    assert sorted(o["calls"] for o in outcomes) == [1, 2, 3]


async def test_exclusive_busy_fails_the_delegation_at_once(tmp_path: Path) -> None:
    seen: list[ContentToolResult] = []
    server = stdio_server("writer", env={"NOTES_FILE": str(tmp_path / "n.txt")})
    lead = LeadAgent(
        chat(
            "scripted",
            script={
                "lead": delegating(1),
                "worker": calling("mcp__writer__tracked_write", seen, {"pause": 0}),
            },
        ),
        [worker_definition("mcp__writer__tracked_write")],
        delegation_policy=DelegationPolicy(resource_modes=(McpResource(server, mode="exclusive"),)),
        permissions=Permissions(mode=PermissionMode.STANDARD),
        working_dir=tmp_path,
    )
    # Another holder of the same key (a lead sharing the lease backend) has the server.
    other = await IN_PROCESS_LEASES.acquire("mcp:writer", "someone-else", wait=False)
    async with lead:
        await lead.run("go")
        (record,) = lead.list_subagents()
        assert record.status == DelegationStatus.FAILED
        assert "busy" in (record.error or "").lower()
        assert not seen
        await IN_PROCESS_LEASES.release(other)
        await lead.run("again")
    assert lead.list_subagents()[-1].status == DelegationStatus.COMPLETED
    assert len(seen) == 1


async def test_a_readonly_lead_refuses_a_write_tool_and_a_hook_denial_reaches_the_model(
    tmp_path: Path,
) -> None:
    seen: list[ContentToolResult] = []

    def worker(request: ModelRequest) -> Any:
        got = results(request)
        if not got:
            return tool_calls(
                ("mcp__writer__append", {"text": "x"}),
                ("mcp__reader__whoami", {}),
                ("mcp__reader__lookup", {"title": "Dune"}),
            )
        seen.extend(got)
        return reply("done")

    hooks = Hooks()
    hooks.add(
        HookEvent.PreToolUse,
        lambda i: (
            HookDecision.deny("no lookups today") if i.tool_name == "mcp__reader__lookup" else None
        ),
    )
    writer = stdio_server("writer", env={"NOTES_FILE": str(tmp_path / "n.txt")})
    reader = stdio_server("reader")
    lead = LeadAgent(
        chat("scripted", script={"lead": delegating(1), "worker": worker}),
        [worker_definition("mcp__writer__append", "mcp__reader__whoami", "mcp__reader__lookup")],
        delegation_policy=DelegationPolicy(
            resource_modes=(McpResource(writer), McpResource(reader, mode="owned"))
        ),
        permissions=Permissions(mode=PermissionMode.READONLY),
        hooks=hooks,
        working_dir=tmp_path,
    )
    async with lead:
        await lead.run("go")
    append, whoami, lookup = seen
    assert append.error is not None
    assert "readonly" in append.error
    assert whoami.error is None
    assert lookup.error is not None
    assert "no lookups today" in lookup.error
    assert not (tmp_path / "n.txt").exists()


async def test_names_resolve_against_attached_servers_only() -> None:
    server = stdio_server("tiny")

    def make(*names: str) -> LeadAgent:
        return LeadAgent(
            chat("scripted", script={"lead": delegating(1), "worker": [reply("never")]}),
            [worker_definition(*names)],
            delegation_policy=DelegationPolicy(resource_modes=(McpResource(server),)),
        )

    missing = make("mcp__nowhere__x")
    async with missing:
        await missing.run("go")
    (record,) = missing.list_subagents()
    assert record.status == DelegationStatus.FAILED
    assert "nowhere" in (record.error or "")

    unknown = make("mcp__tiny__nosuch")
    async with unknown:
        await unknown.run("go")
    (record,) = unknown.list_subagents()
    assert record.status == DelegationStatus.FAILED
    assert "mcp__tiny__nosuch" in (record.error or "")
    assert "mcp__tiny__whoami" in (record.error or "")

    closed = make("mcp__tiny__whoami")
    await closed.run("go")
    (record,) = closed.list_subagents()
    assert record.status == DelegationStatus.FAILED
    assert "async with lead" in (record.error or "")


def test_bad_arguments_are_named() -> None:
    server = stdio_server("tiny")
    with pytest.raises(DelegationBindingError, match="mode"):
        McpResource(server, mode="borrowed")
    with pytest.raises(DelegationBindingError, match="McpServer"):
        McpResource("tiny")  # type: ignore[arg-type]
    with pytest.raises(DelegationBindingError, match="exclusive"):
        McpResource(server, mode="owned", wait=True)


async def test_an_owned_server_that_does_not_start_fails_only_its_delegation() -> None:
    run_events: list[Event] = []
    broken = stdio_server("tiny", args=("x",), env={"PID_DIR": "/nonexistent/dir"})
    lead = LeadAgent(
        chat("scripted", script={"lead": delegating(1), "worker": [reply("never")]}),
        [worker_definition("mcp__tiny__whoami")],
        delegation_policy=DelegationPolicy(resource_modes=(McpResource(broken, mode="owned"),)),
    )
    async with lead:
        result = await lead.run("go", on_event=run_events.append)
    assert result.response == "delegated"
    (record,) = lead.list_subagents()
    assert record.status == DelegationStatus.FAILED
    assert "tiny" in (record.error or "")
    stops = [e for e in run_events if isinstance(e, McpServerEvent) and e.action == "stop"]
    assert len(stops) == 1
    assert stops[0].kind == "failed"
    assert stops[0].delegation_id == record.delegation_id
    if stops[0].pid is not None:
        assert not process_left(stops[0].pid)


async def test_the_cli_views_show_server_start_and_stop_but_never_stderr(tmp_path: Path) -> None:
    import io

    from deputy_runtime._cli.view import LiveView, PlainView, RunState

    run_events: list[Event] = []
    seen: list[ContentToolResult] = []
    # NOISY makes the server write a stray line; it must stay in the ring buffer.
    server = stdio_server("tiny", env={"NOISY": "1"})
    lead = LeadAgent(
        chat(
            "scripted", script={"lead": delegating(1), "worker": calling("mcp__tiny__whoami", seen)}
        ),
        [worker_definition("mcp__tiny__whoami")],
        delegation_policy=DelegationPolicy(resource_modes=(McpResource(server, mode="owned"),)),
    )
    async with lead:
        await lead.run("go", on_event=run_events.append)
    plain, live = io.StringIO(), io.StringIO()
    plain_view, live_view = PlainView(plain, RunState()), LiveView(live, RunState(), colour=False)
    for event in run_events:
        plain_view.handle(event)
        live_view.handle(event)
    live_view.close()
    pid = pid_of(seen[0])
    assert f"worker: mcp server tiny started (pid {pid}, " in plain.getvalue()
    assert f"worker: mcp server tiny stopped (pid {pid}, closed after " in plain.getvalue()
    for text in (plain.getvalue(), live.getvalue()):
        assert "says hello" not in text


async def test_lead_lifecycle_open_once_close_idempotent() -> None:
    mcp_events: list[McpEvent] = []
    resource = McpResource(stdio_server("tiny", events=mcp_events))
    policy = DelegationPolicy(resource_modes=(resource,))
    lead = LeadAgent(chat("scripted", script=[reply("x")]), delegation_policy=policy)
    await lead.aclose()  # not open: nothing to do
    async with lead:
        with pytest.raises(RuntimeError, match="already open"):
            await lead.__aenter__()
        other = LeadAgent(chat("scripted", script=[reply("x")]), delegation_policy=policy)
        with pytest.raises(DelegationBindingError, match="one lead at a time"):
            await other.__aenter__()
        await lead.aclose()
        await lead.aclose()
    # Closed, the resource can be attached again; nothing was started.
    async with LeadAgent(chat("scripted", script=[reply("x")]), delegation_policy=policy):
        pass
    assert mcp_events == []
