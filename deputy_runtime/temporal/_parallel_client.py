"""The client side of a durable ``parallel_delegate``: validate, start, await, convert."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta

from temporalio.client import Client

from ..definitions import AgentDefinition
from ..errors import DefinitionError
from ..runtime import (
    Brief,
    DelegationPolicy,
    HookEvent,
    ParallelResult,
    Permissions,
    UsageLimits,
    batch_limits,
    check_batch,
    first_message,
    record_outcome,
)
from ._batch import ParallelInput, ParallelOutput, ResponderTask
from ._ceiling import child_permissions
from ._client import agent_spec, permission_spec
from ._hooks import batch_hook_events, observer_names
from ._limits import delegation_limits, raise_on_exceed
from ._parallel import ParallelDelegateWorkflow
from ._resource_values import ResourceSpec, check_owned, resource_specs
from ._trace import traced_client

__all__ = ["DEFAULT_MAX_ACTIVE", "parallel_delegate", "parallel_input", "parallel_result"]

#: Responders running at once when ``max_active`` is not given (``LeadAgent``'s default).
DEFAULT_MAX_ACTIVE = 4


def parallel_input(
    tasks: Mapping[str, str] | Sequence[tuple[str, str]],
    definitions: Sequence[AgentDefinition] | Mapping[str, AgentDefinition],
    *,
    model: str,
    usage_limits: UsageLimits | None = None,
    permissions: Permissions | None = None,
    max_active: int | None = None,
    name: str = "lead",
    model_aliases: Mapping[str, str] | None = None,
    delegation_policy: DelegationPolicy | None = None,
    resources: Sequence[ResourceSpec] = (),
    hook_events: Iterable[HookEvent | str] = (),
) -> ParallelInput:
    """The batch workflow's input, checked as in-process before anything starts.

    Args:
        tasks: Definition name -> task, or ``(name, task)`` pairs.
        definitions: The definitions the names refer to (names must be unique).
        model: The ``provider/model`` spec responders with ``model: inherit`` use.
        usage_limits: The whole batch's limits.
        permissions: Every responder's ceiling.
        max_active: How many responders run at once (``None``: 4, as in-process).
        name: The batch's agent name (its ``run`` result's ``agent_name``).
        model_aliases: Model aliases for the definitions' ``model``.
        delegation_policy: As for :func:`lead_input`: its resource modes bind every
            responder, its ``max_seconds`` bounds each responder's time (tightened by
            the time the batch has left); ``max_delegations`` does not apply to a batch.
        resources: Resource specs binding the responders, after the policy's.
        hook_events: The batch's hook events the workers' hooks run for, each in a
            ``deputy_hook`` activity: SubagentStart and SubagentStop per responder (the
            only ones a batch fires in-process). The policy's ``observers`` forward the
            responders' own run events (SessionStart, UserPromptSubmit, Stop; responders
            have no tools, so no tool event), as in-process.

    Returns:
        The input :func:`parallel_delegate` starts the workflow with.

    Raises:
        DefinitionError: A name is not among ``definitions``, or two definitions share
            a name.
        DelegationBindingError: A named definition has tools, skills or mcp_servers.
        PermissionCeilingError: A named definition asks for a mode ``permissions``
            cannot reach.
        ValueError: ``tasks`` is empty, ``max_active`` is not a positive int, or
            ``permissions`` carry a ``can_use_tool`` callback.
        TypeError: ``tasks`` or ``usage_limits`` has the wrong type.
    """
    values = definitions.values() if isinstance(definitions, Mapping) else definitions
    registered: dict[str, AgentDefinition] = {}
    for definition in values:
        if not isinstance(definition, AgentDefinition):
            raise TypeError(f"expected an AgentDefinition, got {type(definition).__name__}")
        if definition.name in registered:
            raise DefinitionError(f"Sub-agent {definition.name!r} is given twice")
        registered[definition.name] = definition
    active = DEFAULT_MAX_ACTIVE if max_active is None else max_active
    pairs, chosen = check_batch(registered, tasks, active)
    limits = batch_limits(UsageLimits(), usage_limits)
    ceiling = permission_spec(permissions or Permissions())
    specs = {d.name: agent_spec(d, model, model_aliases) for d in chosen}
    for spec in specs.values():
        child_permissions(ceiling, spec)  # the in-process batch refuses this up front too
    bound = resource_specs(delegation_policy, resources)
    check_owned(bound, specs.values())
    responders = tuple(
        ResponderTask(
            agent_name=definition.name,
            task=task,
            message=first_message(definition, Brief(task=task)),
        )
        for definition, (_, task) in zip(chosen, pairs, strict=True)
    )
    return ParallelInput(
        responders=responders,
        sub_agents=tuple(specs.values()),
        model=model,
        limits=limits,
        permissions=ceiling,
        max_active=active,
        name=name,
        delegation=delegation_limits(delegation_policy),
        resources=bound,
        hook_events=batch_hook_events(hook_events),
        observers=observer_names(delegation_policy),
    )


def parallel_result(output: ParallelOutput) -> ParallelResult:
    """The in-process :class:`~deputy_runtime.ParallelResult` of a settled batch.

    Args:
        output: The batch workflow's result.

    Returns:
        Names, results, errors, statuses, outcomes and delegation ids in input order, and
        the batch as one result.
    """
    records = output.subagents
    return ParallelResult(
        names=tuple(r.agent_name for r in records),
        results=output.results,
        errors=tuple(r.error for r in records),
        statuses=tuple(r.status for r in records),
        outcomes=tuple(
            record_outcome(r, result, structured=r.output is not None)
            for r, result in zip(records, output.results, strict=True)
        ),
        outputs=tuple(r.output for r in records),
        delegation_ids=tuple(r.delegation_id for r in records),
        run=output.run,
    )


async def parallel_delegate(
    client: Client,
    tasks: Mapping[str, str] | Sequence[tuple[str, str]],
    definitions: Sequence[AgentDefinition] | Mapping[str, AgentDefinition],
    *,
    model: str,
    task_queue: str,
    workflow_id: str,
    usage_limits: UsageLimits | None = None,
    permissions: Permissions | None = None,
    max_active: int | None = None,
    name: str = "lead",
    model_aliases: Mapping[str, str] | None = None,
    execution_timeout: timedelta | None = None,
    delegation_policy: DelegationPolicy | None = None,
    resources: Sequence[ResourceSpec] = (),
    hook_events: Iterable[HookEvent | str] = (),
) -> ParallelResult:
    """Fan tasks out to stateless responders on Temporal and wait for the batch.

    Everything is checked before the batch workflow starts (see :func:`parallel_input`
    for what is refused). Each responder is a child workflow,
    ``<workflow_id>/<delegation id>``; at most ``max_active`` run at once, each taking
    its share of ``usage_limits`` as in-process. While it runs, the batch workflow
    (``client.get_workflow_handle(workflow_id)``) takes the ``interrupt`` signal and
    answers the ``events`` query. Cancelling this coroutine stops waiting, not the batch.

    Args:
        client: A client built with :data:`data_converter`.
        tasks: Definition name -> task, or ``(name, task)`` pairs.
        definitions: The definitions the names refer to.
        model: The ``provider/model`` spec responders with ``model: inherit`` use.
        task_queue: The task queue the workers serve.
        workflow_id: The batch workflow's id.
        usage_limits: The whole batch's limits.
        permissions: Every responder's ceiling.
        max_active: How many responders run at once (``None``: 4, as in-process).
        name: The batch's agent name.
        model_aliases: Model aliases for the definitions' ``model``.
        execution_timeout: Fail the batch if it has not finished by then.
        delegation_policy: See :func:`parallel_input`.
        resources: See :func:`parallel_input`.
        hook_events: See :func:`parallel_input`.

    Returns:
        The same :class:`~deputy_runtime.ParallelResult` as ``LeadAgent.parallel_delegate``.

    Raises:
        DefinitionError: See :func:`parallel_input`.
        DelegationBindingError: See :func:`parallel_input`.
        PermissionCeilingError: See :func:`parallel_input`.
        ValueError: See :func:`parallel_input`.
        TypeError: See :func:`parallel_input`.
        RequestLimitExceeded: The batch stopped at its request limit with
            ``on_exceed="error"``, as in-process.
        BudgetExceeded: The batch stopped at another limit with ``on_exceed="error"``.
    """
    request = parallel_input(
        tasks,
        definitions,
        model=model,
        usage_limits=usage_limits,
        permissions=permissions,
        max_active=max_active,
        name=name,
        model_aliases=model_aliases,
        delegation_policy=delegation_policy,
        resources=resources,
        hook_events=hook_events,
    )
    handle = await traced_client(client).start_workflow(
        ParallelDelegateWorkflow.run,
        request,
        id=workflow_id,
        task_queue=task_queue,
        execution_timeout=execution_timeout,
    )
    result = parallel_result(await handle.result())
    raise_on_exceed(result.run)
    return result
