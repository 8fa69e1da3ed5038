"""Workflow code resolving a delegation's skills and MCP servers on a worker, once.

The definition names them (``AgentSpec.skills``, ``mcp_tools``, ``mcp_servers``); before
anything else, the child workflow asks a worker (the ``deputy_agent_resolve`` activity)
what they are there: the skills' prompt section, the names to offer, and the owned MCP
servers to bind as owned resources. The answer is recorded in the history, so a replay
offers the same tools; a run continued as new carries the resolved definition and does
not ask again.
"""

from __future__ import annotations

from datetime import timedelta

import msgspec
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from ._cancel import cancelling

with workflow.unsafe.imports_passed_through():
    from ..runtime import AgentResult, AgentUsage, StopReason
    from ._agent_extras import AGENT_RESOLVE_ACTIVITY, AgentExtras, needs_extras
    from ._resource_values import OwnedResourceSpec
    from ._values import SubagentInput

__all__ = ["resolve_agent"]

#: Starting a shared server that died takes at most its start timeout (30 s by default).
RESOLVE_TIMEOUT = timedelta(minutes=2)
RESOLVE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_attempts=3,
    non_retryable_error_types=["AgentSetupError"],
)


async def resolve_agent(request: SubagentInput) -> tuple[SubagentInput, AgentResult | None]:
    """``request`` with its definition's skills and MCP servers resolved by a worker.

    Args:
        request: The delegation's input.

    Returns:
        The input to run (unchanged when there is nothing to resolve or it was resolved
        before a continue-as-new), and the result of a delegation whose setup failed (a
        skill or server the worker does not have, a tool its server does not offer), or
        ``None``.
    """
    spec = request.spec
    if request.checkpoint is not None or not needs_extras(spec):
        return request, None
    try:
        extras: AgentExtras = await workflow.execute_activity(
            AGENT_RESOLVE_ACTIVITY,
            spec,
            result_type=AgentExtras,
            start_to_close_timeout=RESOLVE_TIMEOUT,
            retry_policy=RESOLVE_RETRY,
        )
    except ActivityError as exc:
        if cancelling(exc):
            raise
        return request, _setup_failed(request, str(exc.cause if exc.cause is not None else exc))
    prompt = spec.system_prompt
    if extras.prompt:
        prompt = f"{prompt}\n\n{extras.prompt}" if prompt else extras.prompt
    resolved = msgspec.structs.replace(
        spec, system_prompt=prompt, tools=(*spec.tools, *extras.tools)
    )
    owned = tuple(OwnedResourceSpec(name=name) for name in extras.owned)
    resources = (*request.resources, *owned, *extras.leases)
    return msgspec.structs.replace(request, spec=resolved, resources=resources), None


def _setup_failed(request: SubagentInput, error: str) -> AgentResult:
    return AgentResult(
        response="",
        turns=(),
        usage=AgentUsage(),
        stop_reason=StopReason.SETUP_ERROR,
        agent_id=request.agent_id,
        run_id=request.run_id,
        agent_name=request.spec.name,
        delegation_id=request.delegation_id,
        parent_agent_id=request.parent_agent_id,
        parent_run_id=request.parent_run_id,
        limits=request.limits,
        error=error,
    )
