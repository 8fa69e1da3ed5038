"""``parallel_delegate(usage_limits=...)`` can only tighten the lead's limits, never widen them.

The batch runs under, per field, the tighter of the lead's ``usage_limits`` and the
batch's (``None`` is unlimited and loses to any number); ``on_exceed`` comes from the
batch's limits when they are given. Requests are counted at the provider.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deputy_runtime import RequestLimitExceeded, UsageLimits
from deputy_runtime.runtime._parallel import batch_limits
from tests.runtime.helpers import definition, scripted_lead

pytestmark = pytest.mark.anyio

TASKS = [("w", f"task {i}") for i in range(30)]


def answering_lead(tmp_path: Path, **lead_limits: Any) -> tuple[Any, Any]:
    """A lead whose worker answers at once; ``lead_limits`` are its UsageLimits, if any."""
    limits = {"usage_limits": UsageLimits(**lead_limits)} if lead_limits else {}
    return scripted_lead({"w": lambda request: "a"}, [definition("w")], tmp_path, **limits)


async def test_a_wider_batch_limit_does_not_widen_the_leads(tmp_path: Path) -> None:
    lead, provider = answering_lead(tmp_path, max_requests=10)
    result = await lead.parallel_delegate(
        TASKS, max_active=4, usage_limits=UsageLimits(max_requests=50)
    )
    assert provider.requests == 10
    assert result.run.usage.requests == 10
    assert result.run.stop_reason == "request_limit"
    assert result.run.limits is not None
    assert result.run.limits.max_requests == 10
    assert result.statuses.count("completed") == 10
    assert result.statuses.count("not_started") == 20


async def test_a_tighter_batch_limit_applies(tmp_path: Path) -> None:
    lead, provider = answering_lead(tmp_path, max_requests=10)
    result = await lead.parallel_delegate(
        TASKS, max_active=4, usage_limits=UsageLimits(max_requests=3)
    )
    assert provider.requests == 3
    assert result.run.stop_reason == "request_limit"
    assert result.run.limits is not None
    assert result.run.limits.max_requests == 3
    assert lead.usage_limits == UsageLimits(max_requests=10)  # the lead's own are untouched


async def test_an_unlimited_batch_field_keeps_the_leads_limit(tmp_path: Path) -> None:
    lead, provider = answering_lead(tmp_path)  # the default lead limits: 25 requests
    result = await lead.parallel_delegate(
        TASKS, max_active=4, usage_limits=UsageLimits(max_requests=None)
    )
    assert provider.requests == 25
    assert result.run.stop_reason == "request_limit"


async def test_an_unlimited_lead_takes_the_batch_limit(tmp_path: Path) -> None:
    lead, provider = answering_lead(tmp_path, max_requests=None)
    result = await lead.parallel_delegate(
        TASKS, max_active=4, usage_limits=UsageLimits(max_requests=7)
    )
    assert provider.requests == 7
    assert result.run.stop_reason == "request_limit"


async def test_on_exceed_comes_from_the_batch_limits_when_given(tmp_path: Path) -> None:
    lead, provider = answering_lead(tmp_path, max_requests=2)  # on_exceed="stop"
    with pytest.raises(RequestLimitExceeded):
        await lead.parallel_delegate(
            TASKS, max_active=1, usage_limits=UsageLimits(max_requests=50, on_exceed="error")
        )
    assert provider.requests == 2
    assert not lead.running
    # without batch limits the lead's on_exceed applies: it stops
    result = await lead.parallel_delegate(TASKS, max_active=1)
    assert result.run.stop_reason == "request_limit"
    assert provider.requests == 4


async def test_batch_usage_limits_of_the_wrong_type_are_refused(tmp_path: Path) -> None:
    lead, provider = answering_lead(tmp_path)
    with pytest.raises(TypeError, match="usage_limits must be a UsageLimits or None, got dict"):
        await lead.parallel_delegate(TASKS, usage_limits={"max_requests": 3})
    assert provider.requests == 0
    assert not lead.running
    assert lead.list_subagents() == []


def test_batch_limits_is_the_per_field_minimum() -> None:
    lead = UsageLimits(max_requests=10, max_tool_calls=None, max_input_tokens=100, max_cost_usd=0.5)
    batch = UsageLimits(
        max_requests=50,
        max_tool_calls=4,
        max_input_tokens=None,
        max_output_tokens=30,
        max_cost_usd=0.25,
        on_exceed="error",
    )
    assert batch_limits(lead, batch) == UsageLimits(
        max_requests=10,
        max_tool_calls=4,
        max_input_tokens=100,
        max_output_tokens=30,
        max_total_tokens=None,
        max_cost_usd=0.25,
        on_exceed="error",
    )
    assert batch_limits(lead, None) is lead
    # symmetric in the limits (on_exceed aside): the batch can never exceed either
    assert batch_limits(batch, lead).max_requests == 10
    assert batch_limits(batch, lead).on_exceed == "stop"
