"""LeadAgent: an Agent whose first tool delegates to subagents built from definitions."""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from .._ids import new_id
from ..chat import model_alias_map
from ..errors import DefinitionError
from ..tools._decorator import _struct_validator
from ..tools._invoke import invoke_tool, tool_validator
from ..tools._tool import Tool
from . import _delegation
from ._agent import Agent
from ._delegation import (
    Delegation,
    SubagentRecord,
    build_subagent,
    check_brief,
    first_message,
    hook_input,
    new_delegation,
    outcome_json,
    release_binding,
    settle,
)
from ._events import DelegationEnd, DelegationStart, EventSink
from ._hooks import HookEvent, Hooks
from ._permissions import DELEGATE_TOOL_NAME, Permissions, delegate_placeholder
from ._policy import DelegationPolicy
from ._runstate import AgentResult, RunState, ToolRejection
from ._usage import Meter, UsageLimits

if TYPE_CHECKING:
    from ..chat._chat import Chat
    from ..definitions import AgentDefinition
    from ._parallel import ParallelResult

__all__ = ["LeadAgent"]

ROUTING_START = "<!-- deputy-lead-routing:v1:start -->"
ROUTING_END = "<!-- deputy-lead-routing:v1:end -->"
_DELEGATE_DESCRIPTION = (
    "Delegate a task to a specialized sub-agent. The sub-agent will complete the task and "
    "return results. Several calls in one turn run in parallel."
)


class _DelegateArgs(msgspec.Struct, forbid_unknown_fields=True):
    agent_name: str
    task: str
    constraints: list[str] | None = None
    deliverable: str | None = None
    stop_conditions: list[str] | None = None


_DELEGATE_VALIDATOR = _struct_validator(_DelegateArgs, DELEGATE_TOOL_NAME, {})


class LeadAgent(Agent):
    """An agent that delegates to fresh subagents built from ``sub_agents`` definitions.

    ``sub_agents`` is a sequence of AgentDefinitions or the dict ``agent_definitions()``
    returns; names must be unique. The system prompt gains a generated routing section
    and the first tool is ``delegate_to_agent(agent_name, task, constraints?,
    deliverable?, stop_conditions?)``. Subagents are bounded by this agent's permissions
    (ceiling at start, live re-check per call), its remaining budget (reserved per
    delegation) and its hooks (tool events always forwarded). See DelegationPolicy for
    how they get tools. ``max_active_delegations`` caps how many of the model's
    delegations run at once (``1`` serialises them); the others wait ``queued``, holding
    no budget until they start. One whose slot frees after the lead was interrupted, or
    after the lead's run reached a limit, ends ``not_started`` without being built (a
    limit also gives the model the "Run limit reached" tool error). ``None`` (default):
    all of a turn's delegations at once. ``model_aliases`` maps a definition's model
    (a Claude Code alias such as ``sonnet``, or any model id) to ``provider/model`` or a
    model id on this lead's provider; see :func:`deputy_runtime.chat.resolve_model`.
    """

    __slots__ = (
        "_definitions",
        "_delegate_tool",
        "_forwarded",
        "_own_tools",
        "_records",
        "_running",
        "_slots",
        "delegation_policy",
        "delegation_scope",
        "max_active_delegations",
        "model_aliases",
    )

    def __init__(
        self,
        chat: Chat,
        sub_agents: Sequence[AgentDefinition] | Mapping[str, AgentDefinition] = (),
        *,
        tools: Iterable[Tool] = (),
        system_prompt: str | None = None,
        permissions: Permissions | None = None,
        usage_limits: UsageLimits | None = None,
        hooks: Hooks | None = None,
        working_dir: str | os.PathLike[str] | None = None,
        delegation_policy: DelegationPolicy | None = None,
        delegation_scope: Mapping[str, Any] | None = None,
        name: str | None = "lead",
        max_active_delegations: int | None = None,
        model_aliases: Mapping[str, str] | None = None,
    ) -> None:
        # Alias -> "provider/model" or a model id on the lead's provider: how definitions
        # saying "sonnet" (or another vendor's id) run under this lead's provider.
        self.model_aliases = model_alias_map(model_aliases)
        if delegation_policy is None:
            delegation_policy = DelegationPolicy()
        if not isinstance(delegation_policy, DelegationPolicy):
            raise TypeError("delegation_policy must be a DelegationPolicy")
        if delegation_scope is not None and not isinstance(delegation_scope, Mapping):
            raise TypeError("delegation_scope must be a mapping or None")
        if max_active_delegations is not None and (
            isinstance(max_active_delegations, bool)
            or not isinstance(max_active_delegations, int)
            or max_active_delegations < 1
        ):
            raise ValueError(
                "max_active_delegations must be a positive int or None, "
                f"got {max_active_delegations!r}"
            )
        self.max_active_delegations = max_active_delegations
        self._slots: tuple[str, anyio.Semaphore] | None = None
        self.delegation_policy = delegation_policy
        self._forwarded = delegation_policy.forwarded_events  # computed once, shared
        self.delegation_scope = dict(delegation_scope) if delegation_scope is not None else None
        self._definitions: dict[str, AgentDefinition] = {}
        self._records: list[Delegation] = []
        self._running: dict[str, Delegation] = {}  # admitted and not yet settled
        self._own_tools = tuple(tools)
        self._delegate_tool = _delegate_tool(())
        super().__init__(
            chat,
            tools=(),
            system_prompt=system_prompt,
            permissions=permissions,
            usage_limits=usage_limits,
            hooks=hooks,
            working_dir=working_dir,
            name=name,
        )
        values = sub_agents.values() if isinstance(sub_agents, Mapping) else sub_agents
        for definition in values:
            self._add_definition(definition)
        self._refresh()

    # -- sub-agent registry -------------------------------------------------------------

    def register_sub_agent(self, definition: AgentDefinition) -> None:
        """Add a definition; its name must not be registered yet."""
        self._add_definition(definition)
        self._refresh()

    def available_sub_agents(self) -> list[str]:
        """Registered sub-agent names in registration order."""
        return list(self._definitions)

    def sub_agent(self, name: str) -> AgentDefinition:
        """The registered definition for ``name`` (trimmed, case-insensitive)."""
        return self._definitions[name.strip().lower()]

    def _add_definition(self, definition: AgentDefinition) -> None:
        from ..definitions import AgentDefinition

        if not isinstance(definition, AgentDefinition):
            raise DefinitionError(
                f"sub_agents entries must be AgentDefinition, got {type(definition).__name__}"
            )
        if definition.name in self._definitions:
            raise DefinitionError(
                f"Sub-agent {definition.name!r} is already registered; duplicate "
                "AgentDefinition routing keys are not allowed"
            )
        self._definitions[definition.name] = definition

    def _refresh(self) -> None:
        self._delegate_tool = _delegate_tool(tuple(self._definitions))
        self.set_tools((self._delegate_tool, *self._own_tools))
        self._prompt = self._compose_prompt()

    def _compose_prompt(self) -> str | None:
        """The base prompt followed by the generated routing section."""
        base = super()._compose_prompt()
        section = self._routing_section()
        return f"{base}\n\n{section}" if base else section

    def _routing_section(self) -> str:
        blocks = [
            ROUTING_START,
            "# Available Sub-Agents",
            f"Use the `{DELEGATE_TOOL_NAME}` tool to hand a task to one of these sub-agents. "
            "Each one starts fresh and sees only the task you give it.",
        ]
        blocks += [f"## {d.name}\n{d.description}" for d in self._definitions.values()]
        blocks.append(
            "Give each sub-agent a complete, self-contained task. "
            "Independent tasks can be delegated in the same turn; they run in parallel."
        )
        blocks.append(ROUTING_END)
        return "\n\n".join(blocks)

    # -- records -----------------------------------------------------------------------------

    def list_subagents(self) -> list[SubagentRecord]:
        """One record per admitted delegation, in admission order."""
        return [d.record() for d in self._records]

    def get_subagent_results(
        self, agent_name: str | None = None, delegation_id: str | None = None
    ) -> list[AgentResult | None]:
        """Subagent results in admission order (``None`` where a delegation has none)."""
        key = agent_name.strip().lower() if agent_name is not None else None
        return [
            d.result
            for d in self._records
            if (key is None or d.agent_name == key)
            and (delegation_id is None or d.delegation_id == delegation_id)
        ]

    # -- interrupts --------------------------------------------------------------------------

    def interrupt(self, reason: str = "interrupted") -> None:
        """Stop the lead and every unsettled subagent at their next boundary."""
        super().interrupt(reason)
        for delegation_id in tuple(self._running):
            self.interrupt_subagent(delegation_id, reason)

    def interrupt_subagent(self, delegation_id: str, reason: str = "interrupted") -> bool:
        """Stop one subagent at its next boundary (or before it starts, if it has not).

        ``False`` when no unsettled delegation has that id.
        """
        d = self._running.get(delegation_id)
        if d is None:
            return False
        d.cancel_reason = d.cancel_reason or reason
        if d.child is not None:
            d.child.interrupt(reason)
        return True

    # -- the delegate tool ----------------------------------------------------------------

    def _invoke(
        self,
        run: RunState,
        tool: Tool,
        call: Any,
        call_id: str,
        delegation_id: str | None,
    ) -> Awaitable[Any]:
        # A plain function returning the coroutine: one frame less per in-flight call.
        if tool is not self._delegate_tool or delegation_id is None:
            return invoke_tool(tool, call.arguments)
        arguments = tool_validator(tool)(call.arguments)
        return self._delegate(run, arguments, call_id, delegation_id)

    def _call_delegation_id(self, tool_name: str) -> str | None:
        # Minted when the call is seen, so tool_start/tool_end and the record share it.
        return new_id("delegation") if tool_name == DELEGATE_TOOL_NAME else None

    async def _delegate(
        self, run: RunState, arguments: dict[str, Any], call_id: str, delegation_id: str
    ) -> str:
        """One delegate_to_agent call: route, admit, build, run, settle, outcome."""
        brief = check_brief(arguments)
        over = run.meter.exceeded(reaching=True)
        if over is not None:
            raise _limit_reached(over)
        requested = arguments["agent_name"]
        key = requested.strip().lower()
        definition = self._definitions.get(key)
        d = new_delegation(
            self,
            definition,
            brief,
            parent_run_id=run.run_id,
            tool_call_id=call_id,
            delegation_id=delegation_id,
            agent_name=key[:128],
        )
        self._records.append(d)
        self._running[d.delegation_id] = d
        slots = self._slots_for(run)
        if slots is not None:
            # Queued until a slot is free; the budget is reserved only once it runs.
            blocker = await self._wait_for_slot(run, d, slots)
            if blocker is not None:
                if blocker.endswith("_limit"):
                    raise _limit_reached(blocker)
                return outcome_json(d)
        failed: BaseException | None = None
        try:
            d.reservation = run.meter.reserve_child(
                definition.max_requests if definition is not None else 0
            )
            self._announce(run.emit, d)
            try:
                if definition is None:
                    names = ", ".join(self._definitions) or "none"
                    raise ToolRejection(f"Unknown agent: {requested}. Available agents: {names}")
                await build_subagent(self, d, d.reservation.limits, emit=run.emit)
            except Exception:
                d.stop_reason = "setup_error"
                raise
            await self._start_and_run(d, run.emit)
        except BaseException as exc:
            failed = exc
            if not isinstance(exc, Exception):
                raise
        finally:
            if slots is not None:
                slots.release()
            await self._conclude(d, run.meter, run.emit, failed)
        if d.status == "failed":
            raise ToolRejection(f"Subagent '{d.agent_name[:512]}' failed.\n{outcome_json(d)}")
        return outcome_json(d)

    async def _wait_for_slot(
        self, run: RunState, d: Delegation, slots: anyio.Semaphore
    ) -> str | None:
        """Wait ``queued`` for a slot; ``None`` once ``d`` holds one and may start.

        The lead's state may have changed while ``d`` waited, so it is checked again.
        If ``d`` must not start, the slot is given back, ``d`` is settled ``not_started``
        with nothing built, reserved or announced, and the blocker is returned:
        ``"interrupted"`` (the lead or this delegation was interrupted) or the stop
        reason of a run limit the lead reached meanwhile (the delegations ahead of it
        spent the budget). A cancelled wait settles ``d`` the same way and propagates.
        """
        try:
            await slots.acquire()
        except BaseException:
            self._never_started(d, run.meter, "not_started")
            raise
        if self._interrupt_reason is not None or d.cancel_reason is not None:
            blocker, reason = "interrupted", "not_started"
        else:
            over = run.meter.exceeded(reaching=True)
            if over is None:
                return None
            blocker = reason = over
        slots.release()
        self._never_started(d, run.meter, reason)
        return blocker

    def _never_started(self, d: Delegation, meter: Meter, stop_reason: str) -> None:
        """Settle a delegation that left the queue without starting.

        No DelegationEnd: it never had a DelegationStart, and nothing was bound and no
        SubagentStart fired, so there is no cleanup or stop hook to run.
        """
        self._running.pop(d.delegation_id, None)
        d.stop_reason = stop_reason
        settle(d, meter, None)

    def _slots_for(self, run: RunState) -> anyio.Semaphore | None:
        """This run's delegation slots (``max_active_delegations``), or ``None``."""
        if self.max_active_delegations is None:
            return None
        if self._slots is None or self._slots[0] != run.run_id:
            self._slots = (run.run_id, anyio.Semaphore(self.max_active_delegations))
        return self._slots[1]

    def _announce(self, emit: EventSink | None, d: Delegation) -> None:
        """Emit DelegationStart (admitted, budget reserved): every DelegationEnd has one."""
        if emit is not None:
            emit(
                DelegationStart(
                    **_delegation_ids(d),
                    task=d.task,
                    limits=d.reservation.limits if d.reservation else None,
                    tool_call_id=d.tool_call_id,
                )
            )

    async def _start_and_run(self, d: Delegation, emit: EventSink | None) -> bool:
        """Fire SubagentStart, then run the built subagent on its brief.

        ``False`` when the delegation was stopped before its run (it stays not_started).
        Shared by the delegate tool and ``parallel_delegate``.
        """
        if not await self._start(d):
            return False
        assert d.child is not None
        assert d.reservation is not None
        d.result = await d.child._run(
            first_message(d.definition, d.brief),
            usage_limits=d.reservation.limits,
            emit=emit,
            run_id=d.run_id,
        )
        return True

    async def _conclude(
        self,
        d: Delegation,
        meter: Meter,
        emit: EventSink | None,
        failed: BaseException | None,
    ) -> None:
        """Settle exactly once, release the binding, fire SubagentStop, announce the end."""
        self._running.pop(d.delegation_id, None)
        settle(d, meter, failed)
        try:
            await self._finish_delegation(emit, d, cancelled=_is_cancel(failed))
        finally:
            # The record keeps the result, not the subagent: a long-lived lead's history
            # of delegations must not keep every child's chat, tools and turns alive.
            d.child = None

    async def _start(self, d: Delegation) -> bool:
        """Mark running and fire SubagentStart; ``False`` if it must not start after all."""
        d.status = "running"
        d.started_at = time.time()
        if self.hooks.has(HookEvent.SubagentStart):
            await self.hooks.dispatch(
                hook_input(self, d, HookEvent.SubagentStart, status="running"),
                d.hook_errors,
            )
        return self._interrupt_reason is None and d.cancel_reason is None

    async def _finish_delegation(
        self, emit: EventSink | None, d: Delegation, *, cancelled: bool = False
    ) -> None:
        """Release the binding, fire SubagentStop (if SubagentStart fired), announce the end.

        Shielded from cancellation, so cleanup and the stop hook run even then.
        """
        stop_hooks = d.started_at is not None and self.hooks.has(HookEvent.SubagentStop)
        if d.cleanup is None and not stop_hooks:
            await release_binding(d)  # nothing to await: no shield needed (hot path)
        else:
            await self._finish_shielded(d, stop_hooks, cancelled)
        if emit is not None:
            emit(
                DelegationEnd(
                    **_delegation_ids(d),
                    status=d.status,
                    stop_reason=d.stop_reason or "error",
                    usage=d.usage,
                    error=d.error,
                    tool_call_id=d.tool_call_id,
                )
            )

    async def _finish_shielded(self, d: Delegation, stop_hooks: bool, cancelled: bool) -> None:
        # Shielded so cleanup and the stop hook run even when the delegation is being
        # cancelled; then (only then) the hook gets a deadline, so it cannot hang shutdown.
        with anyio.CancelScope(shield=True):
            await release_binding(d, cancelled=cancelled)
            if stop_hooks:
                with anyio.move_on_after(
                    _delegation.SHIELDED_SECONDS if cancelled else None
                ) as scope:
                    await self.hooks.dispatch(
                        hook_input(
                            self,
                            d,
                            HookEvent.SubagentStop,
                            status=d.status,
                            reason=d.stop_reason,
                            result=d.result.response if d.result else None,
                            error=d.error,
                        ),
                        d.hook_errors,
                    )
                if scope.cancelled_caught:
                    d.hook_errors.append(
                        f"SubagentStop: did not finish within {_delegation.SHIELDED_SECONDS:g} s "
                        "during cancellation"
                    )

    # -- host-driven fan-out ----------------------------------------------------------------

    async def parallel_delegate(
        self,
        tasks: Mapping[str, str] | Sequence[tuple[str, str]],
        *,
        max_active: int = 4,
        usage_limits: UsageLimits | None = None,
        on_event: EventSink | None = None,
    ) -> ParallelResult:
        """Fan tasks out to stateless sub-agents (no tools; one request each).

        ``tasks`` maps definition names to tasks, or is a sequence of ``(name, task)``
        pairs so one definition can take many tasks. Everything is prepared before
        anything is dispatched; a failed responder never discards its siblings. The
        lead's conversation is untouched. See :class:`ParallelResult`.

        The batch runs under the lead's ``usage_limits``; ``usage_limits`` here can only
        tighten them: each limit is the tighter of the two (``None``, unlimited, loses
        to any number), and ``on_exceed`` is taken from the batch's limits when given.
        So a batch limit of 50 requests on a lead limited to 10 allows 10.
        """
        from ._parallel import parallel_delegate

        return await parallel_delegate(
            self, tasks, max_active=max_active, usage_limits=usage_limits, on_event=on_event
        )


def _limit_reached(reason: str) -> ToolRejection:
    return ToolRejection(f"Run limit reached for {reason}: no new delegation can start.")


def _is_cancel(exc: BaseException | None) -> bool:
    return exc is not None and isinstance(exc, anyio.get_cancelled_exc_class())


def _delegation_ids(d: Delegation) -> dict[str, Any]:
    return {
        "agent_id": d.agent_id,
        "agent_name": d.agent_name,
        "run_id": d.run_id,
        "delegation_id": d.delegation_id,
        "parent_agent_id": d.parent_agent_id,
        "parent_run_id": d.parent_run_id,
    }


def _delegate_tool(names: tuple[str, ...]) -> Tool:
    agent_name: dict[str, Any] = {
        "type": "string",
        "description": "Name of the sub-agent to delegate to",
    }
    if names:
        agent_name["enum"] = list(names)
    strings = {"type": "array", "items": {"type": "string"}}
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "agent_name": agent_name,
            "task": {
                "type": "string",
                "description": "The complete task for the sub-agent",
                "examples": ["Summarise what you find in the working directory."],
            },
            "constraints": {**strings, "description": "Rules the sub-agent must follow"},
            "deliverable": {"type": "string", "description": "What to hand back"},
            "stop_conditions": {**strings, "description": "When to stop and report"},
        },
        "required": ["agent_name", "task"],
        "additionalProperties": False,
    }
    return Tool(
        name=DELEGATE_TOOL_NAME,
        description=_DELEGATE_DESCRIPTION,
        parameters=parameters,
        function=delegate_placeholder,
        # The enum guides the model; routing itself is by trimmed, lowercased name, so the
        # validator accepts any string and an unknown name gets the routing error.
        validator=_DELEGATE_VALIDATOR,
    )
