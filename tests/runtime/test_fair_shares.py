"""Fair reservations: a turn's delegations share what the lead has left, the lead keeps
its own next request, and a delegation at its share tops up from its lead (and the lead
from its own lead, up a delegation tree) without ever passing a limit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deputy_runtime import UsageLimits
from deputy_runtime.chat import ModelRequest, reply, tool_call
from deputy_runtime.runtime import Meter
from deputy_runtime.runtime._usage import AgentUsage
from tests.runtime.helpers import definition, delegate_many, make_tool, scripted_lead

pytestmark = pytest.mark.anyio


def _needs(requests: int) -> Any:
    """A subagent model that answers after ``requests`` requests (tool calls before)."""

    def respond(request: ModelRequest) -> Any:
        done = sum(1 for t in request.turns if t.role == "assistant")
        return "done" if done + 1 >= requests else tool_call("noop", {})

    return respond


async def test_three_uncapped_agents_in_one_turn_all_complete(tmp_path: Path) -> None:
    """No definition sets max_requests; the lead has 12: 4, 3 and 3, and the lead's own."""
    noop = make_tool("noop", read_only=True)
    names = ("explorer", "reviewer", "summarizer")
    lead, p = scripted_lead(
        {
            "lead": [delegate_many(*((n, "look") for n in names)), reply("all three done")],
            **{n: _needs(3) for n in names},
        },
        [definition(n, tools=[noop], max_requests=None) for n in names],
        tmp_path,
        usage_limits=UsageLimits(max_requests=12),
    )
    result = await lead.run("go")
    records = lead.list_subagents()
    assert [r.status for r in records] == ["completed"] * 3
    assert sorted(r.limits.max_requests or 0 for r in records if r.limits) == [3, 3, 4]
    assert result.stop_reason == "complete"
    assert result.response == "all three done"
    assert result.usage.requests == 1 + 9 + 1 == p.requests


async def test_a_delegation_tops_up_with_what_a_finished_sibling_handed_back(
    tmp_path: Path,
) -> None:
    """Two in one turn under 12 requests: 5 each. One needs 8, the other 2: the second
    hands 3 back when it settles, and the first draws them when it reaches its share."""
    noop = make_tool("noop", read_only=True)
    needs_eight = _needs(8)

    async def big(request: ModelRequest) -> Any:
        # Answer only once the small one has settled, so its hand-back is there to draw.
        with anyio.fail_after(30):
            while not any(r.agent_name == "small" and r.completed_at for r in records()):
                await anyio.sleep(0)
        return needs_eight(request)

    def records() -> list[Any]:
        return lead.list_subagents()

    lead, _ = scripted_lead(
        {
            "lead": [delegate_many(("big", "a"), ("small", "b")), reply("ok")],
            "big": big,
            "small": _needs(2),
        },
        [definition(n, tools=[noop], max_requests=None) for n in ("big", "small")],
        tmp_path,
        usage_limits=UsageLimits(max_requests=12),
    )
    result = await lead.run("go")
    by_name = {r.agent_name: r for r in lead.list_subagents()}
    big_record, small = by_name["big"], by_name["small"]
    assert (small.status, small.usage.requests) == ("completed", 2)
    assert small.limits is not None
    assert big_record.limits is not None
    # Shares of the 10 beyond the lead's request: 5 each (in either order). The small
    # one used 2 and handed 3 back: the big one drew them and completed with 8.
    assert sorted([small.limits.max_requests or 0, 5]) == [5, 5]
    assert (big_record.status, big_record.usage.requests) == ("completed", 8)
    assert big_record.limits.max_requests == 8
    assert result.stop_reason == "complete"
    assert result.usage.requests == 1 + 8 + 2 + 1


# -- property: a tree of meters never passes the root's limits -----------------------------

_tree_ops = st.lists(
    st.one_of(
        # reserve a child of node i (with an optional definition cap)
        st.tuples(st.just("reserve"), st.integers(0, 30), st.one_of(st.none(), st.integers(0, 6))),
        # node i makes a request (if its meter allows one, top-ups included)
        st.tuples(st.just("request"), st.integers(0, 30), st.integers(0, 40)),
        # node i settles (its usage goes to its parent, its reservation is released)
        st.tuples(st.just("settle"), st.integers(0, 30), st.none()),
        st.tuples(st.just("expect"), st.integers(0, 30), st.integers(0, 4)),
    ),
    max_size=80,
)


class _Node:
    def __init__(self, meter: Meter, parent: _Node | None, reservation: Any) -> None:
        self.meter = meter
        self.parent = parent
        self.reservation = reservation
        self.live = True


@settings(max_examples=300, deadline=None)
@given(
    requests=st.integers(0, 30),
    tokens=st.one_of(st.none(), st.integers(0, 400)),
    ops=_tree_ops,
)
def test_a_delegation_tree_never_passes_the_roots_limits(
    requests: int, tokens: int | None, ops: list[tuple[str, int, Any]]
) -> None:
    root = _Node(Meter(UsageLimits(max_requests=requests, max_total_tokens=tokens)), None, None)
    nodes = [root]
    sent = 0  # every model request any node made
    for op, index, arg in ops:
        node = nodes[index % len(nodes)]
        if not node.live:
            continue
        if op == "expect":
            node.meter.expect(arg)
        elif op == "reserve":
            if node.meter.exceeded(reaching=True) is not None:
                continue
            parties = node.meter.expected
            left = node.meter.remaining("max_requests")
            reservation = node.meter.reserve_child(arg)
            if left is not None and parties and left - 1 >= parties and arg != 0:
                # Enough for one request each (beyond the lead's own): this one gets one.
                assert (reservation.limits.max_requests or 0) >= 1
            child = Meter(reservation.limits)
            child.source = (node.meter, reservation)
            nodes.append(_Node(child, node, reservation))
        elif op == "request":
            # As in the loop, a run sends a request only while none of its delegations
            # is live (a turn's delegations settle before the next request).
            if any(n.live and n.parent is node for n in nodes):
                continue
            if node.meter.before_request() is not None:
                continue
            node.meter.start_request()
            sent += 1
            node.meter.add_external(AgentUsage(input_tokens=arg))
            node.meter.limit_reached(reaching=False)
        elif op == "settle" and node.parent is not None:
            # Children settle before their parent: settle the whole subtree first.
            _settle(node, nodes)
        # Requests are exact at every depth: nothing sent passes the root's limit, and
        # the root's held reservations plus what it used never do either.
        assert sent <= requests
        held = root.meter.reserved["max_requests"] if root.meter.reserved else 0
        assert root.meter.requests + held <= requests
        for n in nodes:
            if n.live and n.parent is not None:
                limit = n.meter.limits.max_requests
                assert limit is not None
                assert n.meter.requests <= limit
                if n.reservation.cap is not None:
                    assert limit <= n.reservation.cap
    for n in reversed(nodes):
        if n.live and n.parent is not None:
            _settle(n, nodes)
    assert root.meter.requests == sent
    assert not root.meter.reservations


def _settle(node: _Node, nodes: list[_Node]) -> None:
    for n in reversed(nodes):
        if n.live and n.parent is node:
            _settle(n, nodes)
    node.live = False
    assert node.parent is not None
    node.parent.meter.release(node.reservation)
    node.parent.meter.add_external(node.meter.snapshot())
