"""InProcessLedger: one budget shared by the leads of a process.

The property test drives random interleavings of reservations and settlements (settling
no more than was granted, as the runtime's binding does) and checks the ledger never
hands out more than its limit; the lead tests run real leads on the offline test model
against one ledger and count the model requests the provider really answered.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deputy_runtime import (
    BudgetLedger,
    BudgetLedgerError,
    InProcessLedger,
    LeadAgent,
    StopReason,
    UsageLimits,
    agent_definition,
    chat,
)

pytestmark = pytest.mark.anyio


def test_it_is_a_budget_ledger() -> None:
    assert isinstance(InProcessLedger(requests=3), BudgetLedger)


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("requests", -1, "requests: expected a whole number of at least 0, got -1"),
        ("tool_calls", 1.5, "tool_calls: expected a whole number of at least 0, got 1.5"),
        ("requests", True, "requests: expected a whole number of at least 0, got True"),
        ("cost_usd", float("nan"), "cost_usd: expected a number of at least 0, got nan"),
        ("input_tokens", "10", "input_tokens: expected a whole number of at least 0, got '10'"),
    ],
)
def test_bad_limits_are_refused_by_name(field: str, value: Any, expected: str) -> None:
    with pytest.raises(ValueError, match=expected):
        InProcessLedger(**{field: value})


async def test_a_holder_settles_once_and_is_never_reused() -> None:
    ledger = InProcessLedger(requests=5)
    grant = await ledger.reserve("a", {"requests": 2})
    assert grant["requests"] == 2
    assert grant["tool_calls"] is None  # not limited
    assert await ledger.reserve("a", {"requests": 4}) == grant  # a retry takes nothing twice
    assert ledger.remaining()["requests"] == 3
    await ledger.settle("a", {"requests": 1})
    await ledger.settle("a", {"requests": 1})  # a second settle counts nothing
    assert ledger.used()["requests"] == 1
    assert ledger.remaining()["requests"] == 4
    with pytest.raises(BudgetLedgerError, match="'a': it was already settled"):
        await ledger.reserve("a", {"requests": 1})
    with pytest.raises(BudgetLedgerError, match="'b': it has no reservation"):
        await ledger.settle("b", {})
    with pytest.raises(ValueError, match="parties must be a whole number"):
        await ledger.reserve("c", {}, parties=0)


async def test_parties_split_what_is_left() -> None:
    ledger = InProcessLedger(requests=10, cost_usd=1.0)
    first = await ledger.reserve("a", {}, parties=3)
    second = await ledger.reserve("b", {}, parties=2)
    third = await ledger.reserve("c", {}, parties=1)
    assert [g["requests"] for g in (first, second, third)] == [4, 3, 3]
    assert ledger.spent() == ("requests", "cost_usd")


_OP = st.one_of(
    st.tuples(
        st.just("reserve"),
        st.integers(0, 7),  # holder
        st.one_of(st.none(), st.integers(0, 12)),  # requests wanted
        st.integers(1, 4),  # parties
    ),
    st.tuples(st.just("settle"), st.integers(0, 7), st.integers(0, 12), st.just(1)),
)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=60, deadline=None)
@given(limit=st.integers(0, 20), ops=st.lists(_OP, max_size=40))
def test_never_more_than_the_limit_is_granted(
    backend: str, limit: int, ops: list[tuple[str, int, int | None, int]]
) -> None:
    async def body() -> None:
        ledger = InProcessLedger(requests=limit)
        granted: dict[str, int] = {}
        settled: set[str] = set()
        for kind, number, amount, parties in ops:
            holder = f"h{number}"
            if kind == "reserve":
                if holder in settled:
                    with pytest.raises(BudgetLedgerError):
                        await ledger.reserve(holder, {"requests": amount}, parties=parties)
                    continue
                grant = await ledger.reserve(holder, {"requests": amount}, parties=parties)
                value = grant["requests"]
                assert isinstance(value, int)
                assert value >= 0
                if holder in granted:  # a retry returns the first grant, whatever it asks
                    assert granted[holder] == value
                    continue
                assert amount is None or value <= amount
                granted[holder] = value
            elif holder in granted and holder not in settled:
                # The runtime settles what its grant let it use, never more.
                await ledger.settle(holder, {"requests": min(amount or 0, granted[holder])})
                settled.add(holder)
            held = sum(v for h, v in granted.items() if h not in settled)
            used = ledger.used()["requests"]
            assert used + held <= limit
            assert ledger.remaining()["requests"] == limit - used - held

    anyio.run(body, backend=backend)


def _lead(ledger: InProcessLedger) -> LeadAgent:
    helper = agent_definition(
        name="helper", description="Helps.", prompt="You help.", max_requests=3
    )
    return LeadAgent(
        chat("test", system_prompt="You lead."),
        {"helper": helper},
        usage_limits=UsageLimits(max_requests=10),
        shared_budget=ledger,
    )


async def test_leads_in_one_process_share_its_budget() -> None:
    """Every lead run (the lead's two requests and the helper's one) is drawn from the
    ledger: a fresh budget runs the whole task, and runs go on until one is granted
    nothing, which stops at its request limit without sending anything."""
    ledger = InProcessLedger(requests=8)
    answered: list[int] = []
    stops: list[StopReason] = []
    while not answered or answered[-1] > 0:
        assert len(answered) < 8  # every run uses at least one request until it is spent
        lead = _lead(ledger)
        async with lead:
            result = await lead.run("do it")
        answered.append(result.usage.requests)
        stops.append(result.stop_reason)
    assert answered[0] == 3
    assert stops[0] is StopReason.COMPLETE
    assert stops[-1] is StopReason.REQUEST_LIMIT
    assert ledger.used()["requests"] == sum(answered) == 8
    assert ledger.spent() == ("requests",)


async def test_concurrent_leads_never_overdraw() -> None:
    ledger = InProcessLedger(requests=9)
    results: list[int] = []

    async def one() -> None:
        lead = _lead(ledger)
        async with lead:
            result = await lead.run("do it")
        results.append(result.usage.requests)

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(one)
    assert sum(results) == ledger.used()["requests"] <= 9
    assert ledger.remaining()["requests"] == 9 - sum(results)
