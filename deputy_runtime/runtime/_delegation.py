"""One delegation, start to finish: route -> admit -> reserve -> build -> run -> settle.

Each step is a named function; :func:`delegate` reads top to bottom. Setup failures make
no provider request and leave no lease, reservation or resource behind. Settlement runs
exactly once, in a ``finally``, also under cancellation; owned cleanup is shielded.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from .._ids import new_id
from ..chat import ModelSource, resolve_model
from ..chat._chat import Chat
from ..chat._registry import chat as chat_from_spec
from ..errors import DelegationBindingError, DeputyError
from ..skills import Skill
from ..tools._tool import Tool
from ._agent import Agent
from ._events import EventSink, WarningEvent
from ._hooks import HookEvent, HookInput
from ._permissions import ASK_USER_TOOL_NAME, normalize_tool_name
from ._policy import (
    DelegationContext,
    DelegationPolicy,
    DelegationResources,
    acquire_lease,
    release_lease,
)
from ._runstate import AgentResult, Governance, ToolRejection
from ._usage import AgentUsage, Meter, Reservation, UsageLimits

if TYPE_CHECKING:
    from ..definitions import AgentDefinition
    from ._lead import LeadAgent

__all__ = ["Brief", "Delegation", "SubagentRecord", "build_outcome", "first_message"]

ANSWER_MAX_BYTES = 8 * 1024
_TASK_MAX_BYTES = 1024 * 1024
#: How long settlement waits for SubagentStop hooks and cleanup while being cancelled.
SHIELDED_SECONDS = 10.0
# Model parameters that would attach tools the runtime cannot govern.
_PROVIDER_TOOL_PARAMS = frozenset({"tools", "builtin_tools", "web_search_options", "server_tools"})


class Brief(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """What the lead's model asked the subagent to do (the delegate tool's arguments)."""

    task: str
    constraints: tuple[str, ...] = ()
    deliverable: str | None = None
    stop_conditions: tuple[str, ...] = ()


class _FirstMessage(msgspec.Struct, frozen=True, gc=False):
    format: str
    definition_initial_prompt: str | None
    brief: Brief


_encode = msgspec.json.Encoder().encode


def first_message(definition: AgentDefinition | None, brief: Brief) -> str:
    """The subagent's first (and only) user message: deputy_delegation_v1 JSON."""
    initial = definition.initial_prompt if definition is not None else None
    message = _FirstMessage("deputy_delegation_v1", initial, brief)
    return _encode(message).decode()


class SubagentRecord(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """A snapshot of one admitted delegation (``LeadAgent.list_subagents()``).

    ``status``: queued, running, completed, stopped, failed or not_started. Times are
    Unix seconds. ``hook_error`` holds ``"EVENT: message"`` lines of hooks that failed
    for this delegation; ``cleanup_error`` the owned cleanup's error, if any.
    """

    delegation_id: str
    agent_name: str
    agent_id: str
    run_id: str
    parent_agent_id: str
    parent_run_id: str | None
    tool_call_id: str | None
    task: str
    status: str
    stop_reason: str | None
    usage: AgentUsage
    limits: UsageLimits | None
    admitted_at: float
    started_at: float | None
    completed_at: float | None
    error: str | None
    hook_error: str | None
    cleanup_error: str | None


class Delegation:
    """Mutable state of one delegation, owned by the lead's tool-call task."""

    __slots__ = (
        "admitted_at",
        "agent_id",
        "agent_name",
        "brief",
        "cancel_reason",
        "child",
        "cleanup",
        "cleanup_error",
        "completed_at",
        "definition",
        "delegation_id",
        "error",
        "hook_errors",
        "lease_key",
        "parent_agent_id",
        "parent_run_id",
        "reservation",
        "result",
        "run_id",
        "settled",
        "started_at",
        "status",
        "stop_reason",
        "task",
        "tool_call_id",
        "usage",
    )

    def __init__(
        self,
        definition: AgentDefinition | None,
        *,
        agent_name: str | None = None,
        delegation_id: str,
        parent_agent_id: str,
        parent_run_id: str | None,
        tool_call_id: str | None,
        brief: Brief,
    ) -> None:
        # None only for a delegation to an unknown agent, recorded as a setup failure.
        self.definition = definition
        self.agent_name = definition.name if definition is not None else (agent_name or "")
        self.delegation_id = delegation_id
        self.agent_id = new_id("agent")
        self.run_id = new_id("run")
        self.parent_agent_id = parent_agent_id
        self.parent_run_id = parent_run_id
        self.tool_call_id = tool_call_id
        self.brief = brief
        self.task = brief.task
        self.status = "queued"
        self.stop_reason: str | None = None
        self.admitted_at = time.time()
        self.started_at: float | None = None
        self.completed_at: float | None = None
        self.usage = AgentUsage()
        self.error: str | None = None
        self.hook_errors: list[str] = []
        self.cleanup_error: str | None = None
        self.result: AgentResult | None = None
        self.child: Agent | None = None
        self.reservation: Reservation | None = None
        self.lease_key: str | None = None
        self.cancel_reason: str | None = None
        self.cleanup: Callable[[], Any] | None = None
        self.settled = False

    def context(self, scope: Mapping[str, Any] | None, working_dir: str) -> DelegationContext:
        """The context handed to host callbacks for this delegation."""
        return DelegationContext(
            delegation_id=self.delegation_id,
            agent_id=self.agent_id,
            agent_name=self.agent_name,
            run_id=self.run_id,
            parent_agent_id=self.parent_agent_id,
            parent_run_id=self.parent_run_id,
            tool_call_id=self.tool_call_id,
            working_dir=working_dir,
            scope=dict(scope) if scope is not None else None,
        )

    def record(self) -> SubagentRecord:
        """An immutable snapshot of this delegation."""
        return SubagentRecord(
            delegation_id=self.delegation_id,
            agent_name=self.agent_name,
            agent_id=self.agent_id,
            run_id=self.run_id,
            parent_agent_id=self.parent_agent_id,
            parent_run_id=self.parent_run_id,
            tool_call_id=self.tool_call_id,
            task=self.task,
            status=self.status,
            stop_reason=self.stop_reason,
            usage=self.usage,
            limits=self.reservation.limits if self.reservation is not None else None,
            admitted_at=self.admitted_at,
            started_at=self.started_at,
            completed_at=self.completed_at,
            error=self.error,
            hook_error="\n".join(self.hook_errors) or None,
            cleanup_error=self.cleanup_error,
        )


# -- building a subagent ------------------------------------------------------------------


async def build_subagent(
    lead: LeadAgent,
    d: Delegation,
    limits: UsageLimits,
    *,
    stateless: bool = False,
    emit: EventSink | None = None,
) -> Agent:
    """Build the fresh subagent for ``d``: chat, prompt, tools, ceiling, governance.

    Takes the exclusive lease first (no await before it), so an overlapping delegation
    fails at once. Raises on any setup problem; the caller releases what was bound.
    """
    definition = d.definition
    assert definition is not None  # unknown agents fail before a subagent is built
    policy = lead.delegation_policy
    mode = "none" if stateless else policy.resource_mode
    if definition.mcp_servers and mode != "owned":
        raise DelegationBindingError(
            f"Subagent '{definition.name}' names mcp_servers "
            f"({', '.join(definition.mcp_servers)}): delegated MCP selections require an "
            "owned resource factory (DelegationPolicy(resource_mode='owned', resources=...))."
        )
    if mode == "exclusive":
        assert policy.resource_key is not None
        acquire_lease(policy.resource_key, d)
        d.lease_key = policy.resource_key
    permissions = lead.permissions.ceiling(
        definition.permission_mode, definition.disallowed_tools or ()
    )
    context = _LazyContext(d, lead)
    chat = _subagent_chat(lead, definition, context, emit)
    skills = _load_skills(definition.skills)
    child = Agent._for_delegation(
        chat,
        name=definition.name,
        permissions=permissions,
        usage_limits=limits,
        working_dir=lead.working_dir,
        skills=skills,
        governance=Governance(
            delegation_id=d.delegation_id,
            parent_run_id=d.parent_run_id,
            lead=lead,
            forwarded=lead._forwarded,
        ),
        agent_id=d.agent_id,
    )
    d.child = child
    skill_tools = tuple(t for s in skills for t in s.tools)
    if mode == "owned":
        tools = await _owned_tools(policy, child, definition, skill_tools, context, d)
    else:
        tools = definition.tools + skill_tools
    tools = _without_disallowed(tools, definition.disallowed_tools)
    if stateless and (tools or skills):
        raise DelegationBindingError(
            f"Subagent '{definition.name}' is not stateless: parallel_delegate responders "
            "cannot have tools or skills."
        )
    tools = _bind_human_input(policy, tools, context, definition.name)
    child._set_delegated_tools(tools, definition.disallowed_tools)
    return child


def _subagent_ids(d: Delegation) -> dict[str, Any]:
    """The id fields of the subagent's own events, for events emitted before it runs."""
    return {
        "agent_id": d.agent_id,
        "agent_name": d.agent_name,
        "run_id": d.run_id,
        "delegation_id": d.delegation_id,
        "parent_agent_id": d.parent_agent_id,
        "parent_run_id": d.parent_run_id,
    }


class _LazyContext:
    """The DelegationContext, built only if a host callback asks for it (hot path)."""

    __slots__ = ("_d", "_lead", "_value")

    def __init__(self, d: Delegation, lead: LeadAgent) -> None:
        self._d = d
        self._lead = lead
        self._value: DelegationContext | None = None

    def get(self) -> DelegationContext:
        if self._value is None:
            lead = self._lead
            self._value = self._d.context(lead.delegation_scope, str(lead.working_dir))
        return self._value


def _subagent_chat(
    lead: LeadAgent,
    definition: AgentDefinition,
    context: _LazyContext,
    emit: EventSink | None = None,
) -> Chat:
    """The subagent's chat per the policy factory or the definition's model rule.

    The policy's ``chat`` factory wins; otherwise :func:`resolve_model` decides, and a
    model the lead's provider cannot serve becomes the lead's model plus a WarningEvent.
    """
    system_prompt = _system_prompt(definition)
    factory = lead.delegation_policy.chat
    if factory is not None:
        made = factory(definition, context.get())
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
        # Claude Code aliases and other vendors' ids are resolved, never sent raw.
        choice = resolve_model(
            definition.model,
            str(getattr(lead.chat.provider, "name", "") or ""),
            aliases=lead.model_aliases,
            plan_mode=definition.permission_mode == "plan",
        )
        if choice.warning is not None and emit is not None:
            emit(WarningEvent(**_subagent_ids(context._d), message=choice.warning))
        if choice.source is ModelSource.LEAD:
            chat = lead.chat.fresh(system_prompt)
        elif choice.source is ModelSource.SPEC:
            assert choice.model is not None
            chat = chat_from_spec(choice.model, system_prompt=system_prompt)
        else:
            assert choice.model is not None
            chat = Chat(
                lead.chat.provider.with_model(choice.model),
                system_prompt,
                params=lead.chat.params,
            )
    if definition.params:
        chat.set_params({**chat.params, **definition.params})
    _refuse_provider_native_tools(definition, chat)
    return chat


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
    from ..skills import skill_load

    return tuple(s if isinstance(s, Skill) else skill_load(s) for s in skills)


async def _owned_tools(
    policy: DelegationPolicy,
    child: Agent,
    definition: AgentDefinition,
    skill_tools: tuple[Tool, ...],
    context: _LazyContext,
    d: Delegation,
) -> tuple[Tool, ...]:
    if definition.tools or skill_tools:
        raise DelegationBindingError(
            f"Subagent '{definition.name}': owned mode requires tools from the resource "
            "factory, not from the definition or its skills."
        )
    assert policy.resources is not None
    before = (child.get_tools(), child.permissions, _hook_snapshot(child))
    made = policy.resources(child, definition, context.get())
    if inspect.isawaitable(made):
        made = await made
    if not isinstance(made, DelegationResources):
        raise DelegationBindingError(
            f"The resource factory must return DelegationResources, got {type(made).__name__}."
        )
    # From here on the cleanup runs exactly once, even if what was returned is invalid.
    d.cleanup = made.cleanup
    made.validate()
    after = (child.get_tools(), child.permissions, _hook_snapshot(child))
    if after != before or child.last_result is not None:
        raise DelegationBindingError(
            "Resource factories must return tools without changing or running the child."
        )
    return made.tools


def _hook_snapshot(agent: Agent) -> tuple[object, ...]:
    return tuple(agent.hooks.matchers(event) for event in HookEvent)


def _without_disallowed(
    tools: tuple[Tool, ...], disallowed: tuple[str, ...] | None
) -> tuple[Tool, ...]:
    if not disallowed:
        return tools
    deny = {normalize_tool_name(n) for n in disallowed}
    return tuple(t for t in tools if normalize_tool_name(t.name) not in deny)


def _bind_human_input(
    policy: DelegationPolicy, tools: tuple[Tool, ...], context: _LazyContext, name: str
) -> tuple[Tool, ...]:
    if not any(normalize_tool_name(t.name) == ASK_USER_TOOL_NAME for t in tools):
        return tools
    if policy.human_input is None:
        raise DelegationBindingError(
            f"Subagent '{name}' has ask_user: delegated human input requires "
            "DelegationPolicy(human_input=...)."
        )
    from ..tools._ask_user import ask_user_tool

    bound = ask_user_tool(policy.human_input, context.get())
    return tuple(bound if normalize_tool_name(t.name) == ASK_USER_TOOL_NAME else t for t in tools)


# -- settling -------------------------------------------------------------------------------


def status_of(d: Delegation, failed: BaseException | None) -> tuple[str, str]:
    """(status, stop_reason) of a finished delegation."""
    result = d.result
    if failed is not None and not isinstance(failed, anyio.get_cancelled_exc_class()):
        return "failed", d.stop_reason or "error"
    if result is None:
        if failed is not None:
            return "stopped", "interrupted"
        return "not_started", d.stop_reason or "not_started"
    reason = result.stop_reason
    if reason == "complete":
        return "completed", reason
    if reason in ("error", "provider_error"):
        return "failed", reason
    return "stopped", reason


def settle(d: Delegation, meter: Meter | None, failed: BaseException | None) -> None:
    """Record the final status and usage, release the reservation; exactly once."""
    if d.settled:
        return
    d.settled = True
    d.status, d.stop_reason = status_of(d, failed)
    if failed is not None and d.error is None and d.status == "failed":
        d.error = _error_text(failed)
    if d.result is not None:
        d.usage = d.result.usage
        if d.result.error and d.error is None:
            d.error = d.result.error
        d.hook_errors.extend(d.result.hook_errors)
    elif d.child is not None and d.child.last_result is not None:
        d.usage = d.child.last_result.usage
    if d.child is not None and d.child.governance is not None:
        d.hook_errors.extend(d.child.governance.hook_errors)
    d.completed_at = time.time()
    if meter is not None:
        if d.reservation is not None:
            meter.release(d.reservation)
        meter.add_external(d.usage)


async def release_binding(d: Delegation, *, cancelled: bool = False) -> None:
    """Free the exclusive lease and run owned cleanup once, shielded from cancellation.

    While the delegation is being cancelled an async cleanup gets a deadline, so it
    cannot hang the host's shutdown; otherwise it runs to completion.
    """
    if d.lease_key is not None:
        release_lease(d.lease_key, d)
        d.lease_key = None
    cleanup, d.cleanup = d.cleanup, None
    if cleanup is None:
        return
    with anyio.CancelScope(shield=True):
        try:
            done = cleanup()
            if inspect.isawaitable(done):
                with anyio.move_on_after(SHIELDED_SECONDS if cancelled else None) as scope:
                    await done
                if scope.cancelled_caught:
                    d.cleanup_error = f"cleanup did not finish within {SHIELDED_SECONDS:g} s"
        except Exception as exc:
            d.cleanup_error = _error_text(exc)


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, DeputyError | ToolRejection):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def build_outcome(d: Delegation) -> dict[str, Any]:
    """The compact outcome the lead's model sees (answer cut to 8 KiB of UTF-8)."""
    answer = d.result.response if d.result is not None else ""
    raw = answer.encode()
    truncated = len(raw) > ANSWER_MAX_BYTES
    if truncated:
        answer = raw[:ANSWER_MAX_BYTES].decode(errors="ignore")
    return {
        "delegation_id": d.delegation_id,
        "agent_id": d.agent_id,
        "agent_name": d.agent_name,
        "run_id": d.run_id,
        "parent_agent_id": d.parent_agent_id,
        "parent_run_id": d.parent_run_id,
        "tool_call_id": d.tool_call_id,
        "status": d.status,
        "stop_reason": d.stop_reason,
        "task_success": "not_assessed",
        "answer": answer,
        "answer_truncated": truncated,
        "error": d.error,
    }


def outcome_json(d: Delegation) -> str:
    """:func:`build_outcome` as compact JSON text."""
    return _encode(build_outcome(d)).decode()


def hook_input(lead: LeadAgent, d: Delegation, event: HookEvent, **fields: Any) -> HookInput:
    """SubagentStart/SubagentStop input: the lead's context plus the delegation's."""
    return HookInput(
        event=event,
        agent_id=lead.agent_id,
        agent_name=lead.name,
        run_id=d.parent_run_id,
        working_dir=str(lead.working_dir),
        tool_call_id=d.tool_call_id,
        task=d.task,
        delegation_id=d.delegation_id,
        child_agent_id=d.agent_id,
        child_agent_name=d.agent_name,
        child_run_id=d.run_id,
        permission_mode=lead.permissions.mode,
        **fields,
    )


def new_delegation(
    lead: LeadAgent,
    definition: AgentDefinition | None,
    brief: Brief,
    *,
    parent_run_id: str | None,
    tool_call_id: str | None,
    delegation_id: str | None = None,
    agent_name: str | None = None,
) -> Delegation:
    """Admit a delegation: a queued record with fresh ids."""
    return Delegation(
        definition,
        agent_name=agent_name,
        delegation_id=delegation_id or new_id("delegation"),
        parent_agent_id=lead.agent_id,
        parent_run_id=parent_run_id,
        tool_call_id=tool_call_id,
        brief=brief,
    )


def check_brief(arguments: Mapping[str, Any]) -> Brief:
    """The delegate tool's arguments as a Brief (the schema already checked types)."""
    task = arguments["task"]
    if not task.strip():
        raise ToolRejection("delegate_to_agent: 'task' must not be blank.")
    if len(task.encode()) > _TASK_MAX_BYTES:
        raise ToolRejection("delegate_to_agent: 'task' is larger than 1 MiB.")
    return Brief(
        task=task,
        constraints=tuple(arguments.get("constraints") or ()),
        deliverable=arguments.get("deliverable"),
        stop_conditions=tuple(arguments.get("stop_conditions") or ()),
    )
