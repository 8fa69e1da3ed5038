"""Bounded stress tests of the delegation lifecycle.

1. Over 1,000 delegations from many concurrent leads with random failures, random
   cancellations (host cancel scopes and cooperative interrupts) and random exclusive keys
   finish with no leaked lease, no reservation left, every owned resource cleaned exactly
   once, and every lead's usage equal to its own plus the sum of its children's.
2. A fan-out of 200 delegations against a request budget of 50 never sends more than 50
   requests (counted at the provider), via ``parallel_delegate`` and via one lead turn.

Randomness is seeded; the seed is in the assertion messages.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import anyio
import pytest

from deputy_runtime import (
    Chat,
    DelegationPolicy,
    HookDecision,
    HookEvent,
    LeadAgent,
    ProviderError,
    UsageLimits,
)
from deputy_runtime.chat import ScriptedProvider, reply, tool_call, tool_calls
from deputy_runtime.chat._types import ModelRequest
from deputy_runtime.runtime import IN_PROCESS_LEASES, AgentResult
from tests.runtime.helpers import Cleanups, definition, make_tool, meter_spy

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

__all__ = ["meter_spy"]

TARGET_DELEGATIONS = 1000
LEADS_AT_ONCE = 12
PER_LEAD = 25
KEYS = ("k0", "k1", "k2")


class LeadStats:
    """What one lead's provider actually answered (counted just before each return)."""

    def __init__(self) -> None:
        self.lead_sent = 0
        self.lead_replies = 0
        self.lead_calls = 0
        self.child_sent = 0
        self.child_replies = 0
        self.child_tool_runs = 0


async def _one_lead(
    rng: random.Random, tmp_path: Path, factories: list[Cleanups], seed: int
) -> tuple[LeadAgent, LeadStats, AgentResult | None]:
    stats = LeadStats()
    kind = rng.choice(("shared", "exclusive", "owned"))
    scope = anyio.CancelScope()
    cancel_after = rng.randrange(1, 30) if rng.random() < 0.25 else None
    interrupt_after = rng.randrange(1, 30) if rng.random() < 0.1 else None
    issued = 0
    lead: LeadAgent

    async def noop() -> str:
        stats.child_tool_runs += 1
        if rng.random() < 0.3:
            await anyio.sleep(0)
        if rng.random() < 0.1:
            raise RuntimeError("tool broke")
        return "ok"

    def tools() -> list[Any]:
        from deputy_runtime import Tool

        return [Tool("noop", "noop", {"type": "object", "properties": {}}, noop, read_only=True)]

    async def lead_turn(request: ModelRequest) -> Any:
        nonlocal issued
        stats.lead_sent += 1
        await anyio.sleep(0)
        if issued >= PER_LEAD:
            stats.lead_replies += 1
            return "all delegated"
        k = min(rng.randint(1, 4), PER_LEAD - issued)
        issued += k
        names = [rng.choice(("worker", "worker", "helper")) for _ in range(k)]
        stats.lead_replies += 1
        stats.lead_calls += k
        return tool_calls(
            *[("delegate_to_agent", {"agent_name": n, "task": f"task {issued}"}) for n in names]
        )

    async def child(request: ModelRequest) -> Any:
        stats.child_sent += 1
        done = stats.child_replies
        if cancel_after is not None and done >= cancel_after:
            scope.cancel()
        if interrupt_after is not None and done >= interrupt_after:
            lead.interrupt("stress interrupt")
        roll = rng.random()
        for _ in range(rng.randrange(0, 4)):
            await anyio.sleep(0)
        if roll < 0.10:
            raise ProviderError("random provider failure")
        if roll < 0.14:
            raise RuntimeError("random crash")
        stats.child_replies += 1
        if roll < 0.45 and len(request.turns) < 5:
            return tool_call("noop", {})
        return reply("child answer")

    provider = ScriptedProvider({"lead": lead_turn, "worker": child, "helper": child})
    if kind == "owned":
        factory = Cleanups(tools, async_cleanup=rng.random() < 0.5)
        factories.append(factory)
        policy = DelegationPolicy("owned", resources=factory)
        defs = [definition("worker", max_requests=3), definition("helper", max_requests=2)]
    else:
        policy = (
            DelegationPolicy("exclusive", resource_key=rng.choice(KEYS))
            if kind == "exclusive"
            else DelegationPolicy()
        )
        shared = tools()
        defs = [
            definition("worker", tools=shared, max_requests=3),
            definition("helper", tools=shared, max_requests=2),
        ]
    limits = (
        UsageLimits(max_requests=None)
        if rng.random() < 0.7
        else UsageLimits(max_requests=rng.randrange(5, 60))
    )
    lead = LeadAgent(
        Chat(provider),
        defs,
        working_dir=tmp_path,
        delegation_policy=policy,
        usage_limits=limits,
    )
    _random_hooks(rng, lead)
    result: AgentResult | None = None
    with scope:
        result = await lead.run(f"stress {seed}")
    return lead, stats, result


def _random_hooks(rng: random.Random, lead: LeadAgent) -> None:
    """Hooks that yield, fail, deny, and interrupt children at random."""

    async def on_start(h: Any) -> None:
        for _ in range(rng.randrange(0, 3)):
            await anyio.sleep(0)
        if rng.random() < 0.03:
            raise RuntimeError("start hook failed")
        if rng.random() < 0.03 and lead.delegations.active:
            lead.interrupt_subagent(rng.choice(list(lead.delegations.active)))

    async def on_stop(h: Any) -> None:
        await anyio.sleep(0)
        if rng.random() < 0.03:
            raise RuntimeError("stop hook failed")

    def pre_tool(h: Any) -> HookDecision | None:
        if h.delegation_id is None:
            return None
        roll = rng.random()
        if roll < 0.05:
            return HookDecision.deny("random veto")
        if roll < 0.08:
            raise RuntimeError("pre hook failed")
        return None

    lead.hooks.add(HookEvent.SubagentStart, on_start)
    lead.hooks.add(HookEvent.SubagentStop, on_stop)
    lead.hooks.add(HookEvent.PreToolUse, pre_tool)


def _check_lead(lead: LeadAgent, stats: LeadStats, seed: int) -> None:
    usage = lead.last_result.usage if lead.last_result else None
    assert usage is not None, seed
    records = lead.list_subagents()
    child_requests = sum(r.usage.requests for r in records)
    child_tool_calls = sum(r.usage.tool_calls for r in records)
    child_input = sum(r.usage.input_tokens for r in records)
    child_output = sum(r.usage.output_tokens for r in records)
    # usage is the lead's own plus the sum of its children's, exactly; every request sent
    # counts (also one that failed or was cancelled), tokens only for answers
    assert usage.requests == stats.lead_sent + child_requests, seed
    assert usage.input_tokens == 10 * stats.lead_replies + child_input, seed
    assert usage.output_tokens == 5 * stats.lead_replies + child_output, seed
    assert usage.tool_calls == stats.lead_calls + child_tool_calls, seed
    assert child_requests == stats.child_sent, seed
    assert child_input == 10 * stats.child_replies, seed
    assert child_output == 5 * stats.child_replies, seed
    for r in records:
        assert r.status in ("completed", "stopped", "failed", "not_started"), (seed, r)
        assert r.completed_at is not None, (seed, r)
        assert r.usage.input_tokens <= 10 * r.usage.requests, (seed, r)


async def test_thousand_random_delegations_leave_nothing_behind(
    tmp_path: Path, meter_spy: Any
) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    factories: list[Cleanups] = []
    finished: list[tuple[LeadAgent, LeadStats]] = []
    admitted = 0
    rounds = 0
    # Only a hang guard: a thousand delegations take seconds, far longer on a loaded machine.
    with anyio.fail_after(600):
        while admitted < TARGET_DELEGATIONS:
            rounds += 1
            batch: list[tuple[LeadAgent, LeadStats]] = []

            async def run_one(sub_seed: int, out: list[tuple[LeadAgent, LeadStats]]) -> None:
                lead, stats, _ = await _one_lead(random.Random(sub_seed), tmp_path, factories, seed)
                out.append((lead, stats))

            async with anyio.create_task_group() as tg:
                for _ in range(LEADS_AT_ONCE):
                    tg.start_soon(run_one, rng.randrange(2**32), batch)
            finished.extend(batch)
            admitted = sum(len(lead.list_subagents()) for lead, _ in finished)
    assert admitted >= TARGET_DELEGATIONS
    print(f"seed {seed}: {admitted} delegations from {len(finished)} leads in {rounds} rounds")
    assert IN_PROCESS_LEASES.held() == {}, (seed, IN_PROCESS_LEASES.held())
    assert meter_spy.open_reservations() == 0, seed
    for factory in factories:
        factory.assert_exactly_once()
    for lead, stats in finished:
        _check_lead(lead, stats, seed)
        assert lead.delegations.active == {}, seed
        assert not lead.running, seed
    statuses = [r.status for lead, _ in finished for r in lead.list_subagents()]
    # the run really exercised every path
    assert {"completed", "failed", "stopped"} <= set(statuses), (seed, set(statuses))
    busy = [
        r
        for lead, _ in finished
        for r in lead.list_subagents()
        if r.error is not None and "busy" in r.error
    ]
    assert busy, f"seed {seed}: no exclusive contention happened"
    cleaned = sum(len(f.cleaned) for f in factories)
    assert cleaned > 0, seed


# -- fan-out against a request budget -----------------------------------------------------------


class Counting:
    """A responder that counts requests and yields to the scheduler a few times."""

    def __init__(self, tool_first: bool = False) -> None:
        self.requests = 0
        self.tool_first = tool_first

    async def __call__(self, request: ModelRequest) -> Any:
        self.requests += 1
        await anyio.sleep(0)
        await anyio.sleep(0)
        if self.tool_first and len(request.turns) == 1:
            return tool_call("noop", {})
        return "answer"


@pytest.mark.parametrize("max_active", [200, 16])
async def test_parallel_fan_out_of_200_never_exceeds_50_requests(
    tmp_path: Path, max_active: int, meter_spy: Any
) -> None:
    counting = Counting()
    provider = ScriptedProvider({"w": counting})
    lead = LeadAgent(Chat(provider), [definition("w")], working_dir=tmp_path)
    result = await lead.parallel_delegate(
        [("w", f"t{i}") for i in range(200)],
        max_active=max_active,
        usage_limits=UsageLimits(max_requests=50),
    )
    assert provider.requests <= 50
    assert counting.requests == provider.requests
    assert result.run.usage.requests == provider.requests
    assert result.statuses.count("completed") == provider.requests
    assert len(result.statuses) == 200
    assert meter_spy.open_reservations() == 0


@pytest.mark.parametrize("child_cap", [1, 2, None])
async def test_one_lead_turn_with_200_delegations_never_exceeds_50_requests(
    tmp_path: Path, child_cap: int | None, meter_spy: Any
) -> None:
    counting = Counting(tool_first=True)
    provider = ScriptedProvider(
        {
            "lead": [
                tool_calls(
                    *[
                        ("delegate_to_agent", {"agent_name": "w", "task": f"t{i}"})
                        for i in range(200)
                    ]
                ),
                reply("done"),
            ],
            "w": counting,
        }
    )
    noop = make_tool("noop", read_only=True)
    lead = LeadAgent(
        Chat(provider),
        [definition("w", tools=[noop], max_requests=child_cap)],
        working_dir=tmp_path,
        usage_limits=UsageLimits(max_requests=50),
    )
    result = await lead.run("fan out")
    assert provider.requests <= 50
    assert result.usage.requests == provider.requests
    assert len(lead.list_subagents()) == 200
    assert meter_spy.open_reservations() == 0
    # 49 left: the lead keeps one; 48 of the 200 get one request each (ceil(48 / 200)),
    # the rest nothing, and nobody can top up past what is left. The lead concludes.
    granted = [r.limits.max_requests or 0 for r in lead.list_subagents() if r.limits]
    assert sorted(granted, reverse=True)[:49] == [1] * 48 + [0]
    assert sum(1 for r in lead.list_subagents() if r.started_at is not None) == 48
    assert result.stop_reason == "complete"
    assert provider.requests == 50


@pytest.mark.parametrize("via", ["parallel_delegate", "lead_turn"])
async def test_fan_out_with_failing_responders_never_exceeds_50_requests(
    tmp_path: Path, via: str
) -> None:
    async def failing(request: ModelRequest) -> Any:
        await anyio.sleep(0)
        raise ProviderError("overloaded")

    provider = ScriptedProvider(
        {
            "lead": [
                tool_calls(
                    *[
                        ("delegate_to_agent", {"agent_name": "w", "task": f"t{i}"})
                        for i in range(200)
                    ]
                ),
                reply("done"),
            ],
            "w": failing,
        }
    )
    lead = LeadAgent(
        Chat(provider),
        [definition("w", max_requests=1)],
        working_dir=tmp_path,
        usage_limits=UsageLimits(max_requests=50),
    )
    if via == "parallel_delegate":
        await lead.parallel_delegate([("w", f"t{i}") for i in range(200)], max_active=16)
    else:
        await lead.run("fan out")
    assert provider.requests <= 50, f"{provider.requests} requests against a budget of 50"
