"""The cost tree: what a lead run and each of its delegations used, on its own and in all.

A run's usage counts its own requests, tool calls, tokens and cost plus the settled
usage of its delegations (the meter adds each one when it settles). The tree splits it
back: every node has the run's ``own`` usage and its ``subtree`` (own plus every
descendant's), so the nodes' ``own`` values add up to the root's ``subtree``, which is
the lead's ``AgentResult.usage``. A delegation's parent is the run whose id is its
``parent_run_id``, so the tree is as deep as the delegations went.

Costs: an unknown cost (``None``: the provider reports no prices) stays unknown; a known
one is split like the counts, rounded to the micro-cent so float sums do not leave
``-0.0000000001`` behind.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import msgspec

from ._records import SubagentRecord
from ._result import AgentResult
from ._states import DelegationStatus, StopReason
from ._usage import AgentUsage

__all__ = ["UsageNode", "usage_tree"]

_COUNTS = ("requests", "tool_calls", "input_tokens", "output_tokens", "cached_input_tokens")


class UsageNode(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """One run in a cost tree: the lead's (the root) or one delegation's subagent.

    Attributes:
        agent_name: The agent's name (``None`` for an unnamed lead).
        agent_id: The agent's id.
        run_id: The run's id.
        delegation_id: The delegation's id; ``None`` for the root.
        status: The delegation's status; ``None`` for the root.
        stop_reason: Why the run (or the delegation) ended.
        own: What this run used itself, its delegations left out.
        subtree: ``own`` plus every descendant's usage.
        children: The delegations this run started, in admission order.
    """

    agent_name: str | None
    agent_id: str
    run_id: str
    delegation_id: str | None
    status: DelegationStatus | None
    stop_reason: StopReason | None
    own: AgentUsage
    subtree: AgentUsage
    children: tuple[UsageNode, ...] = ()

    def walk(self) -> Iterator[tuple[int, UsageNode]]:
        """Every node of the tree, depth first, with its depth (the root's is 0).

        Returns:
            An iterator of ``(depth, node)`` pairs, parents before their children.
        """
        stack: list[tuple[int, UsageNode]] = [(0, self)]
        while stack:
            depth, node = stack.pop()
            yield depth, node
            stack.extend((depth + 1, c) for c in reversed(node.children))

    def to_json(self) -> bytes:
        """The tree as JSON (``msgspec.json.decode(data, type=UsageNode)`` reads it back).

        Returns:
            Compact UTF-8 JSON bytes.
        """
        return msgspec.json.encode(self)


def usage_tree(result: AgentResult, records: Sequence[SubagentRecord]) -> UsageNode:
    """The cost tree of one lead run from its result and the lead's delegation records.

    Args:
        result: The lead run's result (``LeadAgent.run``, or ``ParallelResult.run``).
        records: The lead's records (``LeadAgent.list_subagents()``); those of other
            runs are left out.

    Returns:
        The root node: the lead run, with its delegations below it.
    """
    below: dict[str, list[SubagentRecord]] = {}
    for record in records:
        if record.parent_run_id is not None:
            below.setdefault(record.parent_run_id, []).append(record)

    def node(record: SubagentRecord) -> UsageNode:
        children = tuple(node(r) for r in below.get(record.run_id, ()))
        return UsageNode(
            agent_name=record.agent_name,
            agent_id=record.agent_id,
            run_id=record.run_id,
            delegation_id=record.delegation_id,
            status=record.status,
            stop_reason=record.stop_reason,
            own=_without(record.usage, children),
            subtree=record.usage,
            children=children,
        )

    children = tuple(node(r) for r in below.get(result.run_id, ()))
    return UsageNode(
        agent_name=result.agent_name,
        agent_id=result.agent_id,
        run_id=result.run_id,
        delegation_id=None,
        status=None,
        stop_reason=result.stop_reason,
        own=_without(result.usage, children),
        subtree=result.usage,
        children=children,
    )


def _without(total: AgentUsage, children: Sequence[UsageNode]) -> AgentUsage:
    """``total`` less the children's subtrees (never below zero)."""
    if not children:
        return total
    counts = {
        f: max(0, getattr(total, f) - sum(getattr(c.subtree, f) for c in children)) for f in _COUNTS
    }
    cost = total.cost_usd
    if cost is not None:
        spent = sum(c.subtree.cost_usd or 0.0 for c in children)
        cost = max(0.0, round(cost - spent, 12))
    return AgentUsage(**counts, cost_usd=cost)
