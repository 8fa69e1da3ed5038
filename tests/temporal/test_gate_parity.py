"""The tool gate on both paths: the same events in the same order per agent, the same call
ids, and the workers' ``can_use_tool`` callback where the in-process one runs.

The model here (``gateseq``) calls the offered tools one per turn, in the order offered,
so each agent's events come in one order on both paths (the test model calls them all
in one turn, whose concurrent calls may log in any order). Its call ids name the tool's
place in the offer, so equal ids mean the model saw the same tools in the same order.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from deputy_runtime import (
    AgentDefinition,
    AgentResult,
    DelegationPolicy,
    HookDecision,
    HookEvent,
    HookInput,
    Hooks,
    LeadAgent,
    PermissionAllow,
    PermissionDeny,
    PermissionMode,
    Permissions,
    UsageLimits,
    chat,
    register_provider,
    tools_file,
)
from deputy_runtime.chat import (
    AssistantTurn,
    ContentText,
    ContentToolRequest,
    ContentToolResult,
    ModelRequest,
    Usage,
    example_arguments,
    unregister_provider,
)
from deputy_runtime.runtime import Event, PermissionEvent, TextDelta, WarningEvent, decode_event
from deputy_runtime.temporal import (
    DeputyActivities,
    LeadOutput,
    deputy_worker,
    lead_input,
    parallel_delegate,
    permission_spec,
    start_lead,
)
from tests.temporal.helpers import assert_replays, run_workflow_ids

pytestmark = pytest.mark.anyio

TASK = "Look around, one tool at a time."


class OneAtATime:
    """Calls each offered tool once, one per turn, in the order offered; then answers."""

    name = "gateseq"

    def __init__(self, model: str = "seq") -> None:
        self.model = model

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        done = sum(1 for t in request.turns if t.role == "assistant" and t.tool_requests)
        usage = Usage(requests=1, input_tokens=10, output_tokens=5)
        if done < len(request.tools):
            spec = request.tools[done]
            call = ContentToolRequest(
                f"seq_{done}_{spec.name}", spec.name, example_arguments(spec.parameters)
            )
            return AssistantTurn((call,), usage, finish_reason="tool_use")
        return AssistantTurn((ContentText("done"),), usage, finish_reason="stop")

    async def stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        yield await self.complete(request)

    def with_model(self, model: str) -> OneAtATime:
        return OneAtATime(model)


@pytest.fixture(autouse=True, scope="module")
def _gateseq_provider() -> Iterator[None]:
    """The ``gateseq`` provider for this module, removed afterwards so later tests see the
    registry as it was."""
    register_provider("gateseq", lambda model="seq", **kw: OneAtATime(model), replace=True)
    yield
    unregister_provider("gateseq")


def _setup(workdir: Path) -> tuple[list[AgentDefinition], list[str]]:
    files = {t.name: t for t in tools_file(workdir)}
    own = ["read_file", "write_file", "list_files"]
    writer = AgentDefinition(
        "writer",
        "Writes.",
        "You write.",
        tools=(files["read_file"], files["write_file"], files["list_files"]),
        max_requests=6,
    )
    return [writer], own


def _hooks() -> Hooks:
    """An allowed call with a failing PostToolUse hook (read_file), a permission denial
    with failing PermissionRequest and Notification hooks (write_file in readonly mode)
    and a hook denial (list_files)."""
    hooks = Hooks()

    def broken(h: HookInput) -> None:
        raise RuntimeError(f"{h.event.value} hook down")

    hooks.add(HookEvent.PostToolUse, broken, matcher="read_file")
    hooks.add(HookEvent.PermissionRequest, broken)
    hooks.add(HookEvent.Notification, broken)
    hooks.add(HookEvent.PreToolUse, lambda h: HookDecision.deny("no listing"), matcher="list_files")
    return hooks


async def _in_process(
    workdir: Path, hooks: Hooks | None, permissions: Permissions
) -> tuple[AgentResult, LeadAgent, list[Event]]:
    definitions, own = _setup(workdir)
    files = {t.name: t for t in tools_file(workdir)}
    events: list[Event] = []
    lead = LeadAgent(
        chat("gateseq/seq"),
        definitions,
        tools=[files[n] for n in own],
        usage_limits=UsageLimits(max_requests=20),
        working_dir=workdir,
        hooks=hooks,
        permissions=permissions,
    )
    result = await lead.run(TASK, on_event=events.append)
    return result, lead, events


@asynccontextmanager
async def _worker(
    client: Client, task_queue: str, workdir: Path, hooks: Hooks | None, can_use_tool: Any = None
) -> AsyncIterator[None]:
    activities = DeputyActivities(
        tools_file(workdir), working_dir=workdir, hooks=hooks, can_use_tool=can_use_tool
    )
    async with deputy_worker(client, activities, task_queue=task_queue):
        yield


async def _durable(
    client: Client, task_queue: str, workdir: Path, permissions: Permissions, **kw: Any
) -> tuple[LeadOutput, list[Event], str]:
    definitions, own = _setup(workdir)
    request = lead_input(
        TASK,
        definitions,
        model="gateseq/seq",
        tools=own,
        usage_limits=UsageLimits(max_requests=20),
        permissions=permissions,
        **kw,
    )
    workflow_id = f"gate-{uuid.uuid4().hex}"
    handle = await start_lead(client, request, workflow_id=workflow_id, task_queue=task_queue)
    out = await handle.result()
    events = [decode_event(e) for e in await handle.query("events", 0)]
    return out, events, workflow_id


def _per_agent(events: list[Event]) -> dict[str | None, list[tuple[Any, ...]]]:
    """Each agent's events in order: type, call id, tool, decision and warning text (ids
    of runs and agents differ between the paths; streamed text exists in-process only)."""
    out: dict[str | None, list[tuple[Any, ...]]] = {}
    for e in events:
        if isinstance(e, TextDelta):
            continue
        out.setdefault(e.agent_name, []).append(
            (
                e.__struct_config__.tag,
                getattr(e, "tool_call_id", None),
                getattr(e, "tool_name", None),
                getattr(e, "decision", None),
                getattr(e, "reason", None) if isinstance(e, PermissionEvent) else None,
                e.message if isinstance(e, WarningEvent) else None,
            )
        )
    return out


def _calls(result: AgentResult) -> list[tuple[Any, ...]]:
    """The model's calls and their results, ids included (no per-run ids in them)."""
    return [
        (c.id, c.name) if isinstance(c, ContentToolRequest) else (c.request_id, c.error)
        for t in result.turns
        for c in t.contents
        if isinstance(c, ContentToolRequest | ContentToolResult)
    ]


def _errors(result: AgentResult) -> dict[str, str | None]:
    """Each call's error (``None``: it succeeded), by call id."""
    return {
        c.request_id: c.error
        for t in result.turns
        for c in t.contents
        if isinstance(c, ContentToolResult)
    }


def _around(rows: list[tuple[Any, ...]], call_id: str) -> list[tuple[Any, Any]]:
    """Type and decision of the events from a call's first to its last, in order."""
    at = [i for i, r in enumerate(rows) if r[1] == call_id]
    return [(r[0], r[3]) for r in rows[at[0] : at[-1] + 1]] if at else []


async def test_the_event_order_and_call_ids_match_for_allowed_denied_and_refused_calls(
    client: Client, task_queue: str, workdir: Path
) -> None:
    permissions = Permissions(mode=PermissionMode.READONLY)
    expected, lead, in_process = await _in_process(workdir, _hooks(), permissions)
    async with _worker(client, task_queue, workdir, _hooks()):
        out, durable, workflow_id = await _durable(client, task_queue, workdir, permissions)
    want, got = _per_agent(in_process), _per_agent(durable)
    assert got == want
    # The same requests: delegate_to_agent first for the lead, as in-process, so the
    # model's call ids (its place in the offer) and the results are the same.
    assert _calls(out.result) == _calls(expected)
    [child] = [r for r in out.subagent_results if r is not None]
    [child_before] = [r for r in lead.get_subagent_results() if r is not None]
    assert _calls(child) == _calls(child_before)
    assert [c[0] for c in _calls(out.result)][::2] == [
        "seq_0_delegate_to_agent",
        "seq_1_read_file",
        "seq_2_write_file",
        "seq_3_list_files",
    ]
    # The scenario is the one meant, for the lead's own calls ...
    lead_rows = got["lead"]
    assert _around(lead_rows, "seq_1_read_file") == [
        ("tool_start", None),
        ("warning", None),  # PostToolUse
        ("tool_end", None),
    ]
    write = lead_rows.index(next(r for r in lead_rows if r[1] == "seq_2_write_file"))
    assert [(r[0], r[3]) for r in lead_rows[write - 1 : write + 2]] == [
        ("warning", None),  # PermissionRequest
        ("permission", "deny"),
        ("warning", None),  # Notification
    ]
    assert [r for r in lead_rows if r[1] == "seq_3_list_files"] == []  # refused by a hook
    warnings = [r[5] for r in lead_rows if r[0] == "warning"]
    assert warnings == [
        "hook failed: PostToolUse: PostToolUse hook down",
        "hook failed: PermissionRequest: PermissionRequest hook down",
        "hook failed: Notification: Notification hook down",
    ]
    # ... and the writer's (its tool hooks are the lead's forwarded ones: no
    # PermissionRequest or Notification for a subagent).
    writer = got["writer"]
    assert [(r[0], r[3]) for r in writer if r[1] == "seq_1_write_file"] == [("permission", "deny")]
    assert [r for r in writer if r[1] == "seq_2_list_files"] == []
    assert _around(writer, "seq_0_read_file") == [
        ("tool_start", None),
        ("warning", None),
        ("tool_end", None),
    ]
    assert await assert_replays(client, run_workflow_ids(workflow_id, out)) == 2


def _callback(seen: list[tuple[str, Any]]) -> Any:
    def can_use_tool(name: str, arguments: Mapping[str, Any], context: Any) -> Any:
        seen.append((name, context.agent_name if isinstance(context, HookInput) else None))
        if name == "read_file" and arguments.get("path") == "README.md":
            return PermissionDeny("README.md is private")
        return PermissionAllow()

    return can_use_tool


async def test_a_workers_can_use_tool_callback_runs_where_the_in_process_one_does(
    client: Client, task_queue: str, workdir: Path
) -> None:
    seen: list[tuple[str, Any]] = []
    expected, _, in_process = await _in_process(
        workdir, None, Permissions(mode=PermissionMode.FULL, can_use_tool=_callback(seen))
    )
    (workdir / "deputy-scratch.txt").unlink()  # the durable run writes it afresh
    seen_before = list(seen)
    seen.clear()
    async with _worker(client, task_queue, workdir, None, _callback(seen)):
        out, durable, workflow_id = await _durable(
            client,
            task_queue,
            workdir,
            Permissions(mode=PermissionMode.FULL),
            worker_can_use_tool=True,
        )
    # The callback saw the same calls (the lead's, and the child's through its ceiling),
    # each with its PreToolUse hook input as context; delegate_to_agent included.
    assert sorted(seen) == sorted(seen_before)
    assert ("delegate_to_agent", "lead") in seen
    assert ("read_file", "writer") in seen
    assert _per_agent(durable) == _per_agent(in_process)
    assert _calls(out.result) == _calls(expected)
    errors = _errors(out.result)
    assert errors["seq_1_read_file"] == "Permission denied: README.md is private"
    assert errors["seq_2_write_file"] is None
    decisions = sorted(
        (e.agent_name, e.tool_name, e.decision) for e in durable if isinstance(e, PermissionEvent)
    )
    assert ("lead", "read_file", "deny") in decisions
    assert ("writer", "read_file", "deny") in decisions
    assert ("writer", "write_file", "allow") in decisions
    assert await assert_replays(client, run_workflow_ids(workflow_id, out)) == 2


async def test_a_run_asking_for_a_callback_on_a_worker_without_one_is_denied(
    client: Client, task_queue: str, workdir: Path
) -> None:
    async with _worker(client, task_queue, workdir, None):
        out, _, _ = await _durable(
            client,
            task_queue,
            workdir,
            Permissions(mode=PermissionMode.FULL),
            worker_can_use_tool=True,
        )
    missing = (
        "Permission denied: Tool '{}' denied: the run asks for the workers' can_use_tool "
        "callback and this worker has none (register it with DeputyActivities(can_use_tool=...))."
    )
    errors = _errors(out.result)
    assert errors["seq_0_delegate_to_agent"] == missing.format("delegate_to_agent")
    assert errors["seq_1_read_file"] == missing.format("read_file")
    assert out.subagents == ()


def test_a_callback_in_permissions_is_refused_naming_the_worker_side(tmp_path: Path) -> None:
    definitions, _ = _setup(tmp_path)
    callback = _callback([])
    with pytest.raises(ValueError, match=r"DeputyActivities\(can_use_tool=\.\.\.\)"):
        lead_input(TASK, definitions, model="test", permissions=Permissions(can_use_tool=callback))
    with pytest.raises(ValueError, match="worker_can_use_tool must be True or False"):
        lead_input(TASK, definitions, model="test", worker_can_use_tool="yes")  # type: ignore[arg-type]
    assert permission_spec(Permissions(), worker_can_use_tool=True).can_use_tool is True
    with pytest.raises(TypeError, match="can_use_tool must be callable"):
        DeputyActivities(can_use_tool="deny")  # type: ignore[arg-type]


async def test_observer_events_of_a_subagent_reach_the_workers_hooks_as_in_process(
    client: Client, task_queue: str, workdir: Path
) -> None:
    seen: list[HookInput] = []
    hooks = Hooks()
    hooks.add(HookEvent.Notification, seen.append)
    hooks.add(HookEvent.Stop, seen.append)

    def broken_stop(h: HookInput) -> None:
        if h.agent_name == "writer":
            raise RuntimeError("stop hook down")

    hooks.add(HookEvent.Stop, broken_stop)
    policy = DelegationPolicy(observers=(HookEvent.Notification, HookEvent.Stop))
    permissions = Permissions(mode=PermissionMode.READONLY)
    definitions, own = _setup(workdir)
    files = {t.name: t for t in tools_file(workdir)}
    lead = LeadAgent(
        chat("gateseq/seq"),
        definitions,
        tools=[files[n] for n in own],
        usage_limits=UsageLimits(max_requests=20),
        working_dir=workdir,
        hooks=hooks,
        permissions=permissions,
        delegation_policy=policy,
    )
    in_process: list[Event] = []
    await lead.run(TASK, on_event=in_process.append)
    seen_before = list(seen)
    seen.clear()
    async with _worker(client, task_queue, workdir, hooks):
        out, durable, workflow_id = await _durable(
            client,
            task_queue,
            workdir,
            permissions,
            delegation_policy=policy,
            hook_events=["Stop"],
        )

    def shape(seen: list[HookInput]) -> list[tuple[Any, ...]]:
        return sorted(
            (
                h.event.value,
                h.agent_name,
                h.delegation_id is not None,
                h.parent_agent_id is not None,
                h.message,
                h.reason,
                h.permission_mode,
            )
            for h in seen
        )

    assert shape(seen) == shape(seen_before)
    # The writer's own denial and its run's end reached the lead's hooks, with its ids.
    writer = [h for h in seen if h.agent_name == "writer"]
    assert sorted(h.event.value for h in writer) == ["Notification", "Stop"]
    [record] = out.subagents
    for h in writer:
        assert (h.agent_id, h.run_id, h.delegation_id) == (
            record.agent_id,
            record.run_id,
            record.delegation_id,
        )
    assert writer[0].message is not None
    assert writer[0].message.startswith("permission_denied: Tool 'write_file'")
    # A forwarded hook's error is the delegation's, as in-process.
    [record_before] = lead.list_subagents()
    assert record.hook_error == record_before.hook_error == "Stop: stop hook down"
    assert _per_agent(durable)["writer"] == _per_agent(in_process)["writer"]
    assert await assert_replays(client, run_workflow_ids(workflow_id, out)) == 2


def test_lead_input_carries_the_policys_observers(tmp_path: Path) -> None:
    definitions, _ = _setup(tmp_path)
    # An event's name is accepted as well as the event and normalised to it (the field is
    # typed as the normalised tuple, so the name form is a deliberate type error here).
    policy = DelegationPolicy(observers=("Notification", HookEvent.SessionStart))  # type: ignore[arg-type]
    request = lead_input(TASK, definitions, model="test", delegation_policy=policy)
    assert request.observers == ("Notification", "SessionStart")
    assert lead_input(TASK, definitions, model="test").observers == ()


async def test_a_batchs_responders_reach_the_workers_hooks_as_in_process(
    client: Client, task_queue: str, workdir: Path
) -> None:
    """In-process, a ``parallel_delegate`` responder has no tools, so the lead's hooks
    never see a tool call of it; they see SubagentStart and SubagentStop per responder,
    and the responders' own run events their lead's observers name. The same here."""
    seen: list[HookInput] = []
    hooks = Hooks()
    for event in (HookEvent.PreToolUse, HookEvent.PostToolUse, *BATCH_SEEN):
        hooks.add(event, seen.append)

    def broken_stop(h: HookInput) -> None:
        if h.event is HookEvent.SubagentStop and h.task == "b":
            raise RuntimeError("stop hook down")

    hooks.add(HookEvent.SubagentStop, broken_stop)
    responder = AgentDefinition("resp", "Responds.", "You respond.")
    tasks = [("resp", "a"), ("resp", "b")]
    observers = (HookEvent.SessionStart, HookEvent.Stop)
    lead = LeadAgent(
        chat("test"),
        [responder],
        hooks=hooks,
        delegation_policy=DelegationPolicy(observers=observers),
    )
    expected = await lead.parallel_delegate(tasks)
    seen_before = list(seen)
    seen.clear()
    workflow_id = f"batch-{uuid.uuid4().hex}"
    async with _worker(client, task_queue, workdir, hooks):
        got = await parallel_delegate(
            client,
            tasks,
            [responder],
            model="test",
            task_queue=task_queue,
            workflow_id=workflow_id,
            hook_events=["SubagentStart", "SubagentStop"],
            delegation_policy=DelegationPolicy(observers=observers),
        )

    def shape(seen: list[HookInput]) -> list[tuple[Any, ...]]:
        return sorted(
            (
                h.event.value,
                h.agent_name,
                h.child_agent_name,
                h.task,
                h.status,
                h.delegation_id is not None,
                h.parent_agent_id is not None,
            )
            for h in seen
        )

    assert shape(seen) == shape(seen_before)
    assert sorted({h.event.value for h in seen}) == ["SessionStart", "Stop", *BATCH_NAMES]
    assert got.run.hook_errors == expected.run.hook_errors == ("SubagentStop: stop hook down",)
    assert got.statuses == expected.statuses
    # The SubagentStart hooks saw the batch's ids and each responder's.
    starts = [h for h in seen if h.event is HookEvent.SubagentStart]
    assert {h.delegation_id for h in starts} == set(got.delegation_ids)
    assert {(h.agent_id, h.run_id) for h in starts} == {(got.run.agent_id, got.run.run_id)}
    histories = [workflow_id, *(f"{workflow_id}/{d}" for d in got.delegation_ids)]
    assert await assert_replays(client, histories) == 3


BATCH_SEEN: tuple[HookEvent, ...] = (
    HookEvent.SubagentStart,
    HookEvent.SubagentStop,
    HookEvent.SessionStart,
)
BATCH_SEEN += (HookEvent.Stop,)
BATCH_NAMES = ["SubagentStart", "SubagentStop"]


async def test_a_batch_refuses_hook_events_it_never_fires(client: Client) -> None:
    responder = AgentDefinition("resp", "Responds.", "You respond.")
    kw: dict[str, Any] = {"model": "test", "task_queue": "unused", "workflow_id": "unused"}
    with pytest.raises(ValueError, match="fires only SubagentStart and SubagentStop"):
        await parallel_delegate(client, [("resp", "a")], [responder], hook_events=["Stop"], **kw)


async def test_a_deny_list_naming_delegate_to_agent_stops_delegations_as_in_process(
    client: Client, task_queue: str, workdir: Path
) -> None:
    permissions = Permissions(mode=PermissionMode.READONLY, deny=frozenset({"delegate_to_agent"}))
    expected, lead, in_process = await _in_process(workdir, _hooks(), permissions)
    async with _worker(client, task_queue, workdir, _hooks()):
        out, durable, workflow_id = await _durable(client, task_queue, workdir, permissions)
    assert _calls(out.result) == _calls(expected)
    assert _errors(out.result)["seq_0_delegate_to_agent"] == (
        "Permission denied: Tool 'delegate_to_agent' is denied by the deny list."
    )
    assert out.subagents == () == tuple(lead.list_subagents())
    assert _per_agent(durable) == _per_agent(in_process)
    assert await assert_replays(client, [workflow_id]) == 1


async def test_a_subagent_is_not_offered_its_disallowed_tools_on_either_path(
    client: Client, task_queue: str, workdir: Path
) -> None:
    files = {t.name: t for t in tools_file(workdir)}
    reviewer = AgentDefinition(
        "reviewer",
        "Reviews.",
        "You review.",
        tools=(files["read_file"], files["list_files"], files["grep_files"]),
        disallowed_tools=("List_Files",),
        max_requests=4,
    )
    lead = LeadAgent(chat("test"), [reviewer], working_dir=workdir)
    await lead.run(TASK)
    [expected] = lead.get_subagent_results()
    request = lead_input(TASK, [reviewer], model="test")
    assert request.sub_agents[0].tools == ("read_file", "grep_files")
    async with _worker(client, task_queue, workdir, None):
        handle = await start_lead(
            client, request, workflow_id=f"gate-{uuid.uuid4().hex}", task_queue=task_queue
        )
        out = await handle.result()
    [got] = out.subagent_results
    assert expected is not None
    assert got is not None
    assert _calls(got) == _calls(expected)
    assert [c[1] for c in _calls(got)][:2] == ["read_file", "grep_files"]  # no list_files
