"""The client side: turning definitions into workflow inputs and starting a lead run."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from temporalio.client import Client, WorkflowHandle

from .._outputschema import SchemaProblem, json_schema_of, output_schema_value
from ..chat import ModelSource, parse_model_spec, resolve_model
from ..definitions import AgentDefinition
from ..errors import DefinitionError, DelegationBindingError, ToolDefinitionError
from ..runtime import DelegationPolicy, HookEvent, Permissions, UsageLimits, normalize_tool_name
from ..tools import inline_refs
from ._agent_extras import skill_names
from ._hooks import hook_event_names, observer_names
from ._limits import delegation_limits
from ._resource_values import ResourceSpec, check_owned, resource_specs
from ._trace import traced_client
from ._values import AgentSpec, LeadInput, LeadOutput, PermissionSpec
from ._workflows import LeadWorkflow

__all__ = ["agent_spec", "lead_input", "permission_spec", "start_lead"]


def agent_spec(
    definition: AgentDefinition, lead_model: str, aliases: Mapping[str, str] | None = None
) -> AgentSpec:
    """``definition`` as workflow input data, its model resolved for ``lead_model``.

    Args:
        definition: The definition to send.
        lead_model: The lead's ``provider/model`` spec.
        aliases: Model aliases, as ``LeadAgent(model_aliases=...)`` takes them.

    Returns:
        The definition as data.

    Raises:
        SkillError: A skill given as a path cannot be loaded (its name is read from it).
        DelegationBindingError: The definition has hooks of its own or a ``compact_at``
            (neither is run durably yet).

    Tools travel by name (each ``Tool.name``); the worker's registry must hold them.
    An output schema travels as its JSON Schema (a ``msgspec.Struct`` or dataclass type
    as msgspec's schema of it), so a durable record's ``output`` is the decoded JSON
    value, not an instance of the type (``msgspec.convert(record.output, Type)`` makes
    one).
    Skills travel by name (``Skill.name``) and MCP tools as written (``mcp_tools``,
    ``mcp_servers``); the worker resolves them when the delegation starts.
    """
    if not isinstance(definition, AgentDefinition):
        raise TypeError(f"expected an AgentDefinition, got {type(definition).__name__}")
    if definition.hooks is not None:
        raise DelegationBindingError(
            f"Agent {definition.name!r} has hooks of its own, which durable runs do not run "
            "yet: give the workers the hooks (a plugin folder's hooks/hooks.json, or a "
            "--plugin's hooks), or drop them with definition.replace(hooks=None)"
        )
    if definition.compact_at is not None:
        raise DelegationBindingError(
            f"Agent {definition.name!r} has compact_at: compaction is not supported durably "
            "yet (durable runs never compact, so the threshold would be ignored); run it with "
            "a LeadAgent, or drop it with definition.replace(compact_at=None)"
        )
    provider, _ = parse_model_spec(lead_model)
    choice = resolve_model(
        definition.model,
        provider,
        aliases=aliases,
        plan_mode=definition.permission_mode == "plan",
    )
    if choice.source is ModelSource.LEAD or choice.model is None:
        model = "inherit"
    elif choice.source is ModelSource.LEAD_PROVIDER:
        model = f"{provider}/{choice.model}"
    else:
        model = choice.model
    prompt = definition.prompt
    if definition.memory:
        notes = "\n".join(f"- {m}" for m in definition.memory)
        prompt = f"{prompt}\n\n# Memory\n\n{notes}"
    return AgentSpec(
        name=definition.name,
        description=definition.description,
        system_prompt=prompt,
        tools=_offered(definition),
        model=model,
        disallowed_tools=tuple(definition.disallowed_tools or ()),
        initial_prompt=definition.initial_prompt,
        max_requests=definition.max_requests,
        permission_mode=definition.permission_mode,
        params=dict(definition.params or {}),
        skills=skill_names(definition.skills),
        mcp_tools=tuple(definition.mcp_tools or ()),
        mcp_servers=tuple(definition.mcp_servers or ()),
        output_schema=_durable_schema(definition),
        output_retries=definition.output_retries,
    )


def _durable_schema(definition: AgentDefinition) -> dict[str, Any] | None:
    """The definition's output schema as a JSON Schema the workflow checks answers with.

    A mapping was checked when the definition was made. A type's schema is msgspec's,
    with its ``$ref``s inlined; it must then be within the supported subset, or the
    workflow could not enforce it.

    Raises:
        DelegationBindingError: The type's schema cannot be checked durably.
    """
    schema = definition.output_schema
    if schema is None:
        return None
    plain = json_schema_of(schema)
    if not isinstance(schema, type):
        return plain
    where = f"Agent {definition.name!r}: output_schema {schema.__name__}"
    try:
        inlined = inline_refs(plain)
        inlined.pop("$defs", None)
        output_schema_value(inlined)
    except (ToolDefinitionError, SchemaProblem) as exc:
        raise DelegationBindingError(
            f"{where} cannot be checked on Temporal: {exc}; durable runs check a JSON "
            "Schema in the supported subset, so give that schema as a mapping instead"
        ) from None
    return inlined


def _offered(definition: AgentDefinition) -> tuple[str, ...]:
    """The definition's tool names the model is offered: those its ``disallowed_tools``
    name are left out, as in-process (its ceiling denies them as well)."""
    hidden = {normalize_tool_name(n) for n in definition.disallowed_tools or ()}
    return tuple(t.name for t in definition.tools if normalize_tool_name(t.name) not in hidden)


def permission_spec(
    permissions: Permissions, *, worker_can_use_tool: bool = False
) -> PermissionSpec:
    """The plain-data part of ``permissions``.

    Args:
        permissions: The permissions to send.
        worker_can_use_tool: Put the calls to the workers' ``can_use_tool`` callback
            (``DeputyActivities(can_use_tool=...)``) after the static checks.

    Returns:
        Mode, allow and deny lists, write root and the callback flag as data.

    Raises:
        ValueError: They carry a ``can_use_tool`` callback, which cannot be recorded in a
            workflow's history, or ``worker_can_use_tool`` is not a bool.
    """
    if permissions.can_use_tool is not None:
        raise ValueError(
            "permissions: can_use_tool callbacks cannot cross the durable boundary; "
            "register the callback on every worker (DeputyActivities(can_use_tool=...), or "
            "a --plugin module's can_use_tool) and start the run with "
            "lead_input(..., worker_can_use_tool=True)"
        )
    if not isinstance(worker_can_use_tool, bool):
        raise ValueError(f"worker_can_use_tool must be True or False, got {worker_can_use_tool!r}")
    return PermissionSpec(
        mode=permissions.mode,
        allow=tuple(sorted(permissions.allow)),
        deny=tuple(sorted(permissions.deny)),
        write_root=None if permissions.write_root is None else str(permissions.write_root),
        can_use_tool=worker_can_use_tool,
    )


def lead_input(
    task: str,
    sub_agents: Sequence[AgentDefinition] | Mapping[str, AgentDefinition],
    *,
    model: str,
    tools: Iterable[str] = (),
    system_prompt: str | None = None,
    usage_limits: UsageLimits | None = None,
    permissions: Permissions | None = None,
    name: str = "lead",
    model_aliases: Mapping[str, str] | None = None,
    max_active_delegations: int | None = None,
    continue_as_new_after: int = 10_000,
    delegation_policy: DelegationPolicy | None = None,
    resources: Iterable[ResourceSpec] = (),
    hook_events: Iterable[HookEvent | str] = (),
    human_input: bool = False,
    worker_can_use_tool: bool = False,
) -> LeadInput:
    """The lead workflow's input for ``task`` over ``sub_agents``.

    Args:
        task: What the lead should do.
        sub_agents: The definitions it may delegate to (names must be unique).
        model: The lead's ``provider/model`` spec (the workers resolve it).
        tools: Names of the lead's own tools in the workers' registry.
        system_prompt: The lead's base prompt (the routing section is added).
        usage_limits: The whole run's limits, delegations included. ``max_seconds`` is
            kept in workflow time (a durable timer); with ``on_exceed="error"`` the run
            still returns its output: pass its result to :func:`raise_on_exceed`.
        permissions: The lead's permissions, every delegation's ceiling.
        name: The lead's agent name.
        model_aliases: Model aliases for the definitions' ``model``.
        max_active_delegations: How many of the run's delegations run at once, as for
            ``LeadAgent`` (the others wait ``queued``, holding no budget); ``None``: all.
        continue_as_new_after: History events after which the lead continues as new at
            its next turn boundary (Temporal's own suggestion also triggers it).
        delegation_policy: Its resource modes bind every delegation: shared needs
            nothing, ``ExclusiveResource`` becomes an :class:`ExclusiveResourceSpec`;
            owned factories and in-process lease backends are refused (they live on the
            workers). Its ``max_seconds`` and ``max_delegations`` travel as
            :class:`DelegationLimits`; its ``observers`` are forwarded from the subagents
            to the workers' hooks, as in-process.
        resources: Resource specs (:class:`OwnedResourceSpec`,
            :class:`ExclusiveResourceSpec`), after the policy's.
        hook_events: The lead-side hook events the workers' hooks run for, each in a
            ``deputy_hook`` activity (SessionStart, UserPromptSubmit, Stop, SubagentStart,
            SubagentStop, and PreToolUse / PostToolUse / PostToolUseFailure around the
            lead's ``delegate_to_agent`` calls). Hooks around tool calls run in the tool
            activity whatever this says; a run without these events pays no activity.
        human_input: Whether delegations may ask a person (``ask_user``); without it a
            delegation to a definition with ``ask_user`` fails with ``setup_error``
            before it starts. Questions are answered with :func:`answer_question`.
        worker_can_use_tool: Put every tool call of the run (the lead's and, through the
            permission ceiling, its subagents') to the workers' ``can_use_tool``
            callback after the static checks, as ``Permissions(can_use_tool=...)`` does
            in-process. A worker without one denies such calls.

    Returns:
        The input to pass to :func:`start_lead`.

    Raises:
        ValueError: A blank task, a ``can_use_tool`` callback,
            ``max_active_delegations`` not a positive int or ``None``, a
            ``continue_as_new_after`` below 1, a ``hook_events`` entry that is not a
            hook event, or a ``human_input`` that is not a bool.
        TypeError: ``usage_limits`` is not a ``UsageLimits``.
        DefinitionError: Two definitions share a name, or one lists tools while an
            owned resource supplies its tools.
        DelegationBindingError: A resource mode or policy setting cannot cross the
            durable boundary.
    """
    if not isinstance(task, str) or not task.strip():
        raise ValueError("task must be a non-blank string")
    events = hook_event_names(hook_events)
    if max_active_delegations is not None and (
        isinstance(max_active_delegations, bool)
        or not isinstance(max_active_delegations, int)
        or max_active_delegations < 1
    ):
        raise ValueError(
            f"max_active_delegations must be a positive int or None, got {max_active_delegations!r}"
        )
    if usage_limits is not None and not isinstance(usage_limits, UsageLimits):
        raise TypeError(
            f"usage_limits must be a UsageLimits or None, got {type(usage_limits).__name__}"
        )
    if not isinstance(human_input, bool):
        raise ValueError(f"human_input must be True or False, got {human_input!r}")
    if (
        isinstance(continue_as_new_after, bool)
        or not isinstance(continue_as_new_after, int)
        or continue_as_new_after < 1
    ):
        raise ValueError(
            "continue_as_new_after must be a whole number of history events >= 1, "
            f"got {continue_as_new_after!r}"
        )
    values = sub_agents.values() if isinstance(sub_agents, Mapping) else sub_agents
    specs = [agent_spec(d, model, model_aliases) for d in values]
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise DefinitionError(f"Sub-agent {spec.name!r} is given twice")
        seen.add(spec.name)
    bound = resource_specs(delegation_policy, resources)
    check_owned(bound, specs)
    return LeadInput(
        task=task,
        model=model,
        sub_agents=tuple(specs),
        tools=tuple(tools),
        system_prompt=system_prompt,
        limits=usage_limits if usage_limits is not None else UsageLimits(),
        permissions=permission_spec(
            permissions or Permissions(), worker_can_use_tool=worker_can_use_tool
        ),
        name=name,
        max_active_delegations=max_active_delegations,
        continue_as_new_after=continue_as_new_after,
        resources=bound,
        hook_events=events,
        human_input=human_input,
        delegation=delegation_limits(delegation_policy),
        observers=observer_names(delegation_policy),
    )


async def start_lead(
    client: Client,
    request: LeadInput,
    *,
    workflow_id: str,
    task_queue: str,
    execution_timeout: timedelta | None = None,
) -> WorkflowHandle[LeadWorkflow, LeadOutput]:
    """Start a lead run.

    Args:
        client: A client built with :data:`data_converter`.
        request: The run's input (:func:`lead_input`).
        workflow_id: The lead workflow's id (its children's are ``<id>/<delegation id>``).
        task_queue: The task queue the workers serve.
        execution_timeout: Fail the run if it has not finished by then.

    Returns:
        The workflow's handle; ``await handle.result()`` gives its :class:`LeadOutput`.

    With tracing configured, the span current here is the parent of the run's spans on
    the workers: the start goes through Temporal's OpenTelemetry ``TracingInterceptor``
    (added on a client sharing ``client``'s connection when ``client`` has none); the
    returned handle is on ``client``.
    """
    traced = traced_client(client)
    handle = await traced.start_workflow(
        LeadWorkflow.run,
        request,
        id=workflow_id,
        task_queue=task_queue,
        execution_timeout=execution_timeout,
    )
    if traced is client:
        return handle
    # Later queries, signals and updates go through the caller's own client, traced only
    # if it is: a client polling ``events`` would otherwise start a trace per query.
    return client.get_workflow_handle_for(
        LeadWorkflow.run,
        workflow_id,
        run_id=handle.run_id,
        first_execution_run_id=handle.first_execution_run_id,
    )
