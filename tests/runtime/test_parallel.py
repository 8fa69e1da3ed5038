"""``LeadAgent.parallel_delegate``: host-driven stateless fan-out.

Concurrency is measured with counters inside scripted responders (never by timing).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from deputy_runtime import (
    Chat,
    DefinitionError,
    DelegationBindingError,
    DelegationPolicy,
    HookEvent,
    ProviderError,
    RequestLimitExceeded,
    RunActiveError,
    UsageLimits,
)
from deputy_runtime.chat import ScriptedProvider
from deputy_runtime.chat._types import ModelRequest, Turn
from deputy_runtime.runtime import DelegationEnd, DelegationStart
from tests.runtime.helpers import Cleanups, definition, make_tool, meter_spy, scripted_lead

pytestmark = pytest.mark.anyio

__all__ = ["meter_spy"]


def task_of(request: ModelRequest) -> str:
    return str(json.loads(request.turns[0].text)["brief"]["task"])


def echo(request: ModelRequest) -> str:
    return f"answer to {task_of(request)}"


class Gauge:
    """Counts responders in flight; each waits until ``release`` or ``hold`` checkpoints."""

    def __init__(self, hold: int = 5) -> None:
        self.active = 0
        self.peak = 0
        self.total = 0
        self.hold = hold

    async def __call__(self, request: ModelRequest) -> str:
        self.active += 1
        self.total += 1
        self.peak = max(self.peak, self.active)
        try:
            for _ in range(self.hold):
                await anyio.sleep(0)
        finally:
            self.active -= 1
        return echo(request)


async def test_mapping_order_isolation_and_records(tmp_path: Path, meter_spy: Any) -> None:
    gauge = Gauge()
    names = ("a", "b", "c")
    lead, p = scripted_lead(
        {n: gauge for n in names},
        [definition(n) for n in names],
        tmp_path,
        system_prompt="PRIVATE lead prompt",
    )
    starts: list[Any] = []
    lead.hooks.add(HookEvent.SubagentStart, starts.append)
    lead.hooks.add(HookEvent.SubagentStop, starts.append)
    lead.chat.set_turns([])
    result = await lead.parallel_delegate({"a": "ta", "b": "tb", "c": "tc"}, max_active=2)
    assert gauge.peak == 2
    assert result.names == names
    assert result.statuses == ("completed",) * 3
    assert [r.response if r else None for r in result.results] == [
        "answer to ta",
        "answer to tb",
        "answer to tc",
    ]
    assert result.errors == (None, None, None)
    assert [o["answer"] for o in result.outcomes] == [
        "answer to ta",
        "answer to tb",
        "answer to tc",
    ]
    assert result.run.stop_reason == "complete"
    assert result.run.usage.requests == 3
    assert result.run.usage.input_tokens == 30
    assert lead.last_result is result.run
    assert list(lead.chat.get_turns()) == []
    for request in p.request_log:
        _name, req = request
        assert req.tools == ()
        assert len(req.turns) == 1
        assert "PRIVATE" not in (req.system_prompt or "")
        assert json.loads(req.turns[0].text)["format"] == "deputy_delegation_v1"
    records = lead.list_subagents()
    assert len(records) == 3
    assert {r.parent_run_id for r in records} == {result.run.run_id}
    assert len({r.agent_id for r in records}) == 3
    assert [r.delegation_id for r in records] == list(result.delegation_ids)
    assert all(r.tool_call_id is None for r in records)
    assert len(starts) == 6
    assert {h.run_id for h in starts} == {result.run.run_id}
    assert meter_spy.open_reservations() == 0


async def test_pairs_let_one_definition_take_many_tasks(tmp_path: Path) -> None:
    gauge = Gauge()
    lead, _ = scripted_lead({"w": gauge}, [definition("w")], tmp_path)
    tasks = [("w", f"t{i}") for i in range(12)] + [(" W ", "last")]
    result = await lead.parallel_delegate(tasks, max_active=4)
    assert gauge.peak == 4
    assert gauge.total == 13
    assert [r.response for r in result.results if r] == [f"answer to t{i}" for i in range(12)] + [
        "answer to last"
    ]
    assert result.names == ("w",) * 13
    assert len(set(result.delegation_ids)) == 13


class Gate(Gauge):
    """Holds every responder until ``target`` of them are in flight at once (or fails)."""

    def __init__(self, target: int) -> None:
        super().__init__()
        self.target = target
        self.full = anyio.Event()

    async def __call__(self, request: ModelRequest) -> str:
        self.active += 1
        self.total += 1
        self.peak = max(self.peak, self.active)
        if self.active >= self.target:
            self.full.set()
        try:
            with anyio.fail_after(10):
                await self.full.wait()
            await anyio.sleep(0)
        finally:
            self.active -= 1
        return echo(request)


@pytest.mark.parametrize("max_active", [1, 3, 7, 50])
async def test_max_active_is_respected_and_kept_busy(tmp_path: Path, max_active: int) -> None:
    gate = Gate(target=min(max_active, 20))
    lead, _ = scripted_lead({"w": gate}, [definition("w")], tmp_path)
    result = await lead.parallel_delegate([("w", str(i)) for i in range(20)], max_active=max_active)
    # the gate only opens once max_active responders are in flight together
    assert gate.peak == min(max_active, 20)
    assert gate.total == 20
    assert result.statuses == ("completed",) * 20


async def test_max_active_never_exceeded_under_churn(tmp_path: Path) -> None:
    gauge = Gauge(hold=7)
    lead, _ = scripted_lead({"w": gauge}, [definition("w")], tmp_path)
    result = await lead.parallel_delegate([("w", str(i)) for i in range(60)], max_active=5)
    assert 1 <= gauge.peak <= 5
    # the lead's default limits (25 requests) bound the batch
    assert gauge.total == 25
    assert result.run.stop_reason == "request_limit"
    # an unlimited batch needs an unlimited lead: batch limits can only tighten the lead's
    gauge = Gauge(hold=7)
    lead, _ = scripted_lead(
        {"w": gauge}, [definition("w")], tmp_path, usage_limits=UsageLimits(max_requests=None)
    )
    await lead.parallel_delegate(
        [("w", str(i)) for i in range(60)],
        max_active=5,
        usage_limits=UsageLimits(max_requests=None),
    )
    assert 1 <= gauge.peak <= 5
    assert gauge.total == 60


async def test_failed_responder_keeps_its_siblings(tmp_path: Path) -> None:
    def b(request: ModelRequest) -> str:
        raise ProviderError("b is down")

    lead, _ = scripted_lead(
        {"a": echo, "b": b, "c": echo}, [definition(n) for n in "abc"], tmp_path
    )
    result = await lead.parallel_delegate({"a": "1", "b": "2", "c": "3"})
    assert result.statuses == ("completed", "failed", "completed")
    assert result.results[0] is not None
    assert result.results[2] is not None
    assert "b is down" in (result.errors[1] or "")
    assert result.outcomes[1]["status"] == "failed"
    assert result.run.stop_reason == "delegation_error"
    # the next batch works normally
    again = await lead.parallel_delegate({"a": "x", "c": "y"})
    assert again.statuses == ("completed", "completed")


@pytest.mark.parametrize("error", [ProviderError, RuntimeError, ValueError])
@pytest.mark.parametrize("max_active", [1, 2])
async def test_failed_responder_fails_alone_when_its_siblings_wait_for_a_slot(
    tmp_path: Path, max_active: int, error: type[Exception]
) -> None:
    # With fewer slots than tasks, the failure settles before later tasks are dispatched:
    # they must still run, not stay not_started behind an "interrupted" batch.
    def b(request: ModelRequest) -> str:
        raise error("b is down")

    names = "abcde"
    lead, _ = scripted_lead(
        {"a": echo, "b": b, "c": echo, "d": echo, "e": echo},
        [definition(n) for n in names],
        tmp_path,
    )
    result = await lead.parallel_delegate([(n, f"task {n}") for n in names], max_active=max_active)
    assert result.statuses == ("completed", "failed", "completed", "completed", "completed")
    assert all(result.results[i] is not None for i in (0, 2, 3, 4))
    assert "b is down" in (result.errors[1] or "")
    assert result.run.stop_reason == "delegation_error"
    assert result.run.usage.requests == 5


async def test_validation_before_dispatch(tmp_path: Path) -> None:
    lead, p = scripted_lead(
        {"plain": echo, "tooled": echo, "mcp": echo},
        [
            definition("plain"),
            definition("tooled", tools=[make_tool("t")]),
            definition("mcp", mcp_servers=["srv"]),
        ],
        tmp_path,
    )
    with pytest.raises(DelegationBindingError, match="not stateless"):
        await lead.parallel_delegate({"plain": "x", "tooled": "y"})
    with pytest.raises(DelegationBindingError, match="not stateless"):
        await lead.parallel_delegate({"mcp": "y"})
    with pytest.raises(DefinitionError, match="Unknown AgentDefinitions: ghost"):
        await lead.parallel_delegate({"plain": "x", "ghost": "y"})
    with pytest.raises(ValueError, match="must not be empty"):
        await lead.parallel_delegate({})
    with pytest.raises(ValueError, match="max_active"):
        await lead.parallel_delegate({"plain": "x"}, max_active=0)
    with pytest.raises(TypeError, match="non-blank"):
        await lead.parallel_delegate({"plain": "  "})
    with pytest.raises(TypeError, match="pair"):
        await lead.parallel_delegate(["plain"])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        await lead.parallel_delegate("plain")  # type: ignore[arg-type]
    assert p.requests == 0
    assert lead.list_subagents() == []
    assert not lead.running


async def test_preparation_failure_raises_and_dispatches_nothing(tmp_path: Path) -> None:
    provider = ScriptedProvider({"a": echo, "b": echo, "c": echo})
    made: list[str] = []

    def chat_factory(d: Any, context: Any) -> Chat:
        made.append(d.name)
        if d.name == "c":
            raise RuntimeError("cannot build c's chat")
        return Chat(provider)

    lead, _ = scripted_lead(
        {},
        [definition(n) for n in "abc"],
        tmp_path,
        delegation_policy=DelegationPolicy(chat=chat_factory),
    )
    with pytest.raises(RuntimeError, match="cannot build c's chat"):
        await lead.parallel_delegate({"a": "1", "b": "2", "c": "3"})
    assert provider.requests == 0
    assert made == ["a", "b", "c"]
    assert [r.status for r in lead.list_subagents()] == ["not_started", "not_started", "failed"]
    assert lead.list_subagents()[2].stop_reason == "setup_error"
    assert not lead.running
    # the lead is reusable
    ok = await lead.parallel_delegate({"a": "again"})
    assert ok.statuses == ("completed",)


async def test_request_budget_stops_queued_work(tmp_path: Path) -> None:
    lead, _p = scripted_lead({n: echo for n in "abc"}, [definition(n) for n in "abc"], tmp_path)
    result = await lead.parallel_delegate(
        {"a": "1", "b": "2", "c": "3"}, max_active=1, usage_limits=UsageLimits(max_requests=2)
    )
    assert result.statuses == ("completed", "completed", "not_started")
    assert result.results[2] is None
    assert result.run.usage.requests == 2
    assert result.run.stop_reason == "request_limit"
    two = await lead.parallel_delegate(
        {"a": "1", "b": "2"}, usage_limits=UsageLimits(max_requests=2)
    )
    assert two.run.stop_reason == "complete"


async def test_request_slots_reserved_before_dispatch(tmp_path: Path) -> None:
    gauge = Gauge()
    lead, p = scripted_lead({n: gauge for n in "abc"}, [definition(n) for n in "abc"], tmp_path)
    starts: list[Any] = []
    lead.hooks.add(HookEvent.SubagentStart, starts.append)
    result = await lead.parallel_delegate(
        {"a": "1", "b": "2", "c": "3"}, max_active=3, usage_limits=UsageLimits(max_requests=2)
    )
    assert p.requests == 2
    assert result.statuses == ("completed", "completed", "not_started")
    assert result.results[2] is None
    assert len(starts) == 2
    assert result.run.stop_reason == "request_limit"


async def test_zero_budget(tmp_path: Path) -> None:
    lead, p = scripted_lead({"a": echo}, [definition("a")], tmp_path)
    result = await lead.parallel_delegate({"a": "1"}, usage_limits=UsageLimits(max_requests=0))
    assert result.statuses == ("not_started",)
    assert p.requests == 0
    with pytest.raises(RequestLimitExceeded):
        await lead.parallel_delegate(
            {"a": "1"}, usage_limits=UsageLimits(max_requests=0, on_exceed="error")
        )
    assert p.requests == 0
    assert not lead.running


async def test_responder_own_request_cap(tmp_path: Path) -> None:
    lead, p = scripted_lead(
        {"a": echo, "z": echo}, [definition("a"), definition("z", max_requests=0)], tmp_path
    )
    result = await lead.parallel_delegate({"a": "1", "z": "2"})
    assert result.statuses[0] == "completed"
    assert result.statuses[1] in ("stopped", "not_started")
    assert [name for name, _ in p.request_log] == ["a"]


async def test_token_ceiling_is_divided_among_active_responders(tmp_path: Path) -> None:
    gauge = Gauge()
    lead, _ = scripted_lead({"w": gauge}, [definition("w")], tmp_path)
    result = await lead.parallel_delegate(
        [("w", str(i)) for i in range(4)],
        max_active=4,
        usage_limits=UsageLimits(max_requests=10, max_total_tokens=100),
    )
    shares = [r.limits.max_total_tokens for r in lead.list_subagents()]  # type: ignore[union-attr]
    assert sum(s or 0 for s in shares) <= 100
    assert result.run.usage.total_tokens <= 100 + 15 * 4


async def test_run_active_is_rejected_both_ways(tmp_path: Path) -> None:
    entered = anyio.Event()
    release = anyio.Event()

    async def slow(request: ModelRequest) -> str:
        entered.set()
        await release.wait()
        return "done"

    lead, _ = scripted_lead({"a": slow, "lead": ["hi"]}, [definition("a")], tmp_path)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lead.parallel_delegate, {"a": "1"})
        await entered.wait()
        with pytest.raises(RunActiveError):
            await lead.run("go")
        with pytest.raises(RunActiveError):
            await lead.parallel_delegate({"a": "2"})
        release.set()
    assert not lead.running


async def test_interrupt_drains_the_batch(tmp_path: Path, meter_spy: Any) -> None:
    entered = anyio.Event()
    release = anyio.Event()
    n = 0

    async def slow(request: ModelRequest) -> str:
        nonlocal n
        n += 1
        if n == 2:
            entered.set()
        await release.wait()
        return "done"

    lead, p = scripted_lead({"w": slow}, [definition("w")], tmp_path)
    out: list[Any] = []

    async def batch() -> None:
        out.append(await lead.parallel_delegate([("w", str(i)) for i in range(5)], max_active=2))

    async with anyio.create_task_group() as tg:
        tg.start_soon(batch)
        await entered.wait()
        lead.interrupt("cancelled_by_host")
        release.set()
    [result] = out
    assert p.requests == 2
    assert result.statuses[2:] == ("not_started",) * 3
    assert result.run.stop_reason == "interrupted"
    assert not lead.running
    assert lead.delegations.active == {}
    assert meter_spy.open_reservations() == 0
    again = await lead.parallel_delegate([("w", "x")])
    assert again.statuses == ("completed",)


async def test_cancel_from_subagent_start(tmp_path: Path) -> None:
    stops: list[Any] = []
    lead, p = scripted_lead({"a": echo, "b": echo}, [definition("a"), definition("b")], tmp_path)
    lead.hooks.add(HookEvent.SubagentStart, lambda h: lead.interrupt("stop now"))
    lead.hooks.add(HookEvent.SubagentStop, stops.append)
    result = await lead.parallel_delegate({"a": "1", "b": "2"}, max_active=1)
    assert result.statuses == ("not_started", "not_started")
    assert [s.child_agent_name for s in stops] == ["a"]
    assert stops[0].status == "not_started"
    assert p.requests == 0
    # The interrupt's own text is the host's; the batch's stop reason is the typed one.
    assert result.run.stop_reason == "interrupted"


async def test_parallel_ignores_policy_resources(tmp_path: Path) -> None:
    factory = Cleanups(lambda: [make_tool("effect")])
    lead, p = scripted_lead(
        {"a": echo, "b": echo},
        [definition("a"), definition("b")],
        tmp_path,
        delegation_policy=DelegationPolicy("owned", resources=factory),
    )
    result = await lead.parallel_delegate({"a": "1", "b": "2"})
    assert result.statuses == ("completed", "completed")
    assert factory.made == []
    assert all(req.tools == () for _, req in p.request_log)


async def test_parallel_events_carry_delegation_ids(tmp_path: Path) -> None:
    events: list[Any] = []
    lead, _ = scripted_lead({"a": echo, "b": echo}, [definition("a"), definition("b")], tmp_path)
    result = await lead.parallel_delegate({"a": "1", "b": "2"}, on_event=events.append)
    for did in result.delegation_ids:
        mine = [e for e in events if e.delegation_id == did]
        assert isinstance(mine[0], DelegationStart)
        assert isinstance(mine[-1], DelegationEnd)
        assert all(e.parent_run_id == result.run.run_id for e in mine)


async def test_lead_conversation_untouched(tmp_path: Path) -> None:
    lead, _ = scripted_lead({"a": echo}, [definition("a")], tmp_path)
    from deputy_runtime.chat._types import ContentText

    history = (Turn("user", (ContentText("earlier"),)),)
    lead.chat.set_turns(history)
    await lead.parallel_delegate({"a": "1"})
    assert tuple(lead.chat.get_turns()) == history


async def test_host_cancelling_a_batch_settles_every_record(tmp_path: Path, meter_spy: Any) -> None:
    entered = anyio.Event()

    async def stuck(request: ModelRequest) -> str:
        entered.set()
        await anyio.sleep_forever()
        return "never"

    lead, _ = scripted_lead({"w": stuck}, [definition("w")], tmp_path)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lead.parallel_delegate, [("w", str(i)) for i in range(6)])
        await entered.wait()
        tg.cancel_scope.cancel()
    assert not lead.running
    assert meter_spy.open_reservations() == 0
    statuses = [r.status for r in lead.list_subagents()]
    assert "queued" not in statuses, statuses
    assert "running" not in statuses, statuses


async def test_no_responder_is_started_with_a_zero_token_share(tmp_path: Path) -> None:
    lead, p = scripted_lead({"w": echo}, [definition("w")], tmp_path)
    result = await lead.parallel_delegate(
        [("w", str(i)) for i in range(20)],
        max_active=8,
        usage_limits=UsageLimits(max_requests=None, max_total_tokens=5),
    )
    started = [r for r in lead.list_subagents() if r.started_at is not None]
    assert started
    assert all(r.limits is not None and (r.limits.max_total_tokens or 0) >= 1 for r in started)
    assert p.requests >= 1
    assert "stopped" not in result.statuses or p.requests == len(started)


async def test_an_interrupted_batch_does_not_interrupt_the_next_run(tmp_path: Path) -> None:
    lead, p = scripted_lead({"w": echo, "lead": ["fresh answer"]}, [definition("w")], tmp_path)
    lead.hooks.add(HookEvent.SubagentStart, lambda h: lead.interrupt("stop the batch"))
    result = await lead.parallel_delegate({"w": "1"})
    assert result.statuses == ("not_started",)
    after = await lead.run("a new question")
    assert after.stop_reason == "complete"
    assert after.response == "fresh answer"
    assert p.requests == 1


async def test_a_raising_event_sink_does_not_fail_responders(tmp_path: Path) -> None:
    def broken_sink(event: Any) -> None:
        if isinstance(event, DelegationStart):
            raise RuntimeError("sink broke")

    lead, p = scripted_lead({"a": echo, "b": echo}, [definition("a"), definition("b")], tmp_path)
    with pytest.raises(RuntimeError, match="sink broke"):
        await lead.parallel_delegate({"a": "1", "b": "2"}, on_event=broken_sink)
    assert p.requests == 2
    assert [r.status for r in lead.list_subagents()] == ["completed", "completed"]
    assert not lead.running


async def test_a_raising_event_sink_in_run_leaves_nothing_behind(tmp_path: Path) -> None:
    """The lead's run(on_event=) guards the sink: the child completes, the error comes
    after the run, and the exclusive lease is free."""
    from deputy_runtime.chat import reply
    from deputy_runtime.runtime import IN_PROCESS_LEASES
    from tests.runtime.helpers import delegate

    def broken_sink(event: Any) -> None:
        if isinstance(event, DelegationStart):
            raise RuntimeError("sink broke")

    lead, p = scripted_lead(
        {"lead": [delegate("w"), reply("ok")], "w": echo},
        [definition("w")],
        tmp_path,
        delegation_policy=DelegationPolicy("exclusive", resource_key="sink"),
    )
    with pytest.raises(RuntimeError, match="sink broke"):
        await lead.run("go", on_event=broken_sink)
    assert [r.status for r in lead.list_subagents()] == ["completed"]
    assert p.requests == 3
    assert IN_PROCESS_LEASES.held() == {}
    assert not lead.running
