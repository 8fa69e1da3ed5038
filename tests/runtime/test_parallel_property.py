"""Property: parallel_delegate respects max_active and the batch budget for any batch.

Hypothesis draws the batch (pairs over two definitions), ``max_active``, the batch's and
the lead's request budgets (the batch runs under the tighter), the token budget and how
long each responder stays in flight; the responder counts what is in flight (never
timing). Runs once per anyio backend.
"""

from __future__ import annotations

import json
import tempfile
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deputy_runtime import UsageLimits, usage_tree
from deputy_runtime.chat._types import ModelRequest
from tests.runtime.helpers import definition, scripted_lead


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=40, deadline=None)
@given(
    tasks=st.lists(st.sampled_from(("a", "b")), min_size=1, max_size=30),
    max_active=st.integers(1, 12),
    max_requests=st.one_of(st.none(), st.integers(0, 40)),
    lead_requests=st.one_of(st.none(), st.integers(0, 40)),
    max_tokens=st.one_of(st.none(), st.integers(0, 400)),
    holds=st.lists(st.integers(0, 4), min_size=1, max_size=8),
)
def test_parallel_batches_respect_slots_and_budgets(
    backend: str,
    tasks: list[str],
    max_active: int,
    max_requests: int | None,
    lead_requests: int | None,
    max_tokens: int | None,
    holds: list[int],
) -> None:
    state = {"active": 0, "peak": 0, "answered": 0}

    async def responder(request: ModelRequest) -> str:
        state["active"] += 1
        state["peak"] = max(state["peak"], state["active"])
        try:
            index = int(json.loads(request.turns[0].text)["brief"]["task"])
            for _ in range(holds[index % len(holds)]):
                await anyio.sleep(0)
        finally:
            state["active"] -= 1
        state["answered"] += 1
        return f"answer {index}"

    async def main() -> Any:
        with tempfile.TemporaryDirectory() as tmp:
            lead, provider = scripted_lead(
                {"a": responder, "b": responder},
                [definition("a"), definition("b")],
                tmp,
                usage_limits=UsageLimits(max_requests=lead_requests),
            )
            limits = UsageLimits(max_requests=max_requests, max_total_tokens=max_tokens)
            result = await lead.parallel_delegate(
                [(name, str(i)) for i, name in enumerate(tasks)],
                max_active=max_active,
                usage_limits=limits,
            )
            return lead, provider, result

    lead, provider, result = anyio.run(main, backend=backend)
    assert state["peak"] <= max_active
    assert len(result.statuses) == len(tasks)
    assert result.names == tuple(tasks)
    # the batch runs under the tighter of its own and the lead's request limit
    allowed = min((n for n in (max_requests, lead_requests) if n is not None), default=None)
    if allowed is not None:
        assert provider.requests <= allowed
    if max_tokens is not None:
        # checked after each response: at most one response (15 tokens) per slot over
        assert result.run.usage.total_tokens <= max_tokens + 15 * max_active
    assert result.run.usage.requests == provider.requests == state["answered"]
    for i, (status, res) in enumerate(zip(result.statuses, result.results, strict=True)):
        assert status in ("completed", "stopped", "not_started")
        if status == "completed":
            assert res is not None
            assert res.response == f"answer {i}"
        if status == "not_started":
            assert res is None
    assert not lead.running
    assert lead.delegations.active == {}
    if (allowed is None or allowed >= len(tasks)) and max_tokens is None:
        assert result.statuses == ("completed",) * len(tasks)
        assert result.run.stop_reason == "complete"
    # The batch's cost tree adds up: its responders' own usage is the batch's.
    tree = usage_tree(result.run, lead.list_subagents())
    assert len(tree.children) == len(tasks)
    assert tree.own.requests == 0
    for field in ("requests", "input_tokens", "output_tokens", "tool_calls"):
        total = sum(getattr(node.own, field) for _, node in tree.walk())
        assert total == getattr(result.run.usage, field)
