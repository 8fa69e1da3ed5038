"""Delegations queued behind ``max_active_delegations``, and settlement under cancellation.

A queued delegation holds no budget and has built nothing. When its slot frees it must
look again before it starts: if the lead's run reached a limit meanwhile (the delegations
ahead spent it) it is refused with the "Run limit reached" tool error; if the lead or the
delegation was interrupted, or the wait was cancelled, it ends ``not_started``. In every
case the owned resource factory is never called for it and no reservation is left.

The last tests pin the deadline settlement gives an owned cleanup or a SubagentStop hook
that hangs while the lead is being cancelled (``_coordinator.SHIELDED_SECONDS``).

Real LeadAgents on a ScriptedProvider keyed per agent name; liveness is proved with events
a child's model call waits on, never with timing. Runs on asyncio and trio.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from deputy_runtime import DelegationPolicy, DelegationResources, HookEvent, UsageLimits
from deputy_runtime.chat import reply
from deputy_runtime.chat._types import ModelRequest, Usage
from deputy_runtime.runtime import DelegationEnd, DelegationStart, Event, ToolEnd, _coordinator
from tests.runtime.helpers import (
    Cleanups,
    MeterSpy,
    clean_leases,
    definition,
    delegate_many,
    delegate_results,
    meter_spy,
    outcome,
    scripted_lead,
)

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("clean_leases")]

__all__ = ["clean_leases", "meter_spy"]  # fixtures used by name

TWO = delegate_many(("worker", "first"), ("worker", "second"))


def owned(factory: Any) -> DelegationPolicy:
    return DelegationPolicy("owned", resources=factory)


class Gate:
    """A worker model that reports when it is in its request and waits to be released."""

    def __init__(self, answer: str = "answer") -> None:
        self.entered = anyio.Event()
        self.release = anyio.Event()
        self.answer = answer
        self.calls = 0

    async def __call__(self, request: ModelRequest) -> str:
        self.calls += 1
        self.entered.set()
        await self.release.wait()
        return self.answer


def one_slot_lead(tmp_path: Path) -> tuple[Any, Any, Gate, Cleanups]:
    """A lead asking for two delegations with one slot; its worker waits at ``gate``."""
    gate = Gate()
    cleanups = Cleanups()
    lead, provider = scripted_lead(
        {"lead": [TWO, reply("ok")], "worker": gate},
        [definition("worker", max_requests=2)],
        tmp_path,
        max_active_delegations=1,
        delegation_policy=owned(cleanups),
    )
    return lead, provider, gate, cleanups


def starts_of(lead: Any) -> list[str]:
    """Record the delegation id of every SubagentStart the lead fires."""
    seen: list[str] = []
    lead.hooks.add(HookEvent.SubagentStart, lambda h: seen.append(h.delegation_id))
    return seen


def assert_paired(events: list[Event]) -> None:
    """Every DelegationEnd follows a DelegationStart of the same delegation, once each,
    except a delegation that never started: its DelegationEnd (not_started) is alone."""
    started = [e.delegation_id for e in events if isinstance(e, DelegationStart)]
    ended = [
        e.delegation_id
        for e in events
        if isinstance(e, DelegationEnd) and e.delegation_id in started
    ]
    alone = [e for e in events if isinstance(e, DelegationEnd) and e.delegation_id not in started]
    assert sorted(started, key=str) == sorted(ended, key=str), (started, ended)
    assert len(set(started)) == len(started)
    assert all(e.status == "not_started" for e in alone), alone
    assert len({e.delegation_id for e in alone}) == len(alone)


# -- the run limit is checked again when the slot frees ---------------------------------------


async def test_a_queued_delegation_is_refused_when_the_lead_spent_its_budget_meanwhile(
    tmp_path: Path, meter_spy: MeterSpy
) -> None:
    cleanups = Cleanups()
    events: list[Event] = []
    # lead: 1 request; 3 left, of which the lead keeps 1 and the first delegation gets
    # ceil(2 / 2) = 1; its one response reports 3 upstream requests (a provider that
    # retried), which takes the lead to its limit of 4 before the second gets its slot
    upstream = reply("done", usage=Usage(requests=3, input_tokens=1))
    lead, provider = scripted_lead(
        {"lead": [TWO, reply("never sent")], "worker": [upstream]},
        [definition("worker")],
        tmp_path,
        usage_limits=UsageLimits(max_requests=4),
        max_active_delegations=1,
        delegation_policy=owned(cleanups),
    )
    starts = starts_of(lead)
    with anyio.fail_after(10):
        result = await lead.run("go", on_event=events.append)

    assert result.stop_reason == "request_limit"
    assert result.usage.requests == 4
    first, second = lead.list_subagents()
    assert first.status == "completed"
    assert first.limits is not None
    assert first.limits.max_requests == 1
    assert (second.status, second.stop_reason) == ("not_started", "request_limit")
    assert second.limits is None  # nothing was reserved for it
    assert second.started_at is None
    # built, started and asked the model only once: for the first delegation
    assert cleanups.made == [first.delegation_id]
    cleanups.assert_exactly_once()
    assert starts == [first.delegation_id]
    assert len(provider.requests_for("worker")) == 1
    assert meter_spy.open_reservations() == 0
    assert lead.delegations.active == {}
    # the model's tool result for the queued call is the same refusal as for a new call
    [refusal] = [
        e for e in events if isinstance(e, ToolEnd) and e.call_delegation_id == second.delegation_id
    ]
    assert refusal.error is not None
    assert refusal.error.startswith("Run limit reached for request_limit"), refusal.error
    assert_paired(events)
    assert second.delegation_id not in {
        e.delegation_id for e in events if isinstance(e, DelegationStart)
    }
    [end] = [
        e
        for e in events
        if isinstance(e, DelegationEnd) and e.delegation_id == second.delegation_id
    ]
    assert (end.status, end.stop_reason) == ("not_started", "request_limit")
    assert end.error == second.error


async def test_queued_delegations_that_fit_the_budget_still_run(
    tmp_path: Path, meter_spy: MeterSpy
) -> None:
    """The re-check refuses only what the budget cannot take: enough left, all run."""
    cleanups = Cleanups()
    lead, _ = scripted_lead(
        {"lead": [TWO, reply("both done")], "worker": ["a", "b"]},
        [definition("worker", max_requests=1)],
        tmp_path,
        usage_limits=UsageLimits(max_requests=4),
        max_active_delegations=1,
        delegation_policy=owned(cleanups),
    )
    with anyio.fail_after(10):
        result = await lead.run("go")
    assert result.response == "both done"
    assert [r.status for r in lead.list_subagents()] == ["completed", "completed"]
    assert len(cleanups.made) == 2
    cleanups.assert_exactly_once()
    assert meter_spy.open_reservations() == 0


# -- queued, then interrupted or cancelled -----------------------------------------------------


async def test_a_queued_delegation_shows_as_queued_until_its_slot_frees(tmp_path: Path) -> None:
    gate = Gate()
    lead, _ = scripted_lead(
        {"lead": [TWO, reply("ok")], "worker": gate},
        [definition("worker", max_requests=1)],
        tmp_path,
        max_active_delegations=1,
    )
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lead.run, "go")
            await gate.entered.wait()
            running, queued = lead.list_subagents()
            assert running.status == "running"
            assert queued.status == "queued"
            assert queued.started_at is None
            assert queued.limits is None  # a queued delegation holds no budget
            assert queued.completed_at is None
            gate.release.set()
    assert [r.status for r in lead.list_subagents()] == ["completed", "completed"]


@pytest.mark.parametrize("how", ["lead", "subagent"])
async def test_an_interrupted_queued_delegation_is_never_built(
    tmp_path: Path, meter_spy: MeterSpy, how: str
) -> None:
    lead, provider, gate, cleanups = one_slot_lead(tmp_path)
    events: list[Event] = []
    starts = starts_of(lead)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: lead.run("go", on_event=events.append))
            await gate.entered.wait()
            first, second = lead.list_subagents()
            assert second.status == "queued"
            if how == "lead":
                lead.interrupt("host stop")
            else:
                assert lead.interrupt_subagent(second.delegation_id, "not needed")
            gate.release.set()

    first, second = lead.list_subagents()
    assert (second.status, second.stop_reason) == ("not_started", "not_started")
    assert second.limits is None
    assert cleanups.made == [first.delegation_id]  # no factory call for the queued one
    cleanups.assert_exactly_once()
    assert starts == [first.delegation_id]
    assert gate.calls == 1
    assert meter_spy.open_reservations() == 0
    assert lead.delegations.active == {}
    assert_paired(events)
    if how == "subagent":
        # the lead goes on, and its model sees the queued delegation did not start
        assert first.status == "completed"
        assert lead.last_result is not None
        assert lead.last_result.response == "ok"
        statuses = {
            o["delegation_id"]: o["status"] for o in map(outcome, delegate_results(provider))
        }
        assert statuses == {first.delegation_id: "completed", second.delegation_id: "not_started"}


async def test_cancelling_the_lead_while_a_delegation_is_queued(
    tmp_path: Path, meter_spy: MeterSpy
) -> None:
    lead, _, gate, cleanups = one_slot_lead(tmp_path)
    events: list[Event] = []
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: lead.run("go", on_event=events.append))
            await gate.entered.wait()
            tg.cancel_scope.cancel()

    first, second = lead.list_subagents()
    assert (first.status, first.stop_reason) == ("stopped", "interrupted")
    assert (second.status, second.stop_reason) == ("not_started", "not_started")
    assert second.completed_at is not None  # settled, not left queued
    assert cleanups.made == [first.delegation_id]
    cleanups.assert_exactly_once()
    assert meter_spy.open_reservations() == 0
    assert lead.delegations.active == {}
    assert_paired(events)  # the queued one, which never had a start, has its end alone


# -- settlement deadlines while the lead is being cancelled -----------------------------------


async def test_a_hanging_owned_cleanup_is_cut_off_during_cancellation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_coordinator, "SHIELDED_SECONDS", 0.2)
    gate = Gate()
    cleanup_started = anyio.Event()
    cleanup_cancelled: list[bool] = []

    async def hanging_cleanup() -> None:
        cleanup_started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            cleanup_cancelled.append(True)
            raise

    def factory(agent: Any, definition: Any, context: Any) -> DelegationResources:
        return DelegationResources((), hanging_cleanup)

    lead, _ = scripted_lead(
        {"lead": [delegate_many(("worker", "t")), reply("ok")], "worker": gate},
        [definition("worker")],
        tmp_path,
        delegation_policy=owned(factory),
    )
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lead.run, "go")
            await gate.entered.wait()
            tg.cancel_scope.cancel()

    [record] = lead.list_subagents()
    assert cleanup_started.is_set()
    assert cleanup_cancelled == [True]
    assert (record.status, record.stop_reason) == ("stopped", "interrupted")
    assert record.cleanup_error == "cleanup did not finish within 0.2 s"


async def test_a_hanging_subagent_stop_hook_is_cut_off_during_cancellation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_coordinator, "SHIELDED_SECONDS", 0.2)
    gate = Gate()
    cleanups = Cleanups(async_cleanup=True)
    hook_entered = anyio.Event()

    async def hanging_stop_hook(hook: Any) -> None:
        hook_entered.set()
        await anyio.sleep_forever()

    lead, _ = scripted_lead(
        {"lead": [delegate_many(("worker", "t")), reply("ok")], "worker": gate},
        [definition("worker")],
        tmp_path,
        delegation_policy=owned(cleanups),
    )
    lead.hooks.add(HookEvent.SubagentStop, hanging_stop_hook)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lead.run, "go")
            await gate.entered.wait()
            tg.cancel_scope.cancel()

    [record] = lead.list_subagents()
    assert hook_entered.is_set()
    # the cleanup ran first, to completion, before the hook was given its deadline
    cleanups.assert_exactly_once()
    assert record.cleanup_error is None
    assert record.hook_error is not None
    assert "SubagentStop: did not finish within 0.2 s during cancellation" in record.hook_error
