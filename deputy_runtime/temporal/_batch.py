"""Values of a durable ``parallel_delegate`` batch: its workflow input and output.

Frozen msgspec Structs of plain data, recorded in the batch workflow's history as JSON
(see ``_converter``).
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from ..runtime import AgentResult, SubagentRecord, UsageLimits
from ._limits import DelegationLimits
from ._resource_values import ResourceSpec
from ._values import AgentSpec, PermissionSpec

__all__ = ["ParallelInput", "ParallelOutput", "ResponderTask"]


class ResponderTask(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """One responder of a batch: its definition's name, its task, and its first message
    (built on the client exactly as in-process)."""

    agent_name: str
    task: str
    message: str


class ParallelInput(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """Everything a batch needs, recorded as the batch workflow's input.

    ``responders`` are in input order; ``sub_agents`` holds each named definition once;
    ``limits`` is the whole batch's budget; every responder runs under ``permissions``
    (capped by its definition's mode) and at most ``max_active`` run at once.
    """

    responders: tuple[ResponderTask, ...]
    sub_agents: tuple[AgentSpec, ...]
    model: str
    limits: UsageLimits
    permissions: PermissionSpec
    max_active: Annotated[int, msgspec.Meta(ge=1)]
    name: str = "lead"
    #: The delegation policy's limits (its ``max_seconds`` bounds each responder).
    delegation: DelegationLimits = DelegationLimits()
    #: Resource specs binding the responders, as a lead's bind its delegations.
    resources: tuple[ResourceSpec, ...] = ()
    #: Batch hook events the workers' hooks run for (SubagentStart, SubagentStop).
    hook_events: tuple[str, ...] = ()
    #: The responders' own run events forwarded to the workers' hooks (SessionStart,
    #: UserPromptSubmit, Stop): the policy's observers, as in-process.
    observers: tuple[str, ...] = ()


class ParallelOutput(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """A settled batch: the batch as one result, one record and one result (``None``
    where it never ran) per responder, in input order."""

    run: AgentResult
    subagents: tuple[SubagentRecord, ...]
    results: tuple[AgentResult | None, ...]
