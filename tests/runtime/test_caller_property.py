"""Property: model requests a running tool makes through its run (``current_caller()``,
what an MCP server's sampling uses) are bounded by the run's limits and its lead's, and
every one of them is counted exactly once in the lead's usage.

Hypothesis draws the lead's and the delegations' request limits, how many delegations run
at once, how many concurrent tool calls each makes and how many requests each call tries
to make, and whether a PreToolUse hook awaits; the provider counts every
request it really received. Runs once per anyio backend.
"""

from __future__ import annotations

import tempfile
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deputy_runtime import (
    HookEvent,
    HookInput,
    Hooks,
    SamplingError,
    StopReason,
    UsageLimits,
    tool,
)
from deputy_runtime.chat import ContentText, Turn, reply, tool_calls
from deputy_runtime.chat._types import ModelRequest
from deputy_runtime.runtime import DelegationEnd, Event, current_caller
from tests.runtime.helpers import definition, delegate_many, scripted_lead

SAMPLE = "SAMPLE"


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=40, deadline=None)
@given(
    lead_requests=st.one_of(st.none(), st.integers(1, 20)),
    child_requests=st.integers(1, 8),
    siblings=st.integers(1, 3),
    calls=st.integers(1, 3),
    attempts=st.integers(0, 10),
    hooked=st.booleans(),
)
def test_sampling_through_the_caller_is_bounded_and_counted_exactly(
    backend: str,
    lead_requests: int | None,
    child_requests: int,
    siblings: int,
    calls: int,
    attempts: int,
    hooked: bool,
) -> None:
    sent = {"all": 0, "sampling": 0}
    outcomes: list[tuple[int, bool, str]] = []

    @tool(read_only=True)
    async def sampler() -> str:
        """Makes model requests through the run that called it."""
        caller = current_caller()
        assert caller is not None
        answered, refused = 0, False
        for _ in range(attempts):
            try:
                await anyio.sleep(0)  # let the turn's other calls interleave
                await caller.sample(
                    source="mcp__prop",
                    system_prompt=SAMPLE,
                    turns=(Turn("user", (ContentText("q"),)),),
                    params={},
                    hook_input={},
                )
            except SamplingError:
                refused = True
                break
            answered += 1
        outcomes.append((answered, refused, caller.event_ids()["delegation_id"]))
        return f"{answered}"

    def worker(request: ModelRequest) -> Any:
        sent["all"] += 1
        if request.system_prompt == SAMPLE:
            sent["sampling"] += 1
            return reply("sampled")
        if len(request.turns) == 1:
            # Several calls in one turn run concurrently, each sampling.
            return tool_calls(*[("sampler", {})] * calls)
        return reply("done")

    def lead_script(request: ModelRequest) -> Any:
        sent["all"] += 1
        if len(request.turns) == 1:
            return delegate_many(*[("worker", str(i)) for i in range(siblings)])
        return reply("delegated")

    async def pre(i: HookInput) -> None:
        await anyio.sleep(0)  # a hook that awaits (a policy service, a person)

    hooks = Hooks()
    if hooked:
        hooks.add(HookEvent.PreToolUse, pre)

    async def main() -> tuple[Any, list[Event]]:
        events: list[Event] = []
        with tempfile.TemporaryDirectory() as tmp:
            lead, _ = scripted_lead(
                {"lead": lead_script, "worker": worker},
                [definition("worker", tools=(sampler,), max_requests=child_requests)],
                working_dir=tmp,
                hooks=hooks,
            )
            limits = UsageLimits(max_requests=lead_requests)
            result = await lead.run("go", usage_limits=limits, on_event=events.append)
        return result, events

    result, events = anyio.run(main, backend=backend)
    # Every request the provider received is in the lead's usage, and only those.
    assert result.usage.requests == sent["all"]
    assert sum(answered for answered, _, _ in outcomes) == sent["sampling"]
    if lead_requests is not None:
        assert sent["all"] <= lead_requests
    ends = [e for e in events if isinstance(e, DelegationEnd)]
    for end in ends:
        assert end.usage.requests <= child_requests
    # The lead's usage is its own requests plus each delegation's settled usage.
    own = sent["all"] - sum(end.usage.requests for end in ends)
    assert own >= 1
    # A refused delegation ran out of requests: it ends on the request limit.
    limited = {e.delegation_id for e in ends if e.stop_reason == StopReason.REQUEST_LIMIT}
    assert {d for _, refused, d in outcomes if refused} <= limited
    for answered, refused, _ in outcomes:
        # A refusal comes only once the budget is spent, never before an attempt runs out.
        assert answered + refused <= attempts
        assert refused or answered == attempts
