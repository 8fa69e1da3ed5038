"""The in-process delegation scenarios that matter, run on both paths: the same records and
results (ids differ). Both paths use the same providers: the offline ``test`` model, which
calls every offered tool once and then answers, and ``parity/ghost``, the test model asking
for an agent nobody defined. Hooks are the same ``Hooks`` object on both paths: the
in-process lead's, and the in-process worker's (``DeputyActivities(hooks=...)``)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, ClassVar

import pytest
from temporalio.client import Client

from deputy_runtime import (
    AgentDefinition,
    AgentResult,
    HookDecision,
    HookEvent,
    HookInput,
    Hooks,
    LeadAgent,
    PermissionEvent,
    PermissionMode,
    Permissions,
    SubagentRecord,
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
    TestProvider,
    unregister_provider,
)
from deputy_runtime.runtime import (
    DelegationEnd,
    DelegationStart,
    Event,
    WarningEvent,
    decode_event,
)
from deputy_runtime.runtime._output import OUTPUT_SECTION_START
from deputy_runtime.temporal import (
    DeputyActivities,
    LeadOutput,
    deputy_worker,
    lead_input,
    start_lead,
)
from tests.temporal.helpers import (
    assert_replays,
    chain_run_ids,
    review_definitions,
    run_workflow_ids,
)

pytestmark = pytest.mark.anyio

TASK = "Review the project and report every TODO."


class GhostProvider(TestProvider):
    """The test model, except that a lead asks for the undefined agent ``ghost``."""

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        names = {t.name for t in request.tools}
        last = request.turns[-1]
        answered = any(isinstance(c, ContentToolResult) for c in last.contents)
        if "delegate_to_agent" in names and last.role == "user" and not answered:
            call = ContentToolRequest(
                "test_ghost", "delegate_to_agent", {"agent_name": "ghost", "task": "Boo"}
            )
            return AssistantTurn((call,), self.usage, finish_reason="tool_use")
        return await super().complete(request)


@pytest.fixture(autouse=True, scope="module")
def _parity_provider() -> Iterator[None]:
    """The ``parity`` provider for this module's in-process workers, removed afterwards so
    later tests see the registry as it was."""
    register_provider(
        "parity",
        lambda model="ghost", **kw: GhostProvider(model=model, **kw),
        default_model="ghost",
        replace=True,
    )
    yield
    unregister_provider("parity")


def _definitions(
    workdir: Path, max_requests: int | None = 4, writer_mode: str | None = None
) -> list[AgentDefinition]:
    files = {t.name: t for t in tools_file(workdir)}
    definitions = review_definitions(workdir, max_requests)
    if writer_mode is not None:
        definitions.append(
            AgentDefinition(
                "writer",
                "Writes.",
                "You write.",
                tools=(files["write_file"],),
                permission_mode=writer_mode,
            )
        )
    return definitions


class Outcome:
    """One path's run: the lead's result, the records and the delegations' results."""

    def __init__(
        self,
        result: AgentResult,
        records: Iterable[SubagentRecord],
        results: Iterable[AgentResult | None],
        events: Iterable[Event] = (),
    ) -> None:
        self.events = list(events)
        self.result = result
        self.records = list(records)
        self.results = list(results)

    def comparable(self) -> tuple[object, ...]:
        records = sorted(
            (
                r.agent_name,
                r.task,
                r.status,
                r.stop_reason,
                r.usage,
                r.limits,
                r.error,
                r.hook_error,
            )
            for r in self.records
        )
        results = sorted(
            (
                (r.agent_name, r.response, r.turns, r.usage, r.stop_reason, r.limits, r.error)
                for r in self.results
                if r is not None
            ),
            key=repr,
        )
        lead = self.result
        head = lead.response.splitlines()[0] if lead.response else ""
        # Both leads offer delegate_to_agent first: the model asks for the same calls,
        # with the same ids, on both paths.
        requests = tuple(c for t in lead.turns for c in t.tool_requests)
        return (
            records,
            results,
            sum(r is None for r in self.results),
            (lead.stop_reason, lead.usage, lead.limits, lead.error, lead.hook_errors, head),
            requests,
        )


async def _in_process(
    workdir: Path,
    definitions: list[AgentDefinition],
    limits: UsageLimits,
    *,
    model: str = "test",
    hooks: Hooks | None = None,
    permissions: Permissions | None = None,
) -> Outcome:
    lead = LeadAgent(
        chat(model),
        definitions,
        usage_limits=limits,
        working_dir=workdir,
        hooks=hooks,
        permissions=permissions,
    )
    result = await lead.run(TASK)
    return Outcome(result, lead.list_subagents(), lead.get_subagent_results())


@asynccontextmanager
async def _worker(
    client: Client, task_queue: str, workdir: Path, hooks: Hooks | None = None
) -> AsyncIterator[None]:
    activities = DeputyActivities(tools_file(workdir), working_dir=workdir, hooks=hooks)
    async with deputy_worker(client, activities, task_queue=task_queue):
        yield


async def _durable(
    client: Client,
    task_queue: str,
    definitions: list[AgentDefinition],
    limits: UsageLimits,
    *,
    model: str = "test",
    permissions: Permissions | None = None,
    hook_events: Iterable[str] = (),
    **options: Any,
) -> tuple[Outcome, LeadOutput, str]:
    workflow_id = f"parity-{uuid.uuid4().hex}"
    request = lead_input(
        TASK,
        definitions,
        model=model,
        usage_limits=limits,
        permissions=permissions,
        hook_events=hook_events,
        **options,
    )
    handle = await start_lead(client, request, workflow_id=workflow_id, task_queue=task_queue)
    out = await handle.result()
    # The run's events, while a worker still answers queries.
    encoded: list[str] = await handle.query("events", 0)
    events = [decode_event(e) for e in encoded]
    return Outcome(out.result, out.subagents, out.subagent_results, events), out, workflow_id


# -- budgets, setup errors, grants ---------------------------------------------------------


@pytest.mark.parametrize("continue_as_new_after", [None, 10])
async def test_a_cost_limit_without_reported_costs_warns_each_run_once_on_both(
    client: Client, task_queue: str, workdir: Path, continue_as_new_after: int | None
) -> None:
    # The offline test model reports no cost: max_cost_usd cannot see these responses,
    # and each run (the lead's and every delegation's) says so once, in the same words,
    # also when the lead continues as new at every boundary.
    definitions = _definitions(workdir)
    limits = UsageLimits(max_cost_usd=1.0, max_requests=30)
    lead = LeadAgent(chat("test"), definitions, usage_limits=limits, working_dir=workdir)
    local = [e async for e in lead.run_stream(TASK)]
    options: dict[str, Any] = {}
    if continue_as_new_after is not None:
        options["continue_as_new_after"] = continue_as_new_after
    async with _worker(client, task_queue, workdir):
        got, out, workflow_id = await _durable(client, task_queue, definitions, limits, **options)
    if continue_as_new_after is not None:
        assert len(await chain_run_ids(client, workflow_id)) > 1

    def warnings(events: Iterable[Event]) -> list[tuple[str | None, str]]:
        return sorted((e.agent_name, e.message) for e in events if isinstance(e, WarningEvent))

    expected = warnings(local)
    assert warnings(got.events) == expected
    names = [name for name, _ in expected]
    assert sorted(map(str, names)) == sorted(["lead", *(r.agent_name for r in got.records)])
    assert all("reported no cost" in m and "'test'" in m for _, m in expected)
    if continue_as_new_after is None:
        assert await assert_replays(client, run_workflow_ids(workflow_id, out)) >= 1


@pytest.mark.parametrize(
    ("limits", "max_requests"),
    [
        (UsageLimits(max_requests=4), 2),  # 2, 1 and 0 requests left for the three
        (UsageLimits(max_requests=3), None),  # 1 for the first (the lead keeps 1), 0, 0
        (UsageLimits(max_total_tokens=40), 4),  # 6 tokens each: each stops at its share
        (UsageLimits(max_output_tokens=12, max_requests=20), 4),
    ],
)
async def test_budgets_across_parallel_delegations_match(
    client: Client,
    task_queue: str,
    workdir: Path,
    limits: UsageLimits,
    max_requests: int | None,
) -> None:
    definitions = _definitions(workdir, max_requests)
    expected = await _in_process(workdir, definitions, limits)
    async with _worker(client, task_queue, workdir):
        got, _, _ = await _durable(client, task_queue, definitions, limits)
    assert got.comparable() == expected.comparable()
    # The scenario is the one meant: some delegation was held back by the budget.
    statuses = {r.status for r in got.records}
    assert statuses & {"not_started", "stopped"}, statuses
    if max_requests is None:  # zero grants: settled before anything starts
        assert sorted(statuses) == ["not_started", "stopped"]
        # Each of them still has its one event: a DelegationEnd alone, saying why.
        started = {e.delegation_id for e in got.events if isinstance(e, DelegationStart)}
        alone = [
            e for e in got.events if isinstance(e, DelegationEnd) and e.delegation_id not in started
        ]
        skipped = [r for r in got.records if r.status == "not_started"]
        assert sorted(str(e.delegation_id) for e in alone) == sorted(
            r.delegation_id for r in skipped
        )
        assert [e.error for e in alone] == [r.error for r in skipped]
        assert all(e.error and e.error.startswith("Not started: ") for e in alone)


@pytest.mark.parametrize("max_tool_calls", [5, 3])
async def test_a_delegation_past_its_share_draws_more_from_its_lead_as_in_process(
    client: Client, task_queue: str, workdir: Path, max_tool_calls: int
) -> None:
    """One uncapped delegation whose first turn calls three tools. The lead's delegation
    call is its own first tool call; the share is half of what is left (the lead counts
    as a party). Under 5 (2 of 4) the third call draws one more; under 3 (1 of 2) the
    second call draws the last one and the third finds nothing left. On both paths
    alike, and the record shows the limits with what was drawn."""
    files = {t.name: t for t in tools_file(workdir)}
    scout = AgentDefinition(
        "scout",
        "Looks around.",
        "You look around.",
        tools=(files["read_file"], files["grep_files"], files["list_files"]),
    )
    limits = UsageLimits(max_tool_calls=max_tool_calls)
    expected = await _in_process(workdir, [scout], limits)
    async with _worker(client, task_queue, workdir):
        got, out, workflow_id = await _durable(client, task_queue, [scout], limits)
    assert got.comparable() == expected.comparable()
    [record] = got.records
    assert record.limits is not None
    ran = 3 if max_tool_calls == 5 else 2
    assert record.limits.max_tool_calls == ran  # the share and what it drew
    [result] = got.results
    assert result is not None
    refused = [
        c
        for t in result.turns
        for c in t.contents
        if isinstance(c, ContentToolResult) and c.error and "Tool call limit" in c.error
    ]
    assert (record.usage.tool_calls, len(refused)) == (ran, 3 - ran)
    assert got.result.usage.tool_calls == 1 + ran <= max_tool_calls
    assert await assert_replays(client, run_workflow_ids(workflow_id, out)) == 2


async def test_ceiling_violation_matches(client: Client, task_queue: str, workdir: Path) -> None:
    definitions = _definitions(workdir, 2, writer_mode="full")
    limits = UsageLimits(max_requests=20)
    permissions = Permissions(mode=PermissionMode.READONLY)
    expected = await _in_process(workdir, definitions, limits, permissions=permissions)
    async with _worker(client, task_queue, workdir):
        got, _, _ = await _durable(client, task_queue, definitions, limits, permissions=permissions)
    assert got.comparable() == expected.comparable()
    by_name = {r.agent_name: r for r in got.records}
    assert (by_name["writer"].status, by_name["writer"].stop_reason) == ("failed", "setup_error")
    assert {r.status for r in got.records if r.agent_name != "writer"} == {"completed"}


async def test_unknown_agent_matches(client: Client, task_queue: str, workdir: Path) -> None:
    definitions = _definitions(workdir)
    limits = UsageLimits(max_requests=10)
    expected = await _in_process(workdir, definitions, limits, model="parity/ghost")
    async with _worker(client, task_queue, workdir):
        got, _, _ = await _durable(client, task_queue, definitions, limits, model="parity/ghost")
    assert got.comparable() == expected.comparable()
    [record] = got.records
    assert (record.status, record.stop_reason) == ("failed", "setup_error")
    assert record.error is not None
    assert record.error.startswith("Unknown agent: ghost.")


# -- hooks -----------------------------------------------------------------------------------


class Recorder:
    """Hooks that record what they see (one list per path) and decide as told."""

    def __init__(self) -> None:
        self.seen: list[HookInput] = []

    def record(self, hook_input: HookInput) -> None:
        self.seen.append(hook_input)

    def calls(self, event: HookEvent) -> list[tuple[Any, ...]]:
        """The tool events seen, without ids (they differ between the paths)."""
        return sorted(
            (
                h.agent_name,
                h.tool_name,
                h.delegation_id is not None,
                h.parent_agent_id is not None,
                h.permission_mode,
                h.tool_error,
            )
            for h in self.seen
            if h.event is event
        )


async def _both(
    client: Client,
    task_queue: str,
    workdir: Path,
    hooks: Hooks,
    recorder: Recorder,
    *,
    limits: UsageLimits | None = None,
    hook_events: Iterable[str] = (),
) -> tuple[Outcome, Outcome, list[HookInput], list[HookInput], LeadOutput, str]:
    definitions = _definitions(workdir)
    limits = limits or UsageLimits(max_requests=20)
    expected = await _in_process(workdir, definitions, limits, hooks=hooks)
    seen_in_process = list(recorder.seen)
    recorder.seen.clear()
    async with _worker(client, task_queue, workdir, hooks):
        got, out, workflow_id = await _durable(
            client, task_queue, definitions, limits, hook_events=hook_events
        )
    return expected, got, seen_in_process, list(recorder.seen), out, workflow_id


async def test_a_pre_tool_use_deny_in_a_child_matches(
    client: Client, task_queue: str, workdir: Path
) -> None:
    recorder = Recorder()
    hooks = Hooks()

    def deny_reads(h: HookInput) -> HookDecision | None:
        recorder.record(h)
        if h.delegation_id is not None:
            return HookDecision.deny("reading is off today")
        return None

    hooks.add(HookEvent.PreToolUse, deny_reads, matcher="read_file")
    expected, got, seen_before, seen, out, workflow_id = await _both(
        client, task_queue, workdir, hooks, recorder
    )
    assert got.comparable() == expected.comparable()
    # Same error text in the children's turns; the hook saw the same calls.
    texts = [
        c.error
        for r in got.results
        if r is not None
        for t in r.turns
        for c in t.contents
        if isinstance(c, ContentToolResult) and c.error
    ]
    assert texts.count("Denied by hook: reading is off today") == 2  # reviewer, summarizer
    assert Recorder.calls(_with(seen), HookEvent.PreToolUse) == Recorder.calls(
        _with(seen_before), HookEvent.PreToolUse
    )
    # The hook input carried each child's ids and its lead's.
    for h in seen:
        record = next(r for r in out.subagents if r.delegation_id == h.delegation_id)
        assert (h.agent_id, h.run_id) == (record.agent_id, record.run_id)
        assert (h.parent_agent_id, h.parent_run_id) == (out.result.agent_id, out.result.run_id)
        assert h.tool_call_id is not None
        assert h.working_dir == str(workdir)
    assert await assert_replays(client, run_workflow_ids(workflow_id, out)) == 4


def _with(seen: list[HookInput]) -> Recorder:
    recorder = Recorder()
    recorder.seen = seen
    return recorder


async def test_a_hook_stop_inside_a_child_matches(
    client: Client, task_queue: str, workdir: Path
) -> None:
    recorder = Recorder()
    hooks = Hooks()

    def stop_grep(h: HookInput) -> HookDecision:
        recorder.record(h)
        return HookDecision.stop("enough searching")

    hooks.add(HookEvent.PreToolUse, stop_grep, matcher="grep_files")
    expected, got, _, _, out, workflow_id = await _both(
        client, task_queue, workdir, hooks, recorder
    )
    assert got.comparable() == expected.comparable()
    reviewer = next(r for r in got.records if r.agent_name == "reviewer")
    assert (reviewer.status, reviewer.stop_reason) == ("stopped", "hook_requested_stop")
    assert reviewer.usage.requests == 1  # stopped after the turn of the call
    assert {r.status for r in got.records if r.agent_name != "reviewer"} == {"completed"}
    assert got.result.stop_reason == "complete"  # a child's stop ends the child only
    assert await assert_replays(client, run_workflow_ids(workflow_id, out)) == 4


async def test_a_post_tool_use_hook_sees_every_call_on_both_paths(
    client: Client, task_queue: str, workdir: Path
) -> None:
    recorder = Recorder()
    hooks = Hooks()
    hooks.add(HookEvent.PostToolUse, recorder.record)
    expected, got, seen_before, seen, _, _ = await _both(
        client, task_queue, workdir, hooks, recorder, hook_events=["PostToolUse"]
    )
    assert got.comparable() == expected.comparable()
    calls = _with(seen).calls(HookEvent.PostToolUse)
    assert calls == _with(seen_before).calls(HookEvent.PostToolUse)
    # Four child calls (reviewer 2, explorer 1, summarizer 1) and three delegations.
    assert sum(1 for c in calls if c[2]) == 4
    assert sum(1 for c in calls if c[1] == "delegate_to_agent") == 3


async def test_failing_hooks_fail_closed_and_are_recorded(
    client: Client, task_queue: str, workdir: Path
) -> None:
    recorder = Recorder()
    hooks = Hooks()

    def broken_pre(h: HookInput) -> None:
        recorder.record(h)
        raise RuntimeError("pre hook down")

    def broken_post(h: HookInput) -> None:
        raise RuntimeError("post hook down")

    hooks.add(HookEvent.PreToolUse, broken_pre, matcher="list_files")
    hooks.add(HookEvent.PostToolUse, broken_post, matcher="read_file")
    expected, got, _, _, out, workflow_id = await _both(
        client, task_queue, workdir, hooks, recorder
    )
    assert got.comparable() == expected.comparable()
    by_name = {r.agent_name: r for r in got.records}
    assert by_name["explorer"].hook_error == "PreToolUse: pre hook down"
    assert by_name["reviewer"].hook_error == "PostToolUse: post hook down"
    explorer = next(r for r in got.results if r is not None and r.agent_name == "explorer")
    errors = [getattr(c, "error", None) for t in explorer.turns for c in t.contents]
    assert "Denied by hook: Hook error: pre hook down" in errors
    # The failures were announced as warnings of the children that made the calls.
    messages = sorted(e.message for e in got.events if isinstance(e, WarningEvent))
    assert messages == [
        "hook failed: PostToolUse: post hook down",
        "hook failed: PostToolUse: post hook down",
        "hook failed: PreToolUse: pre hook down",
    ]
    assert await assert_replays(client, run_workflow_ids(workflow_id, out)) == 4


LIFECYCLE = ("SessionStart", "UserPromptSubmit", "SubagentStart", "SubagentStop", "Stop")


async def test_lifecycle_hooks_run_through_the_hook_activity_and_match(
    client: Client, task_queue: str, workdir: Path
) -> None:
    recorder = Recorder()
    hooks = Hooks()
    for event in LIFECYCLE:
        hooks.add(event, recorder.record)

    def broken_stop(h: HookInput) -> None:
        if h.child_agent_name == "explorer":
            raise RuntimeError("stop hook down")

    hooks.add(HookEvent.SubagentStop, broken_stop)
    expected, got, seen_before, seen, out, workflow_id = await _both(
        client, task_queue, workdir, hooks, recorder, hook_events=LIFECYCLE
    )
    assert got.comparable() == expected.comparable()

    def shape(seen: list[HookInput]) -> list[tuple[Any, ...]]:
        return sorted(
            (h.event.value, h.agent_name, h.child_agent_name, h.status, h.reason, h.prompt)
            for h in seen
        )

    assert shape(seen) == shape(seen_before)
    assert sorted({h.event.value for h in seen}) == sorted(LIFECYCLE)
    by_name = {r.agent_name: r for r in got.records}
    assert by_name["explorer"].hook_error == "SubagentStop: stop hook down"
    starts = [h for h in seen if h.event is HookEvent.SubagentStart]
    assert {(h.agent_id, h.run_id) for h in starts} == {(out.result.agent_id, out.result.run_id)}
    assert await assert_replays(client, run_workflow_ids(workflow_id, out)) == 4


async def test_a_run_without_hook_events_runs_no_hook_activity(
    client: Client, task_queue: str, workdir: Path
) -> None:
    recorder = Recorder()
    hooks = Hooks()
    hooks.add(HookEvent.SubagentStart, recorder.record)
    async with _worker(client, task_queue, workdir, hooks):
        _, out, workflow_id = await _durable(
            client, task_queue, _definitions(workdir), UsageLimits(max_requests=20)
        )
    assert recorder.seen == []
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    activities = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert "deputy_hook" not in activities
    assert "deputy_model_request" in activities
    assert len(out.subagents) == 3


async def test_a_user_prompt_submit_deny_stops_the_lead_before_its_first_request(
    client: Client, task_queue: str, workdir: Path
) -> None:
    recorder = Recorder()
    hooks = Hooks()
    hooks.add(HookEvent.UserPromptSubmit, lambda h: HookDecision.deny("not today"))
    expected, got, _, _, out, _ = await _both(
        client, task_queue, workdir, hooks, recorder, hook_events=["UserPromptSubmit"]
    )
    assert got.comparable() == expected.comparable()
    assert (got.result.stop_reason, got.result.usage.requests) == ("hook_requested_stop", 0)
    assert out.result.turns == expected.result.turns == ()


def test_lead_input_refuses_an_unknown_hook_event(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"hook_events: 'PreToolUze' is not a hook event"):
        lead_input(TASK, _definitions(tmp_path), model="test", hook_events=["PreToolUze"])
    with pytest.raises(ValueError, match="list of hook event names"):
        lead_input(TASK, _definitions(tmp_path), model="test", hook_events="Stop")
    request = lead_input(
        TASK, _definitions(tmp_path), model="test", hook_events=[HookEvent.Stop, "Stop"]
    )
    assert request.hook_events == ("Stop",)


async def test_hook_errors_and_session_hooks_survive_continue_as_new(
    client: Client, task_queue: str, workdir: Path
) -> None:
    recorder = Recorder()
    hooks = Hooks()
    hooks.add(HookEvent.SessionStart, recorder.record)
    hooks.add(HookEvent.UserPromptSubmit, recorder.record)

    def broken(h: HookInput) -> None:
        raise RuntimeError(f"{h.tool_name} post hook down")

    # The lead's own delegate_to_agent calls (its errors: the lead's result) and a
    # child's read_file calls (its errors: the delegation's record).
    hooks.add(HookEvent.PostToolUse, broken, matcher="delegate_to_agent|read_file")
    hooks.add(HookEvent.PostToolUseFailure, broken, matcher="delegate_to_agent|read_file")
    definitions = _definitions(workdir)
    limits = UsageLimits(max_requests=20)
    expected = await _in_process(workdir, definitions, limits, hooks=hooks)
    recorder.seen.clear()
    events = ["SessionStart", "UserPromptSubmit", "PostToolUse", "PostToolUseFailure"]
    workflow_id = f"parity-{uuid.uuid4().hex}"
    request = lead_input(
        TASK,
        definitions,
        model="test",
        usage_limits=limits,
        hook_events=events,
        continue_as_new_after=10,  # every run of the chain is past it at its first boundary
    )
    async with _worker(client, task_queue, workdir, hooks):
        handle = await start_lead(client, request, workflow_id=workflow_id, task_queue=task_queue)
        out = await handle.result()
    run_ids = await chain_run_ids(client, workflow_id)
    assert len(run_ids) > 1  # the lead did continue as new
    got = Outcome(out.result, out.subagents, out.subagent_results)
    assert got.comparable() == expected.comparable()
    assert len(got.result.hook_errors) == 3  # one per delegate_to_agent call
    assert all(e.startswith("PostToolUse") for e in got.result.hook_errors)
    # SessionStart and UserPromptSubmit ran once for the whole chain.
    assert sorted(h.event.value for h in recorder.seen) == ["SessionStart", "UserPromptSubmit"]
    assert await assert_replays(client, [workflow_id], run_ids=run_ids) == len(run_ids)


def _own_results(result: AgentResult) -> dict[str, tuple[object, ...]]:
    """The lead's own tool calls' results by call id, with the tool's name, without its
    delegations' (whose outcomes hold per-run ids). Both leads offer ``delegate_to_agent``
    first, so the test model's call ids are the same on both paths."""
    names = {c.id: c.name for t in result.turns for c in t.tool_requests}
    return {
        c.request_id: (names[c.request_id], c.value, c.error)
        for t in result.turns
        for c in t.contents
        if isinstance(c, ContentToolResult) and names[c.request_id] != "delegate_to_agent"
    }


async def test_the_leads_own_calls_see_permission_request_and_notification_hooks(
    client: Client, task_queue: str, workdir: Path
) -> None:
    recorder = Recorder()
    hooks = Hooks()

    def decide(h: HookInput) -> HookDecision:
        recorder.record(h)
        if h.tool_name == "write_file":
            return HookDecision.allow()
        return HookDecision.deny("no edits here")

    hooks.add(HookEvent.PermissionRequest, decide)
    hooks.add(HookEvent.Notification, recorder.record)
    files = {t.name: t for t in tools_file(workdir)}
    own = [files["write_file"], files["edit_file"], files["read_file"]]
    definitions = _definitions(workdir)[:1]
    limits = UsageLimits(max_requests=20)
    permissions = Permissions(mode=PermissionMode.READONLY)
    lead = LeadAgent(
        chat("test"),
        definitions,
        tools=own,
        usage_limits=limits,
        working_dir=workdir,
        hooks=hooks,
        permissions=permissions,
    )
    expected = await lead.run(TASK)
    (workdir / "deputy-scratch.txt").unlink()  # the durable run writes it afresh
    seen_before = list(recorder.seen)
    recorder.seen.clear()
    request = lead_input(
        TASK,
        definitions,
        model="test",
        tools=[t.name for t in own],
        usage_limits=limits,
        permissions=permissions,
    )
    async with _worker(client, task_queue, workdir, hooks):
        handle = await start_lead(
            client, request, workflow_id=f"parity-{uuid.uuid4().hex}", task_queue=task_queue
        )
        out = await handle.result()
        events = [decode_event(e) for e in await handle.query("events", 0)]
    assert _own_results(out.result) == _own_results(expected)
    errors = {v[0]: v[2] for v in _own_results(out.result).values()}
    assert errors["edit_file"] == "Permission denied: no edits here"
    assert errors["write_file"] is None  # the rules denied it, the hook allowed it

    def shape(seen: list[HookInput]) -> list[tuple[Any, ...]]:
        return sorted(
            (h.event.value, h.tool_name, h.permission_reason, h.message, h.permission_mode)
            for h in seen
        )

    assert shape(recorder.seen) == shape(seen_before)
    assert [h.message for h in recorder.seen if h.event is HookEvent.Notification] == [
        "permission_denied: no edits here"
    ]
    decisions = sorted((e.tool_name, e.decision) for e in events if isinstance(e, PermissionEvent))
    assert decisions == [("edit_file", "deny"), ("write_file", "allow")]


# -- structured results --------------------------------------------------------------------

#: What the judge must answer: a verdict and a score from 0 to 10.
VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"enum": ["approve", "reject"]},
        "score": {"type": "integer", "minimum": 0, "maximum": 10},
    },
    "required": ["verdict", "score"],
    "additionalProperties": False,
}
#: The judge's answers, one per attempt: prose, out of range, then right.
JUDGE_ANSWERS = ("Approve, score 7.", '{"verdict": "approve", "score": 11}',
                 '{"verdict": "approve", "score": 7}')  # fmt: skip


class JudgeProvider(TestProvider):
    """A lead that delegates to ``judge`` and ``stubborn`` at once, then answers; ``judge``
    answers wrongly twice and then rightly, ``stubborn`` never answers in JSON. The answer
    depends only on the request (how many retry turns it holds), so a model activity
    retried on another worker answers the same."""

    #: The system prompts the subagents' requests carried, on both engines.
    prompts: ClassVar[list[str]] = []

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        names = {t.name for t in request.tools}
        if "delegate_to_agent" in names:
            if len(request.turns) == 1:
                calls = tuple(
                    ContentToolRequest(
                        f"call_{agent}",
                        "delegate_to_agent",
                        {"agent_name": agent, "task": "Judge the change."},
                    )
                    for agent in ("judge", "stubborn")
                )
                return AssistantTurn(calls, self.usage, finish_reason="tool_use")
            return AssistantTurn((ContentText("done"),), self.usage, finish_reason="stop")
        retries = sum(1 for t in request.turns[1:] if t.role == "user")
        prompt = request.system_prompt or ""
        JudgeProvider.prompts.append(prompt)
        text = "I refuse to write JSON." if "stubborn" in prompt else JUDGE_ANSWERS[retries]
        return AssistantTurn((ContentText(text),), self.usage, finish_reason="stop")


@pytest.fixture
def judge_model() -> Iterator[str]:
    """A fresh provider serving :class:`JudgeProvider`, removed afterwards."""
    name = f"judge{uuid.uuid4().hex[:8]}"
    register_provider(name, lambda model="m", **kw: JudgeProvider(model=model, **kw),
                      default_model="m")  # fmt: skip
    yield f"{name}/m"
    unregister_provider(name)


async def test_structured_results_match_on_both_engines(
    client: Client, task_queue: str, workdir: Path, judge_model: str
) -> None:
    definitions = [
        AgentDefinition("judge", "Judges.", "You judge.", output_schema=VERDICT_SCHEMA),
        AgentDefinition(
            "stubborn", "Never writes JSON.", "You are stubborn.",
            output_schema=VERDICT_SCHEMA, output_retries=1,
        ),
    ]  # fmt: skip
    limits = UsageLimits(max_requests=20)
    JudgeProvider.prompts.clear()
    local = await _in_process(workdir, definitions, limits, model=judge_model)
    local_prompts = sorted(JudgeProvider.prompts)
    JudgeProvider.prompts.clear()
    async with _worker(client, task_queue, workdir):
        durable, out, workflow_id = await _durable(
            client, task_queue, definitions, limits, model=judge_model
        )
    # Every subagent request showed the schema, in the same words on both engines.
    assert sorted(JudgeProvider.prompts) == local_prompts
    assert len(local_prompts) == 5
    assert all(OUTPUT_SECTION_START in p and '"score"' in p for p in local_prompts)
    for got in (local, durable):
        by_name = {r.agent_name: r for r in got.records}
        judge, stubborn = by_name["judge"], by_name["stubborn"]
        assert (judge.status, judge.stop_reason) == ("completed", "complete")
        assert judge.output == {"verdict": "approve", "score": 7}
        assert judge.usage.requests == 3  # two rejected answers, then the right one
        assert (stubborn.status, stubborn.stop_reason) == ("failed", "invalid_output")
        assert stubborn.output is None
        assert stubborn.usage.requests == 2  # one retry
        assert "did not match the output schema after 2 attempts" in (stubborn.error or "")
    assert local.comparable() == durable.comparable()
    assert [r.output for r in local.records] == [r.output for r in durable.records]

    def outcomes(result: AgentResult) -> list[dict[str, Any]]:
        # What the lead's model read about each delegation, ids left out (they differ).
        # A failed delegation is an error result: "Subagent '...' failed." then the outcome.
        values = [
            c.value if c.error is None else (c.error or "").partition("\n")[2]
            for t in result.turns
            for c in t.contents
            if isinstance(c, ContentToolResult)
        ]
        decoded = [json.loads(v) for v in values]
        return [{k: v for k, v in d.items() if not k.endswith("_id")} for d in decoded]

    assert outcomes(local.result) == outcomes(durable.result)
    assert {"output": {"verdict": "approve", "score": 7}}.items() <= outcomes(durable.result)[
        0
    ].items()
    assert await assert_replays(client, run_workflow_ids(workflow_id, out)) >= 1
