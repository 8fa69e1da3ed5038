"""Property: sibling delegations in one lead turn never together exceed the lead's limits,
the lead keeps its final request, and the run's cost tree adds up.

This is the PydanticAI-harness overshoot (N parallel delegations each granted the whole
remaining budget). Hypothesis draws how many siblings the lead starts in one turn, the
lead's limits and what each child wants to do; the provider and the tools count what
really happened. Runs once per anyio backend.
"""

from __future__ import annotations

import json
import tempfile
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deputy_runtime import ProviderError, UsageLimits
from deputy_runtime.chat import Usage, reply, tool_call, tool_calls
from deputy_runtime.chat._types import ModelRequest
from tests.runtime.helpers import definition, make_tool, scripted_lead


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=40, deadline=None)
@given(
    siblings=st.integers(1, 12),
    max_requests=st.integers(1, 30),
    max_tool_calls=st.one_of(st.none(), st.integers(0, 30)),
    max_total_tokens=st.one_of(st.none(), st.integers(0, 600)),
    wants=st.lists(st.integers(0, 5), min_size=1, max_size=12),
    fail_every=st.one_of(st.none(), st.integers(2, 5)),
    cap=st.one_of(st.none(), st.integers(0, 6)),
    interrupt=st.one_of(st.none(), st.integers(0, 11)),
    spend=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 5000)), min_size=1, max_size=8),
)
def test_siblings_never_exceed_the_leads_limits(
    backend: str,
    siblings: int,
    max_requests: int,
    max_tool_calls: int | None,
    max_total_tokens: int | None,
    wants: list[int],
    fail_every: int | None,
    cap: int | None,
    interrupt: int | None,
    spend: list[tuple[int, int]],
) -> None:
    executed = {"tools": 0, "sent": 0}
    leads: list[Any] = []

    async def child(request: ModelRequest) -> Any:
        executed["sent"] += 1
        sent = executed["sent"]
        await anyio.sleep(0)
        if fail_every is not None and sent % fail_every == 0:
            raise ProviderError("flaky")
        index = int(json.loads(request.turns[0].text)["brief"]["task"])
        if interrupt is not None and index == interrupt:
            # Cancelled from outside while it runs: it stops at its next boundary.
            [record] = [r for r in leads[0].list_subagents() if r.task == str(index)]
            leads[0].interrupt_subagent(record.delegation_id)
        done = sum(1 for t in request.turns if t.role == "assistant")
        # Random usage per response (tokens, and a cost in micro-dollars).
        tokens, micro = spend[sent % len(spend)]
        usage = Usage(input_tokens=tokens, output_tokens=5, cost_usd=micro / 1e6)
        if done < wants[index % len(wants)]:
            return tool_call("noop", {}, usage=usage)
        return reply("done", usage=usage)

    def count() -> str:
        executed["tools"] += 1
        return "ok"

    async def main() -> Any:
        with tempfile.TemporaryDirectory() as tmp:
            lead, provider = scripted_lead(
                {
                    "lead": [
                        tool_calls(
                            *[
                                ("delegate_to_agent", {"agent_name": "w", "task": str(i)})
                                for i in range(siblings)
                            ]
                        ),
                        reply("done"),
                    ],
                    "w": child,
                },
                [
                    definition(
                        "w", tools=[make_tool("noop", count, read_only=True)], max_requests=cap
                    )
                ],
                tmp,
                usage_limits=UsageLimits(
                    max_requests=max_requests,
                    max_tool_calls=max_tool_calls,
                    max_total_tokens=max_total_tokens,
                ),
            )
            leads.append(lead)
            result = await lead.run("fan out")
            return lead, provider, result

    lead, provider, result = anyio.run(main, backend=backend)
    assert provider.requests <= max_requests
    assert result.usage.requests == provider.requests
    if max_tool_calls is not None:
        # the lead's own delegate calls count; the children's tools only get what is left
        assert result.usage.tool_calls <= max_tool_calls
        assert executed["tools"] + min(siblings, max_tool_calls) <= max_tool_calls
    if max_total_tokens is not None:
        # tokens are checked after each response: one response per agent at most
        biggest = max(t for t, _ in spend) + 5
        assert result.usage.total_tokens <= max_total_tokens + max(15, biggest) * (siblings + 1)
    # The lead gets its final request whenever its own limits allow two requests.
    lead_may_conclude = max_tool_calls is None or max_tool_calls >= siblings
    if max_total_tokens is None and lead_may_conclude and max_requests >= 2:
        assert len(provider.requests_for("lead")) == 2
        assert result.stop_reason == "complete"
    # With a request for each of them beyond the lead's two, every delegation started.
    if (
        max_requests - 2 >= siblings
        and cap != 0
        and max_tool_calls is None
        and max_total_tokens is None
    ):
        for record in lead.list_subagents():
            assert record.status != "not_started", record
            assert record.limits is not None
            assert (record.limits.max_requests or 0) >= 1
    # The cost tree adds up: every run's own usage sums to the lead run's.
    tree = lead.usage_tree()
    nodes = [node for _, node in tree.walk()]
    assert len(nodes) == 1 + len(lead.list_subagents())
    for field in ("requests", "tool_calls", "input_tokens", "output_tokens"):
        assert sum(getattr(n.own, field) for n in nodes) == getattr(result.usage, field)
    assert sum(n.own.cost_usd or 0.0 for n in nodes) == pytest.approx(
        result.usage.cost_usd or 0.0, abs=1e-9
    )
    records = lead.list_subagents()
    assert sum(r.usage.requests for r in records) <= max_requests - 1
    counted = sum(r.usage.tool_calls for r in records)
    if interrupt is None:
        assert counted == executed["tools"]
    else:
        # An interrupted subagent's call took its slot and was refused at the gate.
        assert executed["tools"] <= counted <= executed["tools"] + 1
    assert lead.delegations.active == {}
