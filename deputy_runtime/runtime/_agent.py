"""Agent: one model, its tools, and the loop that governs every tool call.

The loop is: check limits -> one provider request -> for each requested tool call
(concurrently within the turn, results kept in request order): limit slot -> permission
check -> PreToolUse hooks -> the tool -> PostToolUse hooks. It ends when the model answers
without tool calls, a limit or hook stops it, it is interrupted, or the provider fails.
The same class runs the lead and every subagent; a subagent additionally carries a
:class:`Governance` that ties its calls to its lead's live permissions and hooks.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncGenerator, Awaitable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from .._ids import new_id
from ..chat._chat import running_async_library
from ..chat._context import reset_current_agent, set_current_agent
from ..chat._stream import complete_streaming
from ..chat._types import (
    AssistantTurn,
    ContentToolRequest,
    ContentToolResult,
    ModelRequest,
    ToolSpec,
    Turn,
)
from ..errors import (
    ProviderError,
    RunActiveError,
    ToolArgumentError,
)
from ..skills import Skill
from ..tools._invoke import invoke_tool
from ..tools._tool import Tool
from ._events import (
    Event,
    EventChannel,
    EventSink,
    GuardedSink,
    ModelRequestEvent,
    ModelResponseEvent,
    RunStart,
    ToolEnd,
    ToolStart,
    WarningEvent,
)
from ._gate import gate
from ._hooks import HookDecision, HookEvent, HookInput, Hooks
from ._permissions import Permissions, normalize_tool_name
from ._runstate import (
    NO_RESULTS,
    RUNNING,
    AgentResult,
    Governance,
    ProviderFailure,
    RunState,
    ToolRejection,
    add_task,
    finish_run,
    preview,
    raise_for_limit,
)
from ._usage import UsageLimits

if TYPE_CHECKING:
    from ..chat._chat import Chat

__all__ = ["Agent"]


class Agent:
    """An agent: a chat, tools, permissions, hooks and usage limits, and its run loop.

    One run at a time (:class:`~deputy_runtime.RunActiveError` otherwise). The
    conversation lives in ``chat`` and carries over between runs; limits count only what
    each run uses. ``working_dir`` (default: the current directory) bounds the default
    permissions' write root.
    """

    # Slots: a fan-out keeps one subagent per in-flight delegation alive.
    __slots__ = (
        "__weakref__",
        "_active",
        "_base_prompt",
        "_hidden",
        "_interrupt_reason",
        "_pending_config",
        "_permissions",
        "_prompt",
        "_session_started",
        "_skills",
        "_specs",
        "_tools",
        "agent_id",
        "chat",
        "governance",
        "hooks",
        "last_result",
        "name",
        "usage_limits",
        "working_dir",
    )

    def __init__(
        self,
        chat: Chat,
        *,
        tools: Iterable[Tool] = (),
        system_prompt: str | None = None,
        permissions: Permissions | None = None,
        usage_limits: UsageLimits | None = None,
        hooks: Hooks | None = None,
        working_dir: str | os.PathLike[str] | None = None,
        name: str | None = None,
        skills: Iterable[Skill] = (),
    ) -> None:
        wd = Path(os.path.realpath(working_dir if working_dir is not None else os.getcwd()))
        if not wd.is_dir():
            raise ValueError(f"working_dir {str(wd)!r} is not an existing directory")
        self._configure(
            chat,
            tools=tools,
            system_prompt=system_prompt if system_prompt is not None else chat.get_system_prompt(),
            permissions=(permissions or Permissions()).bind(wd),
            usage_limits=usage_limits if usage_limits is not None else UsageLimits(),
            hooks=hooks if hooks is not None else Hooks(),
            working_dir=wd,
            name=name,
            skills=tuple(skills),
            governance=None,
            agent_id=new_id("agent"),
        )

    @classmethod
    def _for_delegation(
        cls,
        chat: Chat,
        *,
        name: str,
        permissions: Permissions,
        usage_limits: UsageLimits,
        working_dir: Path,
        skills: tuple[Skill, ...],
        governance: Governance,
        agent_id: str,
    ) -> Agent:
        """A subagent: no re-validation of what the lead already resolved (hot path)."""
        agent = cls.__new__(cls)
        agent._configure(
            chat,
            tools=(),
            system_prompt=chat.get_system_prompt(),
            permissions=permissions.bind(working_dir),
            usage_limits=usage_limits,
            hooks=Hooks(),
            working_dir=working_dir,
            name=name,
            skills=skills,
            governance=governance,
            agent_id=agent_id,
        )
        return agent

    def _configure(
        self,
        chat: Chat,
        *,
        tools: Iterable[Tool],
        system_prompt: str | None,
        permissions: Permissions,
        usage_limits: UsageLimits,
        hooks: Hooks,
        working_dir: Path,
        name: str | None,
        skills: tuple[Skill, ...],
        governance: Governance | None,
        agent_id: str,
    ) -> None:
        self.chat = chat
        self.working_dir = working_dir
        self.name = name
        self.agent_id = agent_id
        self.hooks = hooks
        self.usage_limits = usage_limits
        self.governance = governance
        self._permissions = permissions
        self._skills = skills
        self._base_prompt = system_prompt
        self._hidden: frozenset[str] = frozenset()
        self._tools: dict[str, Tool] = {}
        self._specs: tuple[ToolSpec, ...] = ()
        self._active = False
        self._interrupt_reason: str | None = None
        self._session_started = False
        self._pending_config: list[HookInput] = []
        self.last_result: AgentResult | None = None
        if tools or skills:
            self.set_tools(tools)
        self._prompt = self._compose_prompt()

    # -- configuration -----------------------------------------------------------------

    @property
    def permissions(self) -> Permissions:
        """The agent's current permissions."""
        return self._permissions

    def set_permission_mode(self, mode: str) -> None:
        """Narrow the permission mode (widening raises PermissionModeWideningError).

        Takes effect at the next tool call, also for running subagents of a lead. The
        ConfigChange hooks run at the next boundary of the active run (or the next run).
        """
        old = self._permissions.mode
        self._permissions = self._permissions.narrow(mode)
        if mode != old:
            self._pending_config.append(
                self._hook_input(
                    HookEvent.ConfigChange,
                    None,
                    key="permission_mode",
                    old_value=old,
                    new_value=mode,
                )
            )

    def set_tools(self, tools: Iterable[Tool]) -> None:
        """Replace the agent's tools (plus the skills' tools and ``load_skill``)."""
        collected: dict[str, Tool] = {}
        hidden = self._hidden
        for t in self._all_tools(tools):
            if not isinstance(t, Tool):
                raise TypeError(f"tools must contain Tool objects, got {type(t).__name__}")
            if hidden and normalize_tool_name(t.name) in hidden:
                continue
            if t.name in collected:
                raise ValueError(f"Duplicate tool name {t.name!r}")
            collected[t.name] = t
        self._tools = collected
        self._specs = tuple(t.spec() for t in collected.values())

    def _all_tools(self, tools: Iterable[Tool]) -> Iterable[Tool]:
        yield from tools
        if self._skills:
            from ..skills import skills_tool

            if self.governance is None:
                # A subagent's skill tools come bound by its delegation (human_input,
                # disallowed_tools), already inside ``tools``.
                for skill in self._skills:
                    yield from skill.tools
            yield skills_tool(self._skills)

    def _set_delegated_tools(self, tools: Iterable[Tool], disallowed: Iterable[str] | None) -> None:
        """A subagent's tools, minus ``disallowed`` from every source (skills included)."""
        if disallowed:
            self._hidden = frozenset(normalize_tool_name(n) for n in disallowed)
        self.set_tools(tools)

    def get_tools(self) -> tuple[Tool, ...]:
        """The tools offered to the model, in order."""
        return tuple(self._tools.values())

    @property
    def system_prompt(self) -> str | None:
        """The system prompt sent with every request (base prompt plus skills section)."""
        return self._prompt

    def _compose_prompt(self) -> str | None:
        # Built once (and again when a LeadAgent's sub-agents change), not per request.
        if not self._skills:
            return self._base_prompt
        from ..skills import skills_prompt_section

        section = skills_prompt_section(self._skills)
        return f"{self._base_prompt}\n\n{section}" if self._base_prompt else section

    async def end_session(self, reason: str = "closed") -> list[str]:
        """Fire the SessionEnd hooks once, if a run started the session.

        Call it when the host is done with the agent (for example at shutdown); the
        conversation is kept, and a later run starts a new session (SessionStart again).
        Returns the ``"EVENT: message"`` errors of hooks that raised (there is no run
        result to keep them in).
        """
        errors: list[str] = []
        if not self._session_started or self._active:
            return errors
        self._session_started = False
        if self._wants(HookEvent.SessionEnd):
            hook_input = self._hook_input(HookEvent.SessionEnd, None, reason=reason)
            await self.hooks.dispatch(hook_input, errors)
        return errors

    def interrupt(self, reason: str = "interrupted") -> None:
        """Ask the active run to stop at its next boundary (before a request or tool call).

        Does nothing when no run is active: an interrupt never carries over to a later run.
        """
        if self._active:
            self._interrupt_reason = reason

    # -- running -------------------------------------------------------------------------

    async def run(
        self,
        task: str,
        *,
        usage_limits: UsageLimits | None = None,
        on_event: EventSink | None = None,
    ) -> AgentResult:
        """Run the agent on ``task`` until it answers, stops, or fails; return the result.

        ``on_event`` receives every event synchronously as it happens (a lead's include
        its subagents'), also the final ones of a cancelled run. If it raises, it gets no
        further events, the run finishes normally, and the error is raised afterwards
        (the result is still in :attr:`last_result`).
        """
        if on_event is None:
            return await self._run(task, usage_limits=usage_limits, emit=None)
        sink = GuardedSink(on_event)
        result = await self._run(task, usage_limits=usage_limits, emit=sink)
        if sink.error is not None:
            raise sink.error
        return result

    def run_sync(self, task: str, *, usage_limits: UsageLimits | None = None) -> AgentResult:
        """Blocking :meth:`run` for scripts; refuses to run inside an event loop."""
        library = running_async_library()
        if library is not None:
            raise RuntimeError(
                f"run_sync() cannot be called from a running {library} event loop; "
                "use 'await agent.run(...)' instead"
            )
        return anyio.run(lambda: self.run(task, usage_limits=usage_limits))

    async def run_stream(
        self, task: str, *, usage_limits: UsageLimits | None = None
    ) -> AsyncGenerator[Event, None]:
        """Run on ``task`` and yield its events as they happen; the stop event comes last.

        For a lead, subagents' events are included, tagged with their delegation ids.
        Breaking out early cancels the run; wrap the iterator in
        ``contextlib.aclosing`` so that happens promptly.
        """
        channel = EventChannel()
        failure: list[BaseException] = []

        async def produce() -> None:
            try:
                await self._run(task, usage_limits=usage_limits, emit=channel.put)
            except Exception as exc:
                failure.append(exc)
            finally:
                channel.close()

        closing = False
        async with anyio.create_task_group() as tg:
            tg.start_soon(produce)
            try:
                while await channel.wait():
                    # Everything queued is handed over without a checkpoint per event: a
                    # fan-out emits thousands of events and each await would cost a turn.
                    for event in channel.drain():
                        yield event
            except GeneratorExit:
                # The consumer stopped early (aclose): cancel the run and end quietly
                # instead of raising GeneratorExit through the task group.
                closing = True
                channel.abandon()
                tg.cancel_scope.cancel()
        if failure and not closing:
            raise failure[0]

    async def _run(
        self,
        task: str,
        *,
        usage_limits: UsageLimits | None,
        emit: EventSink | None,
        run_id: str | None = None,
    ) -> AgentResult:
        if self._active:
            raise RunActiveError(f"Agent {self.name or self.agent_id} already has an active run")
        if not isinstance(task, str):
            raise TypeError(f"task must be a string, got {type(task).__name__}")
        self._active = True
        run = RunState(run_id or new_id("run"), usage_limits or self.usage_limits, emit)
        run.turns = self.chat.get_turns()  # a fresh list
        error: BaseException | None = None
        try:
            await self._loop(run, task)
        except ProviderFailure as exc:
            error = exc
        except BaseException as exc:
            error = exc
            raise
        finally:
            self._active = False
            # An interrupt applies to the run it was meant for, not to the next one.
            self._interrupt_reason = None
            result = finish_run(self, run, error)
            self.last_result = result
        if self._wants(HookEvent.Stop) or self._pending_config:
            await self._drain_config(run)
            await self._fire(run, self._hook_input(HookEvent.Stop, run, reason=result.stop_reason))
        if run.limits.on_exceed == "error":
            raise_for_limit(result)  # after the Stop hooks: they see every run end
        return result

    def _wants(self, event: HookEvent) -> bool:
        """Whether any hook (own or a lead's forwarded one) listens to ``event``."""
        gov = self.governance
        return self.hooks.has(event) or (
            gov is not None and event in gov.forwarded and gov.lead.hooks.has(event)
        )

    async def _loop(self, run: RunState, task: str) -> None:
        if not self._session_started:
            self._session_started = True
            if self._wants(HookEvent.SessionStart):
                await self._fire(run, self._hook_input(HookEvent.SessionStart, run))
        if run.emit is not None:
            run.emit(RunStart(**self._ids(run), task=task, limits=run.limits))
        if self._wants(HookEvent.UserPromptSubmit):
            decision = await self._fire(
                run, self._hook_input(HookEvent.UserPromptSubmit, run, prompt=task)
            )
            if decision is not None and decision.decision in ("deny", "stop"):
                run.stop_reason = "hook_requested_stop"
                return
        add_task(run.turns, task)
        while True:
            if self._pending_config:
                await self._drain_config(run)
            if self._interrupt_reason is not None:
                run.stop_reason = "interrupted"
                return
            limit = run.meter.before_request()
            if limit is not None:
                run.stop_reason = limit
                return
            try:
                reply = await self._request(run)
            except ProviderError as exc:
                run.stop_reason = "provider_error"
                raise ProviderFailure(str(exc)) from exc
            run.meter.add_response(reply.usage)
            if reply.usage.cost_usd is None and run.limits.max_cost_usd is not None:
                self._warn_cost_unknown(run)
            run.turns.append(reply.turn())
            run.turn_results = NO_RESULTS  # this reply's calls have not run yet
            calls = reply.tool_requests
            if run.emit is not None:
                run.emit(
                    ModelResponseEvent(
                        **self._ids(run),
                        index=run.requests,
                        finish_reason=reply.finish_reason,
                        tool_calls=len(calls),
                        input_tokens=reply.usage.input_tokens,
                        output_tokens=reply.usage.output_tokens,
                        duration=reply.duration,
                    )
                )
            if not calls:
                run.stop_reason = "complete"
                return
            over = run.meter.exceeded(reaching=False)
            if over is not None:
                run.stop_reason = over
                return  # finish_run answers the open tool calls
            results = await self._run_tool_calls(run, calls)
            run.turns.append(Turn("user", results))
            if run.stop_reason is not None:
                return

    async def _request(self, run: RunState) -> AssistantTurn:
        run.requests += 1
        run.meter.start_request()
        provider = self.chat.provider
        # Chat replaces its params mapping on change, never mutates it: safe to share.
        request = ModelRequest(self._prompt, tuple(run.turns), self._specs, self.chat.params)
        if run.emit is not None:
            run.emit(ModelRequestEvent(**self._ids(run), index=run.requests, model=provider.model))
        token = set_current_agent(self.name)
        try:
            if run.emit is None:
                return await provider.complete(request)
            self._ids(run)  # built before the first delta needs them
            # A bound method, not a closure: it is alive for the whole request, and a
            # fan-out keeps one per in-flight delegation.
            return await complete_streaming(provider, request, run.text_delta)
        finally:
            reset_current_agent(token)

    # -- tool calls ------------------------------------------------------------------------

    async def _run_tool_calls(
        self, run: RunState, calls: Sequence[ContentToolRequest]
    ) -> tuple[ContentToolResult, ...]:
        # Limit slots are taken synchronously in request order, before anything runs.
        slots = [run.meter.take_tool_call() for _ in calls]
        # Kept on the run so a run cut off mid-turn can answer these calls truthfully.
        results: list[ContentToolResult | None] = [None] * len(calls)
        run.turn_results = results
        if len(calls) == 1:
            result = results[0] = await self._tool_call(run, calls[0], slots[0], 0)
            return (result,)

        async def one(i: int) -> None:
            results[i] = await self._tool_call(run, calls[i], slots[i], i)

        async with anyio.create_task_group() as tg:
            for i in range(len(calls)):
                tg.start_soon(one, i)
        return tuple(r for r in results if r is not None)

    async def _tool_call(
        self, run: RunState, call: ContentToolRequest, slot: bool, index: int
    ) -> ContentToolResult:
        """One requested call: the gate (limits, permissions, hooks), then the tool."""
        call_id = call.id or new_id("tool")
        gated = await gate(self, run, call, call_id, slot)
        if isinstance(gated, ContentToolResult):
            return gated
        run.turn_results[index] = RUNNING  # a cancellation from now on cuts it off
        # The gate's frame is gone while the tool runs: a fan-out of long delegations
        # keeps one frame less per call alive.
        return await self._execute(run, gated, call, call_id)

    async def _execute(
        self, run: RunState, tool: Tool, call: ContentToolRequest, call_id: str
    ) -> ContentToolResult:
        emit = run.emit
        started = time.perf_counter()
        delegation_id = self._call_delegation_id(call.name)
        if emit is not None:
            emit(
                ToolStart(
                    **self._ids(run),
                    tool_call_id=call_id,
                    tool_name=call.name,
                    arguments=call.arguments,
                    call_delegation_id=delegation_id,
                )
            )
        value: Any = None
        error: str | None = None
        try:
            value = await self._invoke(run, tool, call, call_id, delegation_id)
        except ToolRejection as exc:
            error = str(exc)
        except ToolArgumentError as exc:
            error = f"Invalid arguments: {exc}"
        except Exception as exc:
            error = f"Tool calling failed with error {exc}"
        event = HookEvent.PostToolUse if error is None else HookEvent.PostToolUseFailure
        if self._wants(event):
            decision = await self._fire(
                run,
                self._hook_input(
                    event, run, call=call, call_id=call_id, tool_result=value, tool_error=error
                ),
            )
            if decision is not None and decision.decision == "stop":
                run.stop_reason = run.stop_reason or "hook_requested_stop"
        if emit is not None:
            emit(
                ToolEnd(
                    **self._ids(run),
                    tool_call_id=call_id,
                    tool_name=call.name,
                    error=error,
                    result_preview=preview(value) if error is None else None,
                    duration=time.perf_counter() - started,
                    call_delegation_id=delegation_id,
                )
            )
        return ContentToolResult(call.id, value=value, error=error)

    def _invoke(
        self,
        run: RunState,
        tool: Tool,
        call: ContentToolRequest,
        call_id: str,
        delegation_id: str | None,
    ) -> Awaitable[Any]:
        """The awaitable that runs one tool; LeadAgent overrides it for its delegate tool."""
        return invoke_tool(tool, call.arguments)

    def _call_delegation_id(self, tool_name: str) -> str | None:
        """A fresh delegation id when ``tool_name`` starts a delegation (LeadAgent)."""
        return None

    # -- hooks -----------------------------------------------------------------------------

    def _hook_input(
        self,
        event: HookEvent,
        run: RunState | None,
        *,
        call: ContentToolRequest | None = None,
        call_id: str | None = None,
        **fields: Any,
    ) -> HookInput:
        gov = self.governance
        return HookInput(
            event=event,
            agent_id=self.agent_id,
            agent_name=self.name,
            run_id=run.run_id if run is not None else None,
            working_dir=str(self.working_dir),
            delegation_id=gov.delegation_id if gov else None,
            parent_agent_id=gov.parent_agent_id if gov else None,
            parent_run_id=gov.parent_run_id if gov else None,
            tool_call_id=call_id,
            tool_name=call.name if call is not None else None,
            tool_input=call.arguments if call is not None else None,
            permission_mode=self._permissions.mode,
            **fields,
        )

    async def _fire(self, run: RunState, hook_input: HookInput) -> HookDecision | None:
        """Run a subagent's forwarded lead hooks first, then the agent's own hooks.

        The lead's hooks always see a subagent's forwarded events, and a deny or stop
        from them cannot be overridden by the subagent's own hooks.
        """
        lead_decision: HookDecision | None = None
        gov = self.governance
        if gov is not None and hook_input.event in gov.forwarded:
            seen = len(gov.hook_errors)
            lead_decision = await gov.lead.hooks.dispatch(hook_input, gov.hook_errors)
            self._warn(run, gov.hook_errors[seen:])
            if lead_decision is not None and lead_decision.decision != "allow":
                return lead_decision
        if self.hooks.has(hook_input.event):
            seen = len(run.hook_errors)
            own = await self.hooks.dispatch(hook_input, run.hook_errors)
            self._warn(run, run.hook_errors[seen:])
            if own is not None:
                return own
        return lead_decision

    def _warn_cost_unknown(self, run: RunState) -> None:
        """Say once per run that ``max_cost_usd`` cannot see a response without a cost."""
        if run.cost_warned:
            return
        run.cost_warned = True
        if run.emit is not None:
            provider = self.chat.provider
            run.emit(
                WarningEvent(
                    **self._ids(run),
                    message=(
                        f"max_cost_usd is set, but provider {getattr(provider, 'name', '?')!r} "
                        f"(model {getattr(provider, 'model', '?')!r}) reported no cost for a "
                        "response: the cost limit counts only reported costs"
                    ),
                )
            )

    def _warn(self, run: RunState, messages: list[str]) -> None:
        """Announce hook failures that did not stop the run (they are also in the result)."""
        if messages and run.emit is not None:
            for message in messages:
                run.emit(WarningEvent(**self._ids(run), message=f"hook failed: {message}"))

    async def _drain_config(self, run: RunState) -> None:
        pending, self._pending_config = self._pending_config, []
        for hook_input in pending:
            await self._fire(run, msgspec.structs.replace(hook_input, run_id=run.run_id))

    # -- event ids -------------------------------------------------------------------------

    def _ids(self, run: RunState) -> dict[str, Any]:
        """The id fields every event of this run carries (built once per run)."""
        ids = run.ids
        if ids is None:
            gov = self.governance
            ids = {"agent_id": self.agent_id, "agent_name": self.name, "run_id": run.run_id}
            if gov is not None:
                ids["delegation_id"] = gov.delegation_id
                ids["parent_agent_id"] = gov.parent_agent_id
                ids["parent_run_id"] = gov.parent_run_id
            run.ids = ids
        return ids
