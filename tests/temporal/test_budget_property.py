"""Property tests of the workflow-side budget: whatever order delegations are admitted
and settled in, what is used plus what running children hold never passes the lead's
limit (the rule that keeps parallel delegations within the lead's budget). The lead's own
requests and tool-call slots happen only while no delegation is live, as in the loop: a
turn's slots are all taken before its delegations start, and the next request waits for
all of them to settle. Pure code: no server needed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deputy_runtime import AgentUsage, UsageLimits
from deputy_runtime.chat import Usage
from deputy_runtime.runtime import StopReason
from deputy_runtime.temporal import Budget, exhausted

LIMITED = ("max_requests", "max_tool_calls", "max_total_tokens")

operations = st.lists(
    st.one_of(
        st.tuples(st.just("reserve"), st.one_of(st.none(), st.integers(0, 6))),
        st.tuples(st.just("settle"), st.floats(0.0, 1.0)),
        st.tuples(st.just("request"), st.integers(0, 40)),
        st.tuples(st.just("tool"), st.none()),
    ),
    max_size=40,
)


def _held(budget: Budget, field: str) -> int:
    """What the live reservations hold of one of the integer ``LIMITED`` limits."""
    held: list[int | None] = [getattr(r, field) for r in budget.reservations.values()]
    return sum(h or 0 for h in held)


@settings(max_examples=200, deadline=None)
@given(
    requests=st.integers(0, 12),
    tool_calls=st.integers(0, 8),
    tokens=st.integers(0, 300),
    ops=operations,
)
def test_used_plus_reserved_never_exceeds_the_limits(
    requests: int, tool_calls: int, tokens: int, ops: list[tuple[str, int | float | None]]
) -> None:
    limits = UsageLimits(max_requests=requests, max_tool_calls=tool_calls, max_total_tokens=tokens)
    budget = Budget(limits)
    live: list[str] = []
    for n, (op, arg) in enumerate(ops):
        if op == "reserve" and budget.exceeded(reaching=True) is None:
            key = f"d{n}"
            assert arg is None or isinstance(arg, int)  # the reserve strategy's shape
            child = budget.reserve(key, arg)
            assert child.on_exceed == "stop"
            if arg is not None:
                assert child.max_requests is not None
                assert child.max_requests <= arg
            live.append(key)
        elif op == "settle" and live:
            assert isinstance(arg, float)  # the settle strategy's shape
            key = live.pop(int(arg * (len(live) - 1)))
            held = budget.reservations[key]
            # A child uses at most what it was granted (its own limits stop it).
            budget.release(key)
            budget.add_external(
                AgentUsage(
                    requests=held.max_requests or 0,
                    tool_calls=held.max_tool_calls or 0,
                    output_tokens=held.max_total_tokens or 0,
                )
            )
            budget.release(key)  # a second release changes nothing
        elif op == "request" and not live and budget.exceeded(reaching=True) is None:
            budget.start_request()
            remaining = tokens - budget.snapshot().total_tokens - _held(budget, "max_total_tokens")
            assert isinstance(arg, int)  # the request strategy's shape
            budget.add_response(Usage(requests=1, output_tokens=min(arg, max(0, remaining))))
        elif op == "tool" and not live:
            budget.take_tool_call()
        used = budget.snapshot()
        assert used.requests + _held(budget, "max_requests") <= requests
        assert used.tool_calls + _held(budget, "max_tool_calls") <= tool_calls
        assert used.total_tokens + _held(budget, "max_total_tokens") <= tokens


def test_one_turn_shares_what_is_left() -> None:
    budget = Budget(UsageLimits(max_requests=6, max_tool_calls=4))
    budget.start_request()
    assert [budget.take_tool_call() for _ in range(3)] == [True, True, True]
    budget.expect(3)
    first = budget.reserve("a", None)
    second = budget.reserve("b", 2)
    third = budget.reserve("c", 2)
    # 5 requests left: the lead keeps 1, the three split 4; the one tool call left goes
    # to the first (the lead counts as a party for tool calls).
    assert (first.max_requests, first.max_tool_calls) == (2, 1)
    assert (second.max_requests, second.max_tool_calls) == (1, 0)
    assert (third.max_requests, third.max_tool_calls) == (1, 0)
    with pytest.raises(ValueError, match="already held"):
        budget.reserve("a", 1)
    budget.release("a")
    assert budget.reserve("d", 2).max_requests == 2


@pytest.mark.parametrize(
    ("limits", "reason"),
    [
        (UsageLimits(max_requests=0), StopReason.REQUEST_LIMIT),
        (UsageLimits(max_requests=3, max_total_tokens=0), StopReason.TOTAL_TOKEN_LIMIT),
        (UsageLimits(max_requests=3, max_cost_usd=0.0), StopReason.COST_LIMIT),
        (UsageLimits(max_requests=3, max_tool_calls=0), None),  # may still answer
        (UsageLimits(max_requests=None), None),
    ],
)
def test_a_grant_with_nothing_to_run_on_is_exhausted(
    limits: UsageLimits, reason: StopReason | None
) -> None:
    assert exhausted(limits) == reason
