"""UsageLimits validation and the Meter's limit checks and reservations."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deputy_runtime import UsageLimits
from deputy_runtime.chat import Usage
from deputy_runtime.runtime._usage import AgentUsage, Meter


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("max_requests", True, TypeError),
        ("max_requests", -1, ValueError),
        ("max_requests", 2**31, ValueError),
        ("max_tool_calls", 1.5, TypeError),
        ("max_cost_usd", math.inf, ValueError),
        ("max_cost_usd", -0.1, ValueError),
        ("max_cost_usd", True, TypeError),
        ("on_exceed", "explode", ValueError),
    ],
)
def test_limits_reject_bad_values(field: str, value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match=field):
        UsageLimits(**{field: value})  # type: ignore[arg-type]


def test_default_is_25_requests() -> None:
    assert UsageLimits().max_requests == 25


def test_reaching_counts_except_tool_calls() -> None:
    meter = Meter(UsageLimits(max_requests=2, max_tool_calls=1))
    meter.start_request()
    assert meter.before_request() is None
    meter.start_request()
    assert meter.before_request() == "request_limit"
    assert meter.exceeded(reaching=False) is None
    meter2 = Meter(UsageLimits(max_tool_calls=1))
    assert meter2.take_tool_call()
    assert meter2.exceeded(reaching=True) is None
    assert not meter2.take_tool_call()


def test_deputy_worked_example() -> None:
    """6/4/700/0.30 with 2/1/150/0.10 used; definition max_requests=3."""
    meter = Meter(
        UsageLimits(max_requests=6, max_tool_calls=4, max_total_tokens=700, max_cost_usd=0.30)
    )
    meter.start_request()
    meter.add_response(Usage(requests=2, input_tokens=100, output_tokens=50, cost_usd=0.10))
    meter.tool_calls = 1
    meter.expect(1)  # the turn asked for one delegation; a second comes unannounced
    first = meter.reserve_child(3)
    got = first.limits
    # All requests but the lead's next one; of the rest, a share like the lead's.
    assert (got.max_requests, got.max_tool_calls, got.max_total_tokens, got.max_cost_usd) == (
        3,
        2,
        275,
        0.10,
    )
    sibling = meter.reserve_child(3)
    got = sibling.limits
    # Nothing is left of the requests but the lead's own: the sibling cannot start.
    assert (got.max_requests, got.max_tool_calls, got.max_total_tokens, got.max_cost_usd) == (
        0,
        1,
        137,
        0.05,
    )
    meter.release(sibling)
    meter.release(first)
    meter.release(first)  # idempotent
    again = meter.reserve_child(3).limits
    assert (again.max_requests, again.max_total_tokens) == (3, 275)
    # Settling adds actual usage; reaching the limit stops the lead.
    assert meter.reservations is not None
    meter.release(meter.reservations.pop())
    meter.add_external(AgentUsage(requests=1))
    assert meter.before_request() is None
    meter.add_external(AgentUsage(requests=3))
    assert meter.before_request() == "request_limit"


@given(
    limit=st.integers(0, 50),
    wants=st.lists(st.one_of(st.none(), st.integers(0, 20)), max_size=30),
)
def test_reservations_never_exceed_the_limit(limit: int, wants: list[int | None]) -> None:
    meter = Meter(UsageLimits(max_requests=limit, max_total_tokens=limit * 10))
    granted = [meter.reserve_child(w).limits for w in wants]
    assert sum(g.max_requests or 0 for g in granted) <= limit
    assert sum(g.max_total_tokens or 0 for g in granted) <= limit * 10
    for g, w in zip(granted, wants, strict=True):
        if w is not None:
            assert (g.max_requests or 0) <= w


def test_unset_limits_stay_unset_and_cost_unknown() -> None:
    meter = Meter(UsageLimits(max_requests=None))
    child = meter.reserve_child(None).limits
    assert child.max_requests is None
    assert child.max_total_tokens is None
    meter.add_response(Usage(requests=1, input_tokens=5))
    assert meter.snapshot().cost_usd is None
    meter.add_response(Usage(requests=1, cost_usd=0.5))
    assert meter.snapshot().cost_usd == 0.5
