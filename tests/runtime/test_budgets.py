"""Budgets across delegations.

Child limits are fair shares of the lead's remaining run budget minus live reservations
(the lead keeps one request; the turn's delegations split the rest, the lead counting as
one more party for tool calls, tokens and cost; worked on deputy's numbers, directly on
the Meter and end to end), actual usage is added at settlement, the lead stops when a
limit is reached and cannot start another delegation, and concurrent siblings can never
together exceed the lead's limits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deputy_runtime import (
    AgentResult,
    ProviderError,
    RequestLimitExceeded,
    UsageLimits,
)
from deputy_runtime.chat import reply, tool_call, tool_calls
from deputy_runtime.chat._types import ModelRequest, Usage
from deputy_runtime.runtime._usage import AgentUsage, Meter, fair_share
from tests.runtime.helpers import (
    definition,
    delegate,
    delegate_many,
    delegate_results,
    make_tool,
    meter_spy,
    outcome,
    scripted_lead,
)

pytestmark = pytest.mark.anyio

__all__ = ["meter_spy"]

DEPUTY_LIMITS = UsageLimits(
    max_requests=6, max_tool_calls=4, max_total_tokens=700, max_cost_usd=0.30
)


def _quad(limits: UsageLimits | None) -> tuple[Any, ...]:
    assert limits is not None
    return (
        limits.max_requests,
        limits.max_tool_calls,
        limits.max_total_tokens,
        None if limits.max_cost_usd is None else round(limits.max_cost_usd, 9),
    )


# -- the worked example on the Meter ------------------------------------------------------------


def test_deputy_worked_example_on_the_meter() -> None:
    meter = Meter(DEPUTY_LIMITS)
    meter.add_external(
        AgentUsage(requests=2, tool_calls=1, input_tokens=100, output_tokens=50, cost_usd=0.10)
    )
    # Left: 4 requests, 3 tool calls, 550 tokens, 0.20. Two delegations in this turn.
    meter.expect(2)
    child = meter.reserve_child(3)
    # ceil((4 - 1) / 2) requests; ceil(3 / 3) tool calls; 550 // 3 tokens; 0.20 / 3.
    assert _quad(child.limits) == (2, 1, 183, 0.066666667)
    sibling = meter.reserve_child(3)
    # ceil((2 - 1) / 1); ceil(2 / 2); 367 // 2; 0.1333 / 2: both can run.
    assert _quad(sibling.limits) == (1, 1, 183, 0.066666667)
    # The lead keeps 1 request, 1 tool call, 184 tokens and a third of the cost.
    assert meter.remaining("max_requests") == 1
    assert meter.remaining("max_total_tokens") == 184
    meter.release(sibling)
    meter.release(child)
    meter.release(child)  # a second release does nothing
    assert not meter.reservations
    again = meter.reserve_child(3)  # alone: all but the lead's request and its share
    assert _quad(again.limits) == (3, 2, 275, 0.10)
    assert again.limits.on_exceed == "stop"
    meter.release(again)
    # Settlement adds actual usage: 3 of 6 does not stop the lead, 6 of 6 does.
    meter.add_external(AgentUsage(requests=1))
    assert meter.exceeded(reaching=True) is None
    meter.add_external(AgentUsage(requests=3))
    assert meter.exceeded(reaching=True) == "request_limit"


def test_unset_limits_stay_unset_and_definition_caps_requests() -> None:
    meter = Meter(UsageLimits(max_requests=None))
    assert meter.reserve_child(None).limits == UsageLimits(max_requests=None)
    assert meter.reserve_child(2).limits.max_requests == 2
    capped = Meter(UsageLimits(max_requests=10)).reserve_child(None)
    assert capped.limits.max_requests == 9  # the lead keeps one for itself


def test_reservations_never_exceed_the_limit_whatever_the_order() -> None:
    meter = Meter(UsageLimits(max_requests=20, max_total_tokens=1000, max_cost_usd=1.0))
    meter.add_external(AgentUsage(requests=3, input_tokens=100, cost_usd=0.25))
    meter.expect(6)
    held = [meter.reserve_child(cap) for cap in (5, None, 4, 2, None, 7)]
    # 17 left: the lead keeps 1 and the six split 16 (3, 3, 3, 2 by its cap, 3, 2).
    assert [r.limits.max_requests for r in held] == [3, 3, 3, 2, 3, 2]
    tokens = [r.limits.max_total_tokens or 0 for r in held]
    assert sum(tokens) <= 900
    assert min(tokens) >= 900 // 7
    assert sum(r.limits.max_cost_usd or 0 for r in held) == pytest.approx(0.75 * 6 / 7)
    assert all((r.limits.max_requests or 0) >= 0 for r in held)
    assert all((r.limits.max_total_tokens or 0) >= 0 for r in held)


# -- end to end ---------------------------------------------------------------------------------


async def test_worked_example_end_to_end_single_delegation(tmp_path: Path) -> None:
    # The lead's first response reports 2 requests, 150 tokens and 0.10 cost, and asks for
    # one delegation (its 1 tool call): exactly deputy's "usage so far".
    lead, _ = scripted_lead(
        {
            "lead": [
                tool_call(
                    "delegate_to_agent",
                    {"agent_name": "worker", "task": "t"},
                    usage=Usage(requests=2, input_tokens=100, output_tokens=50, cost_usd=0.10),
                ),
                reply("ok", usage=Usage(requests=1, input_tokens=1, cost_usd=0.0)),
            ],
            "worker": ["done"],
        },
        [definition("worker", max_requests=3)],
        tmp_path,
        usage_limits=DEPUTY_LIMITS,
    )
    await lead.run("go")
    [record] = lead.list_subagents()
    # Left 4 / 3 / 550 / 0.20: all requests but the lead's own next one, half the rest.
    assert _quad(record.limits) == (3, 2, 275, 0.10)


@pytest.mark.parametrize("max_tool_calls", [4, 5])
async def test_worked_example_end_to_end_concurrent_sibling(
    tmp_path: Path, max_tool_calls: int
) -> None:
    """Two delegations in one lead turn share what is left, and both run at once.

    Our tool-call limit is exact, so both delegate calls of the turn are counted before
    either reserves. Left: 4 requests, 550 tokens, 0.20; the lead keeps one request and a
    third of the rest, so one gets 2 requests and the other 1, each 183 tokens and
    0.0667, and one tool call each (ceil of what is left over the parties).
    """
    asked: list[str] = []

    async def child(request: ModelRequest) -> str:
        asked.append(request.turns[0].text)
        with anyio.fail_after(10):
            # Hold the reservation until the sibling runs too: both are granted a share.
            while len(asked) < 2:
                await anyio.sleep(0)
        return "done"

    lead, p = scripted_lead(
        {
            "lead": [
                tool_calls(
                    ("delegate_to_agent", {"agent_name": "worker", "task": "first"}),
                    ("delegate_to_agent", {"agent_name": "sibling", "task": "second"}),
                    usage=Usage(requests=2, input_tokens=100, output_tokens=50, cost_usd=0.10),
                ),
                reply("ok"),
            ],
            "worker": child,
            "sibling": child,
        },
        [definition("worker", max_requests=3), definition("sibling", max_requests=3)],
        tmp_path,
        usage_limits=UsageLimits(
            max_requests=6,
            max_tool_calls=max_tool_calls,
            max_total_tokens=700,
            max_cost_usd=0.30,
        ),
    )
    result = await lead.run("go")
    records = sorted(lead.list_subagents(), key=lambda r: _quad(r.limits))
    second, first = records
    assert _quad(first.limits) == (2, 1, 183, 0.066666667)
    assert _quad(second.limits) == (1, 1, 183, 0.066666667)
    assert [r.status for r in records] == ["completed", "completed"]
    assert len(asked) == 2
    # Lead: 2 + 1 + 1 (the children) + 1 (its final answer, the request it kept).
    assert result.stop_reason == "complete"
    assert result.usage.requests == 5
    assert p.requests == 4  # 2 lead requests (the first reported as 2) + 2 children


async def test_child_usage_stops_the_lead_when_it_reaches_the_limit(tmp_path: Path) -> None:
    noop = make_tool("noop", read_only=True)
    lead, p = scripted_lead(
        {
            "lead": [
                tool_call(
                    "delegate_to_agent",
                    {"agent_name": "one", "task": "a"},
                    usage=Usage(requests=2, input_tokens=1),
                ),
                delegate("three", "b"),
                reply("the request the lead kept"),
            ],
            "one": ["done"],
            "three": [tool_call("noop", {}), tool_call("noop", {}), "never sent"],
        },
        [definition("one", max_requests=3), definition("three", tools=[noop], max_requests=3)],
        tmp_path,
        usage_limits=UsageLimits(max_requests=7),
    )
    result = await lead.run("go")
    # 2 (lead) + 1 (one) = 3 of 7: the lead goes on; + 1 (lead) = 4, and "three" gets
    # 2 of the 3 left (the lead keeps one): it stops at its share, nothing left to top
    # up from, and the lead still makes its final request: 7 of 7.
    three = next(r for r in lead.list_subagents() if r.agent_name == "three")
    assert (three.status, three.stop_reason) == ("stopped", "request_limit")
    assert three.usage.requests == 2
    assert result.stop_reason == "complete"
    assert result.usage.requests == 7
    assert len(p.requests_for("lead")) == 3
    assert p.remaining("three") == 1


async def test_lead_that_reached_a_limit_cannot_start_a_delegation(tmp_path: Path) -> None:
    lead, p = scripted_lead(
        {"lead": [delegate("worker"), reply("never")], "worker": ["never"]},
        [definition("worker")],
        tmp_path,
        usage_limits=UsageLimits(max_requests=1),
    )
    result = await lead.run("go")
    assert result.stop_reason == "request_limit"
    assert lead.list_subagents() == []
    assert p.requests_for("worker") == []
    [res] = [r for r in result.turns[-1].contents]
    assert "Run limit reached for request_limit" in (res.error or "")  # type: ignore[union-attr]


async def test_definition_cap_without_a_lead_cap(tmp_path: Path) -> None:
    noop = make_tool("noop", read_only=True)
    lead, p = scripted_lead(
        {
            "lead": [delegate("worker"), reply("ok")],
            "worker": [tool_call("noop", {}), tool_call("noop", {}), "third"],
        },
        [definition("worker", tools=[noop], max_requests=2)],
        tmp_path,
        usage_limits=UsageLimits(max_requests=None),
    )
    await lead.run("go")
    [record] = lead.list_subagents()
    assert (record.status, record.stop_reason) == ("stopped", "request_limit")
    assert len(p.requests_for("worker")) == 2
    assert record.usage.requests == 2
    assert outcome(delegate_results(p)[0])["stop_reason"] == "request_limit"


async def test_max_requests_zero_child_sends_nothing(tmp_path: Path) -> None:
    lead, p = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": ["never"]},
        [definition("worker", max_requests=0)],
        tmp_path,
    )
    await lead.run("go")
    [record] = lead.list_subagents()
    assert (record.status, record.stop_reason) == ("not_started", "request_limit")
    assert record.started_at is None
    assert p.requests_for("worker") == []


async def test_usage_aggregation(tmp_path: Path) -> None:
    noop = make_tool("noop", read_only=True)
    lead, _ = scripted_lead(
        {
            "lead": [delegate("worker"), reply("ok")],
            "worker": [tool_call("noop", {}), tool_call("noop", {}), "done"],
        },
        [definition("worker", tools=[noop])],
        tmp_path,
    )
    result = await lead.run("go")
    [record] = lead.list_subagents()
    [child] = lead.get_subagent_results()
    assert child is not None
    assert record.usage.requests == child.usage.requests == 3
    assert result.usage.requests == 5
    assert result.usage.input_tokens == 2 * 10 + 3 * 10
    assert result.usage.output_tokens == 2 * 5 + 3 * 5


async def test_concurrent_siblings_share_one_budget(tmp_path: Path, meter_spy: Any) -> None:
    """Four requests left, two uncapped children in one turn: the lead keeps one, the
    two split the other three, and neither can top up past what is left."""
    in_flight = anyio.Event()

    async def worker(request: ModelRequest) -> Any:
        in_flight.set()
        await anyio.sleep(0)
        if len(request.turns) < 5:
            return tool_call("noop", {})
        return "done"

    noop = make_tool("noop", read_only=True)
    lead, p = scripted_lead(
        {"lead": [delegate_many(("worker", "a"), ("worker", "b")), reply("ok")], "worker": worker},
        [definition("worker", tools=[noop])],
        tmp_path,
        usage_limits=UsageLimits(max_requests=5),
    )
    result = await lead.run("go")
    limits = sorted(r.limits.max_requests or 0 for r in lead.list_subagents())  # type: ignore[union-attr]
    assert limits == [1, 2]
    assert len(p.requests_for("worker")) == 3
    assert result.stop_reason == "complete"  # the request it kept
    assert result.usage.requests == 5
    assert meter_spy.open_reservations() == 0


async def test_lead_on_exceed_error_raises_after_child_usage(tmp_path: Path) -> None:
    lead, _p = scripted_lead(
        {
            "lead": [delegate("worker"), delegate("worker"), reply("never")],
            "worker": [tool_call("noop", {}), "done"],
        },
        [definition("worker", tools=[make_tool("noop", read_only=True)])],
        tmp_path,
        usage_limits=UsageLimits(max_requests=3, on_exceed="error"),
    )
    with pytest.raises(RequestLimitExceeded) as raised:
        await lead.run("go")
    assert isinstance(raised.value.result, AgentResult)
    assert raised.value.result.usage.requests == 3
    [record] = lead.list_subagents()
    # the child's share (1 of the 2 left) stops it cleanly; only the lead raises, after
    # its second request, when the second delegation cannot start
    assert record.limits is not None
    assert record.limits.on_exceed == "stop"
    assert (record.status, record.stop_reason) == ("stopped", "request_limit")


async def test_token_budget_overshoot_is_bounded(tmp_path: Path) -> None:
    """Token limits are checked after each response: at most one response over."""
    big = Usage(requests=1, input_tokens=40, output_tokens=20)
    noop = make_tool("noop", read_only=True)

    def worker(request: ModelRequest) -> Any:
        return tool_call("noop", {}, usage=big)

    lead, p = scripted_lead(
        {"lead": [delegate("worker"), reply("x")], "worker": worker},
        [definition("worker", tools=[noop])],
        tmp_path,
        usage_limits=UsageLimits(max_requests=50, max_total_tokens=200),
    )
    result = await lead.run("go")
    [record] = lead.list_subagents()
    assert record.stop_reason == "total_token_limit"
    assert record.limits is not None
    # Its share of the 185 left is 92; at 120 a top-up would add 28 to cover the overrun
    # and a share of 32 beyond it, less than one of its 60-token responses: none is
    # granted, so the lead keeps enough to conclude.
    assert record.limits.max_total_tokens == 185 // 2
    assert record.usage.total_tokens == 120
    assert result.stop_reason == "complete"
    assert len(p.requests_for("lead")) == 2


async def test_a_delegation_past_its_share_tops_up_from_what_the_lead_has_left(
    tmp_path: Path,
) -> None:
    """One uncapped child needs 8 responses of 15 tokens: more than its share of 92."""
    noop = make_tool("noop", read_only=True)

    def worker(request: ModelRequest) -> Any:
        return tool_call("noop", {}) if len(request.turns) < 15 else "done"

    lead, p = scripted_lead(
        {"lead": [delegate("worker"), reply("x")], "worker": worker},
        [definition("worker", tools=[noop])],
        tmp_path,
        usage_limits=UsageLimits(max_requests=50, max_total_tokens=200),
    )
    result = await lead.run("go")
    [record] = lead.list_subagents()
    assert record.status == "completed"
    assert record.usage.total_tokens == 8 * 15
    assert record.limits is not None
    assert record.limits.max_total_tokens is not None
    assert 185 // 2 < record.limits.max_total_tokens <= 185
    # The lead concludes within one response of the limit.
    assert result.stop_reason == "complete"
    assert result.usage.total_tokens == 15 + 8 * 15 + 15
    assert len(p.requests_for("lead")) == 2


@pytest.mark.parametrize("how", ["success", "failure", "interrupt"])
async def test_no_reservation_left_after_settlement(
    tmp_path: Path, how: str, meter_spy: Any
) -> None:
    async def worker(request: ModelRequest) -> str:
        if how == "failure":
            raise ProviderError("down")
        if how == "interrupt":
            lead.interrupt()
        return "done"

    lead, _ = scripted_lead(
        {"lead": [delegate_many(("worker", "a"), ("worker", "b")), reply("ok")], "worker": worker},
        [definition("worker", max_requests=2)],
        tmp_path,
    )
    await lead.run("go")
    # both reserve before either runs; an interrupt during the child that runs first
    # stops the other before it starts
    records = lead.list_subagents()
    assert len(records) == 2
    if how == "interrupt":
        assert sorted(r.status for r in records) == ["completed", "not_started"]
    assert meter_spy.strong  # the spy saw the run meters
    assert meter_spy.open_reservations() == 0


async def test_failed_requests_count_against_the_budget(tmp_path: Path) -> None:
    def worker(request: ModelRequest) -> Any:
        raise ProviderError("provider down")

    lead, p = scripted_lead(
        {
            "lead": [
                tool_calls(
                    *[
                        ("delegate_to_agent", {"agent_name": "worker", "task": f"t{i}"})
                        for i in range(20)
                    ]
                ),
                reply("ok"),
            ],
            "worker": worker,
        },
        [definition("worker", max_requests=1)],
        tmp_path,
        usage_limits=UsageLimits(max_requests=5),
    )
    result = await lead.run("go")
    assert p.requests <= 5, f"{p.requests} provider requests against a budget of 5"
    assert result.usage.requests == p.requests


# -- property: reservations and usage never add up to more than the limits --------------------


_FIELDS = ("max_requests", "max_tool_calls", "max_total_tokens", "max_cost_usd")

_ops = st.lists(
    st.one_of(
        st.tuples(st.just("reserve"), st.one_of(st.none(), st.integers(0, 8))),
        st.tuples(st.just("expect"), st.integers(0, 6)),
        st.tuples(st.just("release"), st.integers(0, 50)),
        st.tuples(st.just("top_up"), st.tuples(st.integers(0, 50), st.sampled_from(_FIELDS))),
        st.tuples(
            st.just("use"),
            st.tuples(
                st.integers(0, 3),
                st.integers(0, 3),
                st.integers(0, 120),
                st.floats(0, 0.15, allow_nan=False),
            ),
        ),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(
    limits=st.tuples(
        st.one_of(st.none(), st.integers(0, 30)),
        st.one_of(st.none(), st.integers(0, 20)),
        st.one_of(st.none(), st.integers(0, 2000)),
        st.one_of(st.none(), st.floats(0, 2, allow_nan=False)),
    ),
    ops=_ops,
)
def test_meter_never_grants_more_than_is_left(limits: tuple[Any, ...], ops: list[Any]) -> None:
    """Whatever the order of reservations, top-ups, releases and usage: every grant is
    exactly the fair share of what is left, and what is held never passes a limit."""
    lim = UsageLimits(
        max_requests=limits[0],
        max_tool_calls=limits[1],
        max_total_tokens=limits[2],
        max_cost_usd=limits[3],
    )
    meter = Meter(lim)
    held: list[Any] = []
    for op, arg in ops:
        if op == "expect":
            meter.expect(arg)
        elif op == "reserve":
            parties = max(1, meter.expected)
            left = {f: meter.remaining(f) for f in _FIELDS}
            r = meter.reserve_child(arg)
            held.append(r)
            assert meter.expected == max(0, parties - 1) or parties == 1
            for field in _FIELDS:
                if getattr(lim, field) is None:
                    assert field == "max_requests" or getattr(r.limits, field) is None
                    continue
                value = getattr(r.limits, field)
                assert value is not None
                assert value >= 0
                before = left[field]
                assert before is not None
                share = fair_share(field, before, parties)
                if field == "max_requests" and arg is not None:
                    share = min(share, arg)
                assert value == pytest.approx(share, abs=1e-9), (field, value, before)
                assert value <= before + 1e-9
            if arg is not None and r.limits.max_requests is not None:
                assert r.limits.max_requests <= arg
        elif op == "top_up" and held:
            index, field = arg
            r = held[index % len(held)]
            before_limit = getattr(r.limits, field)
            remaining = meter.remaining(field)
            grant = meter.top_up(r, field)
            assert grant >= 0
            if grant:
                assert not r.released
                assert remaining is not None
                assert grant <= remaining + 1e-9
                assert getattr(r.limits, field) == pytest.approx(before_limit + grant)
                if field == "max_requests":
                    assert remaining - grant >= 1  # the lead keeps its own next request
                    if r.cap is not None:
                        assert r.limits.max_requests <= r.cap
            else:
                assert getattr(r.limits, field) == before_limit
        elif op == "release" and held:
            meter.release(held[arg % len(held)])
        elif op == "use":
            requests, tools, tokens, cost = arg
            meter.add_external(
                AgentUsage(requests=requests, tool_calls=tools, input_tokens=tokens, cost_usd=cost)
            )
        # What live reservations hold is what the meter says they hold, and never more
        # than the limit leaves after usage.
        for field in _FIELDS:
            limit = getattr(lim, field)
            if limit is None:
                continue
            holding = sum(getattr(h.limits, field) or 0 for h in held if not h.released)
            assert meter.reserved is None or meter.reserved[field] == pytest.approx(holding)
    for r in held:
        meter.release(r)
    assert not meter.reservations
    # with nothing held, a new child alone gets its share of exactly what is left
    meter.expect(0)
    fresh = meter.reserve_child(None)
    if lim.max_total_tokens is not None:
        tokens_left = max(0, lim.max_total_tokens - meter.input_tokens - meter.output_tokens)
        assert fresh.limits.max_total_tokens == tokens_left // 2
    if lim.max_cost_usd is not None:
        assert fresh.limits.max_cost_usd == pytest.approx(
            max(0.0, lim.max_cost_usd - meter.cost_usd) / 2, abs=1e-9
        )
