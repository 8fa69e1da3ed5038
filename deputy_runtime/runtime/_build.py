"""Building a subagent for one delegation: chat, prompt, ceiling, resources, tools.

Setup failures raise before any provider request; whatever a resource mode bound is
already registered on the delegation, so the coordinator releases it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import msgspec

from ..chat import Chat, ModelSource, resolve_model
from ..chat import chat as chat_from_spec
from ..definitions import AgentDefinition, missing_mcp_server_message
from ..errors import DelegationBindingError
from ..skills import Skill, skill_load
from ..tools import Tool, ask_user_tool
from ._agent import Agent
from ._compaction import Compaction
from ._context import Governance, RunOwner
from ._events import EventSink, WarningEvent
from ._hooks import HookEvent, Hooks
from ._ledger import BudgetLedger
from ._permissions import ASK_USER_TOOL_NAME, normalize_tool_name
from ._policy import DelegationPolicy
from ._records import Delegation, DelegationContext
from ._resources import BindRequest, ResourceMode, SharedResources
from ._usage import UsageLimits

__all__ = ["LeadHandle", "build_subagent"]

# Model parameters that would attach tools the runtime cannot govern.
_PROVIDER_TOOL_PARAMS = frozenset({"tools", "builtin_tools", "web_search_options", "server_tools"})


class LeadHandle(RunOwner, Protocol):
    """What building a subagent reads from its lead (``LeadAgent`` implements it)."""

    delegation_policy: DelegationPolicy
    delegation_scope: dict[str, Any] | None
    model_aliases: Mapping[str, str]
    shared_budget: BudgetLedger | None
    compaction: Compaction


class _LazyContext:
    """The DelegationContext, built only if a host callback asks for it."""

    __slots__ = ("d", "lead", "value")

    def __init__(self, d: Delegation, lead: LeadHandle) -> None:
        self.d = d
        self.lead = lead
        self.value: DelegationContext | None = None

    def __call__(self) -> DelegationContext:
        if self.value is None:
            lead = self.lead
            self.value = self.d.context(lead.delegation_scope, str(lead.working_dir))
        return self.value


async def build_subagent(
    lead: LeadHandle,
    d: Delegation,
    limits: UsageLimits,
    forwarded: frozenset[HookEvent],
    *,
    stateless: bool = False,
    emit: EventSink | None = None,
) -> Agent:
    """Build the fresh subagent for ``d`` and bind its resources.

    Args:
        lead: The lead delegating.
        d: The delegation (its definition must be known).
        limits: The subagent's limits (its reserved budget).
        forwarded: The hook events its calls forward to the lead's hooks.
        stateless: A ``parallel_delegate`` responder: no resource modes, and no tools
            or skills allowed.
        emit: Where a warning about the subagent's model goes (an alias the lead's
            provider cannot serve runs on the lead's model instead).

    Returns:
        The subagent, with ``d.child`` set to it.

    Raises:
        DelegationBindingError: The definition cannot be bound (mcp_servers without an
            owned mode, provider-native tools, ``ask_user`` without ``human_input``, ...).
        ResourceBusyError: An exclusive resource is busy (and the mode does not wait).
        PermissionCeilingError: The definition asks for a wider permission mode.
    """
    definition = d.definition
    assert definition is not None  # unknown agents fail before a subagent is built
    policy = lead.delegation_policy
    modes: tuple[ResourceMode, ...] = () if stateless else policy.resource_modes
    supplied = False
    for mode in modes:
        supplied = supplied or mode.supplies_tools
    # Servers attached to the lead (an McpResource per server) give a subagent that names
    # them all their tools; any other name needs an owned resource factory to supply it.
    attached_servers = {getattr(mode, "mcp_server", None) for mode in modes}
    unattached = [s for s in definition.mcp_servers or () if s not in attached_servers]
    if unattached and not supplied:
        raise DelegationBindingError(
            f"Subagent '{definition.name}' names mcp_servers ({', '.join(unattached)}) "
            "that the lead has not attached: attach each one (an McpResource, or the "
            "command line's .mcp.json / --mcp-config) or supply them with an owned "
            "resource factory (DelegationPolicy(resource_mode='owned', resources=...))."
        )
    if definition.mcp_tools:
        # Every MCP name must belong to a server attached to the lead (a mode with an
        # ``mcp_server`` name): failing here is clearer than a subagent that silently
        # lacks the tools it names.
        attached = {getattr(mode, "mcp_server", None) for mode in modes}
        for name in definition.mcp_tools:
            server = _mcp_server(name)
            if server not in attached:
                raise DelegationBindingError(missing_mcp_server_message(server, definition.name))
    for mode in modes:
        mode.check(definition)
    context = _LazyContext(d, lead)
    skills = _load_skills(definition.skills)
    skill_tools = tuple(t for s in skills for t in s.tools) if skills else ()
    # Modes that do not supply tools (shared, exclusive) bind before anything else, so an
    # overlapping exclusive delegation fails before a chat or subagent is built.
    # Tools such a mode returns (an attached MCP server's) join the definition's tools.
    attached_tools: tuple[Tool, ...] = ()
    for mode in modes:
        # Shared mode binds nothing: skipping its no-op acquire saves a request object
        # and a coroutine per delegation.
        if not mode.supplies_tools and not isinstance(mode, SharedResources):
            request = BindRequest(d, definition, None, skill_tools, context, emit)
            attached_tools += await mode.acquire(request)
    permissions = lead.permissions.ceiling(
        definition.permission_mode, definition.disallowed_tools or ()
    )
    chat = _subagent_chat(lead, d, context, emit)
    child = Agent(
        chat,
        name=definition.name,
        permissions=permissions,
        usage_limits=limits,
        skills=skills,
        disallowed_tools=definition.disallowed_tools or (),
        agent_id=d.agent_id,
        hooks=_definition_hooks(definition),
        output_schema=definition.output_schema,
        output_retries=definition.output_retries,
        compaction=_compaction(lead.compaction, definition),
        governance=Governance(
            delegation_id=d.delegation_id,
            parent_run_id=d.parent_run_id,
            lead=lead,
            forwarded=forwarded,
            human_input=_human_input(policy, context),
        ),
    )
    d.child = child
    tools: tuple[Tool, ...] = () if supplied else definition.tools + skill_tools
    if supplied:
        for mode in modes:
            if mode.supplies_tools:
                request = BindRequest(d, definition, child, skill_tools, context, emit)
                tools += await mode.acquire(request)
    tools += attached_tools
    tools = _without_disallowed(tools, definition.disallowed_tools)
    if stateless and (tools or skills):
        raise DelegationBindingError(
            f"Subagent '{definition.name}' is not stateless: parallel_delegate responders "
            "cannot have tools or skills."
        )
    child.set_tools(_bind_human_input(policy, tools, context, definition.name))
    return child


def _compaction(lead: Compaction, definition: AgentDefinition) -> Compaction:
    """The lead's compaction setting, at the definition's ``compact_at`` when it has one."""
    if definition.compact_at is None or definition.compact_at == lead.threshold:
        return lead
    return msgspec.structs.replace(lead, threshold=definition.compact_at)


def _definition_hooks(definition: AgentDefinition) -> Hooks | None:
    """The command hooks of the definition (an agent file's ``hooks``), for this
    delegation's own events; its calls still reach the lead's hooks too."""
    if definition.hooks is None:
        return None
    # Imported here: the command hooks build on this package.
    from ..command_hooks import command_hooks

    return command_hooks(definition.hooks, Path(f"{definition.name} (hooks)"))


def _subagent_chat(
    lead: LeadHandle, d: Delegation, context: _LazyContext, emit: EventSink | None
) -> Chat:
    """The subagent's chat per the policy factory or the definition's model rule.

    The policy's ``chat`` factory wins; otherwise :func:`resolve_model` decides: a
    Claude Code alias or another vendor's model id is never sent raw, and a model the
    lead's provider cannot serve becomes the lead's model plus a WarningEvent.
    """
    definition = d.definition
    assert definition is not None
    system_prompt = _system_prompt(definition)
    factory = lead.delegation_policy.chat
    if factory is not None:
        made = factory(definition, context())
        if not isinstance(made, Chat):
            raise DelegationBindingError(
                f"DelegationPolicy.chat must return a Chat, got {type(made).__name__}"
            )
        if made is lead.chat:
            raise DelegationBindingError(
                "DelegationPolicy.chat returned the lead's own chat; return a new Chat."
            )
        chat = made.fresh(system_prompt)
    else:
        choice = resolve_model(
            definition.model,
            str(getattr(lead.chat.provider, "name", "") or ""),
            aliases=lead.model_aliases,
            plan_mode=definition.permission_mode == "plan",
        )
        if choice.warning is not None and emit is not None:
            emit(WarningEvent(**d.event_ids(), message=choice.warning))
        if choice.source is ModelSource.LEAD or choice.model is None:
            chat = lead.chat.fresh(system_prompt)
        elif choice.source is ModelSource.SPEC:
            chat = chat_from_spec(choice.model, system_prompt=system_prompt)
        else:
            chat = Chat(
                lead.chat.provider.with_model(choice.model),
                system_prompt,
                params=lead.chat.params,
            )
    if definition.params:
        chat.set_params({**chat.params, **definition.params})
    _refuse_provider_native_tools(definition, chat)
    return chat


def _mcp_server(name: str) -> str:
    """The server part of an MCP tool name (``mcp__<server>`` or ``mcp__<server>__<tool>``)."""
    return name.removeprefix("mcp__").split("__", 1)[0]


def _refuse_provider_native_tools(definition: AgentDefinition, chat: Chat) -> None:
    """Raise if the subagent's request would carry a provider-native tool parameter.

    Checked on the final parameters, whatever their source: the definition, the policy's
    chat factory, the lead's chat the subagent inherits, and the provider's own default
    ``params`` (an inherited provider sends those with every request).
    """
    provider_params = getattr(chat.provider, "params", None)
    sources = [chat.params]
    if isinstance(provider_params, Mapping):
        sources.append(provider_params)
    bad = sorted({key for params in sources for key in params if key in _PROVIDER_TOOL_PARAMS})
    if bad:
        raise DelegationBindingError(
            f"Subagent '{definition.name}' model parameters {bad} would attach "
            "provider-native tools, whose calls the runtime cannot check; remove them."
        )


def _system_prompt(definition: AgentDefinition) -> str:
    if not definition.memory:
        return definition.prompt
    notes = "\n".join(f"- {m}" for m in definition.memory)
    return f"{definition.prompt}\n\n# Memory\n\n{notes}"


def _load_skills(skills: tuple[Skill | str, ...]) -> tuple[Skill, ...]:
    if not skills:
        return ()
    return tuple(s if isinstance(s, Skill) else skill_load(s) for s in skills)


def _without_disallowed(
    tools: tuple[Tool, ...], disallowed: tuple[str, ...] | None
) -> tuple[Tool, ...]:
    if not disallowed:
        return tools
    deny = {normalize_tool_name(n) for n in disallowed}
    return tuple(t for t in tools if normalize_tool_name(t.name) not in deny)


def _human_input(
    policy: DelegationPolicy, context: Callable[[], DelegationContext]
) -> Callable[[list[dict[str, Any]]], Any] | None:
    """The policy's ``human_input`` bound to the delegation's context (what an MCP
    server's elicitation asks through), ``None`` without one."""
    human = policy.human_input
    if human is None:
        return None

    def ask(questions: list[dict[str, Any]]) -> Any:
        return human(questions, context())

    return ask


def _bind_human_input(
    policy: DelegationPolicy,
    tools: tuple[Tool, ...],
    context: Callable[[], DelegationContext],
    name: str,
) -> tuple[Tool, ...]:
    if not any(normalize_tool_name(t.name) == ASK_USER_TOOL_NAME for t in tools):
        return tools
    if policy.human_input is None:
        raise DelegationBindingError(
            f"Subagent '{name}' has ask_user: delegated human input requires "
            "DelegationPolicy(human_input=...)."
        )
    bound = ask_user_tool(policy.human_input, context())
    return tuple(bound if normalize_tool_name(t.name) == ASK_USER_TOOL_NAME else t for t in tools)
