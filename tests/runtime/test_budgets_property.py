"""Property: sibling delegations in one lead turn never together exceed the lead's limits.

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
from deputy_runtime.chat import reply, tool_call, tool_calls
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
) -> None:
    executed = {"tools": 0, "sent": 0}

    async def child(request: ModelRequest) -> Any:
        executed["sent"] += 1
        await anyio.sleep(0)
        if fail_every is not None and executed["sent"] % fail_every == 0:
            raise ProviderError("flaky")
        index = int(json.loads(request.turns[0].text)["brief"]["task"])
        done = sum(1 for t in request.turns if t.role == "assistant")
        if done < wants[index % len(wants)]:
            return tool_call("noop", {})
        return "done"

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
        # tokens are checked after each response: one response (15) per agent at most
        assert result.usage.total_tokens <= max_total_tokens + 15 * (siblings + 1)
    records = lead.list_subagents()
    assert sum(r.usage.requests for r in records) <= max_requests - 1
    assert sum(r.usage.tool_calls for r in records) == executed["tools"]
    assert lead.delegations.active == {}
