"""The cost tree: a lead run's own usage and each delegation's, adding up to the run's."""

from __future__ import annotations

import msgspec
import pytest

from deputy_runtime import UsageLimits, UsageNode, usage_tree
from deputy_runtime.chat import Usage, reply, tool_call, tool_calls
from deputy_runtime.runtime import AgentUsage
from tests.runtime.helpers import DELEGATE, definition, scripted_lead

pytestmark = pytest.mark.anyio


def _usage(requests: int, input_tokens: int, output_tokens: int, cost: float | None) -> Usage:
    return Usage(
        requests=requests,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cost_usd=cost,
    )


def _sum(nodes: list[UsageNode]) -> AgentUsage:
    total = AgentUsage()
    for node in nodes:
        total = total + node.own
    return total


async def test_the_tree_splits_a_lead_run_into_its_own_and_each_delegations_usage() -> None:
    lead_turn = tool_calls(
        (DELEGATE, {"agent_name": "alpha", "task": "a"}),
        (DELEGATE, {"agent_name": "beta", "task": "b"}),
        usage=_usage(1, 100, 10, 0.01),
    )
    lead, _ = scripted_lead(
        {
            "lead": [lead_turn, reply("done", usage=_usage(1, 200, 20, 0.02))],
            "alpha": [
                tool_call("nothing", usage=_usage(1, 30, 3, 0.003)),
                reply("a", usage=_usage(1, 40, 4, 0.004)),
            ],
            "beta": [reply("b", usage=_usage(1, 50, 5, 0.005))],
        },
        [definition("alpha"), definition("beta")],
    )
    result = await lead.run("go")
    tree = lead.usage_tree()

    assert (tree.delegation_id, tree.run_id, tree.stop_reason) == (None, result.run_id, "complete")
    assert tree.subtree == result.usage
    assert tree.own == AgentUsage(
        requests=2, tool_calls=2, input_tokens=300, output_tokens=30, cost_usd=0.03
    )
    # Both were asked in one turn and run in parallel: admission order is theirs to race.
    by_name = {str(c.agent_name): c for c in tree.children}
    assert sorted(by_name) == ["alpha", "beta"]
    alpha, beta = by_name["alpha"], by_name["beta"]
    # alpha's call of an unknown tool is a tool call it made (refused, but counted).
    assert alpha.own == alpha.subtree
    assert (alpha.own.requests, alpha.own.tool_calls, alpha.own.input_tokens) == (2, 1, 70)
    assert alpha.own.cost_usd == pytest.approx(0.007)
    assert beta.own.cost_usd == pytest.approx(0.005)
    records = {r.delegation_id: r for r in lead.list_subagents()}
    for child in tree.children:
        assert child.delegation_id is not None
        assert child.subtree == records[child.delegation_id].usage
        assert child.status == "completed"
    # Every node's own usage adds up to the run's.
    nodes = [node for _, node in tree.walk()]
    assert [depth for depth, _ in tree.walk()] == [0, 1, 1]
    total = _sum(nodes)
    assert total.requests == result.usage.requests == 5
    assert total.input_tokens == result.usage.input_tokens
    assert total.tool_calls == result.usage.tool_calls
    assert total.cost_usd == pytest.approx(result.usage.cost_usd)

    data = tree.to_json()
    assert msgspec.json.decode(data, type=UsageNode) == tree
    decoded = msgspec.json.decode(data)["children"]
    assert {c["agent_name"]: c["own"]["requests"] for c in decoded} == {"alpha": 2, "beta": 1}


async def test_a_delegation_that_never_started_is_a_node_with_nothing_used() -> None:
    lead, _ = scripted_lead(
        {
            "lead": [
                tool_calls(
                    (DELEGATE, {"agent_name": "alpha", "task": "a"}),
                    (DELEGATE, {"agent_name": "alpha", "task": "b"}),
                ),
                "done",
            ],
            "alpha": ["a", "b"],
        },
        [definition("alpha")],
        usage_limits=UsageLimits(max_requests=3),
    )
    result = await lead.run("go")
    tree = lead.usage_tree()
    statuses = sorted(str(c.status) for c in tree.children)
    assert statuses == ["completed", "not_started"]
    [idle] = [c for c in tree.children if c.status == "not_started"]
    assert idle.own == idle.subtree == AgentUsage()
    assert _sum([n for _, n in tree.walk()]).requests == result.usage.requests


async def test_unknown_costs_stay_unknown() -> None:
    lead, _ = scripted_lead(
        {"lead": [tool_call(DELEGATE, {"agent_name": "alpha", "task": "a"}), "done"],
         "alpha": ["a"]},
        [definition("alpha")],
    )  # fmt: skip
    await lead.run("go")
    tree = lead.usage_tree()
    assert tree.own.cost_usd is None
    assert tree.children[0].own.cost_usd is None


async def test_a_parallel_batch_has_a_tree_too() -> None:
    lead, _ = scripted_lead({"alpha": lambda request: "x"}, [definition("alpha")])
    batch = await lead.parallel_delegate([("alpha", "one"), ("alpha", "two")])
    tree = usage_tree(batch.run, lead.list_subagents())
    assert len(tree.children) == 2
    assert tree.subtree == batch.run.usage
    assert tree.own.requests == 0  # the batch itself sends nothing
    assert _sum([n for _, n in tree.walk()]).requests == batch.run.usage.requests == 2


def test_a_lead_that_has_not_run_has_no_tree() -> None:
    lead, _ = scripted_lead({"lead": ["x"]}, [definition("alpha")], name="boss")
    with pytest.raises(RuntimeError, match="boss has no finished run"):
        lead.usage_tree()
