"""Usage values reject counts and costs that would silently disable a usage limit."""

from __future__ import annotations

import math

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from deputy_runtime import AgentUsage, UsageValueError
from deputy_runtime.chat import Usage

_TYPES = (Usage, AgentUsage)
_COUNTS = {
    Usage: ("requests", "input_tokens", "output_tokens", "cached_input_tokens"),
    AgentUsage: ("requests", "tool_calls", "input_tokens", "output_tokens", "cached_input_tokens"),
}


@pytest.mark.parametrize("kind", _TYPES)
@pytest.mark.parametrize("cost", [math.nan, math.inf, -math.inf, -0.01, True, "1.0"])
def test_bad_cost_is_rejected_naming_the_field(kind: type[Usage], cost: object) -> None:
    with pytest.raises(UsageValueError, match=rf"{kind.__name__}\.cost_usd") as info:
        kind(cost_usd=cost)  # type: ignore[arg-type]
    assert info.value.field == "cost_usd"
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("kind", _TYPES)
@pytest.mark.parametrize("bad", [-1, 1.5, math.nan, True, "3"])
def test_bad_count_is_rejected_naming_the_field(kind: type[Usage], bad: object) -> None:
    for name in _COUNTS[kind]:
        with pytest.raises(UsageValueError, match=rf"{kind.__name__}\.{name} ") as info:
            kind(**{name: bad})  # type: ignore[arg-type]
        assert info.value.field == name


@pytest.mark.parametrize("kind", _TYPES)
def test_valid_values_and_sums_are_accepted(kind: type[Usage]) -> None:
    one = kind(requests=1, input_tokens=10, output_tokens=5, cost_usd=0.25)
    assert kind(cost_usd=0).cost_usd == 0
    assert kind(cost_usd=None).cost_usd is None
    total = one + one
    assert (total.requests, total.input_tokens, total.cost_usd) == (2, 20, 0.5)


def test_decoding_bad_usage_fails_as_validation() -> None:
    # Usage also arrives as JSON (journals, the ledger, a worker); the same rule holds.
    with pytest.raises(msgspec.ValidationError, match="input_tokens"):
        msgspec.json.decode(b'{"input_tokens": -5}', type=Usage)
    assert msgspec.json.decode(b'{"input_tokens": 5}', type=Usage).input_tokens == 5


_bad_cost = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf]),
    st.floats(max_value=-1e-300, allow_nan=False, allow_infinity=False),
)


@given(
    kind=st.sampled_from(_TYPES),
    cost=st.one_of(st.none(), st.floats(min_value=0, allow_nan=False, allow_infinity=False)),
    counts=st.lists(st.integers(min_value=0, max_value=2**62), min_size=5, max_size=5),
    bad_cost=_bad_cost,
    bad_count=st.integers(max_value=-1),
    which=st.integers(min_value=0, max_value=4),
)
def test_property_valid_accepted_invalid_rejected(
    kind: type[Usage],
    cost: float | None,
    counts: list[int],
    bad_cost: float,
    bad_count: int,
    which: int,
) -> None:
    names = _COUNTS[kind]
    values = dict(zip(names, counts, strict=False))
    good = kind(cost_usd=cost, **values)
    assert all(getattr(good, name) == values[name] for name in names)
    with pytest.raises(UsageValueError) as info:
        kind(cost_usd=bad_cost, **values)
    assert info.value.field == "cost_usd"
    name = names[which % len(names)]
    with pytest.raises(UsageValueError) as info:
        kind(cost_usd=cost, **{**values, name: bad_count})
    assert info.value.field == name
