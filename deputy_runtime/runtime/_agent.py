"""Agent: one model, its tools, and the loop that governs every tool call.

The loop is: check limits -> one provider request -> for each requested tool call
(concurrently within the turn, results kept in request order): limit slot -> permission
check -> PreToolUse hooks -> the tool -> PostToolUse hooks. It ends when the model answers
without tool calls, a limit or hook stops it, it is interrupted, or the provider fails.
The same class runs the lead and every subagent; a subagent additionally carries a
:class:`Governance` that ties its calls to its lead's live permissions and hooks. Each run
gets a :class:`RunContext`; the loop here and the gate in ``_gate`` share the run only
through it.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import anyio
import msgspec

from .._ids import new_id
from .._outputschema import (
    OutputSchema,
    SchemaProblem,
    output_retries_value,
    output_schema_value,
)
from .._tracing import STATE, failures_marked
from ..chat import (
    AssistantTurn,
    Chat,
    ContentText,
    ContentToolRequest,
    ContentToolResult,
    ModelRequest,
    ToolSpec,
    Turn,
    complete_streaming,
    reset_current_agent,
    running_async_library,
    set_current_agent,
    tool_error_text,
)
from ..errors import (
    DefinitionError,
    ProviderError,
    RunActiveError,
    ToolArgumentError,
)
from ..skills import Skill, skills_prompt_section, skills_tool
from ..tools import Tool, invoke_tool
from ._caller import caller_scope
from ._compaction import Compaction, compactor_for
from ._context import (
    RUNNING,
    Governance,
    RunContext,
    add_task,
    finish_run,
    hook_input,
    preview,
    wants,
)
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
from ._hooks import HookEvent, HookInput, Hooks
from ._ledger import BudgetLedger
from ._output import OutputContract, judge, output_section
from ._ownspend import LeadSpend, RunSpend
from ._permissions import DELEGATE_TOOL_NAME, Permissions, normalize_tool_name
from ._result import AgentResult, ProviderFailure, ToolRejection, raise_for_limit
from ._states import StopReason
from ._texts import cost_unknown_text, invalid_arguments_text
from ._trace import begin_run, chat_reply, chat_span, end_run, tool_decision, tool_result, tool_span
from ._usage import Meter, Reservation, UsageLimits

__all__ = ["Agent", "begin_batch", "end_batch", "run_delegated"]


_NO_NAMES: frozenset[str] = frozenset()


def _directory(working_dir: str | os.PathLike[str] | None) -> Path:
    """``working_dir`` (default: the current directory) resolved, checked to exist.

    Raises:
        ValueError: It is not an existing directory.
    """
    wd = Path(os.path.realpath(working_dir if working_dir is not None else os.getcwd()))
    if not wd.is_dir():
        raise ValueError(f"working_dir {str(wd)!r} is not an existing directory")
    return wd


class Agent:
    """An agent: a chat, tools, permissions, hooks and usage limits, and its run loop.

    One run at a time (:class:`~deputy_runtime.RunActiveError` otherwise). The
    conversation lives in ``chat`` and carries over between runs; limits count only what
    each run uses.

    Args:
        chat: The conversation and its provider.
        tools: The tools offered to the model.
        system_prompt: Replaces the chat's system prompt when given.
        permissions: Which tool calls may run (default ``Permissions()``: standard mode).
        usage_limits: Per-run limits (default :class:`UsageLimits`).
        hooks: Host callbacks (default: none).
        working_dir: Bounds the default permissions' write root (default: the current
            directory; for a subagent, its lead's).
        name: The agent's name (in events, hook inputs and results).
        skills: Skills whose prompt section and ``load_skill`` tool the agent gets.
        disallowed_tools: Tool names never offered to the model, whatever their source
            (skills included).
        agent_id: The agent's id (default: a fresh one).
        governance: Set by a LeadAgent on the subagents it builds: ties their calls to
            the lead's live permissions and hooks. Hosts leave it ``None``.
        output_schema: What the final answer must be, as ``AgentDefinition.output_schema``
            takes it (a JSON Schema mapping in the supported subset, or a
            ``msgspec.Struct`` / dataclass type). The system prompt gains a section showing
            the schema; a final answer that does not match is sent back with the
            validation error, and the decoded value is the result's ``output``.
        output_retries: How many mismatching answers are sent back (0 to 10; ``None``: 2);
            when they are spent the run ends with stop reason ``invalid_output``.
        compaction: When and how the conversation is compacted to stay inside the
            model's context window (default ``Compaction()``: at 80% of a known window,
            by summarising the oldest turns). A request that would not fit the window is
            never sent: the run stops ``context_window``.

    Raises:
        ValueError: ``working_dir`` is not an existing directory, or two tools share a name.
        TypeError: ``tools`` contains something that is not a Tool, or ``compaction``
            is not a Compaction.
        DefinitionError: ``output_schema`` or ``output_retries`` is invalid (a
            ``ValueError``; the message names the argument).
    """

    # Slots: a fan-out keeps one subagent per in-flight delegation alive.
    __slots__ = (
        "__weakref__",
        "_active",
        "_base_prompt",
        "_hidden",
        "_interrupt_reason",
        "_output",
        "_pending_config",
        "_permissions",
        "_prompt",
        "_session_started",
        "_skills",
        "_specs",
        "_tools",
        "agent_id",
        "chat",
        "compaction",
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
        disallowed_tools: Iterable[str] = (),
        agent_id: str | None = None,
        governance: Governance | None = None,
        output_schema: OutputSchema | None = None,
        output_retries: int | None = None,
        compaction: Compaction | None = None,
    ) -> None:
        self._output = _output_contract(output_schema, output_retries)
        if compaction is not None and not isinstance(compaction, Compaction):
            raise TypeError(
                f"compaction must be a Compaction or None, got {type(compaction).__name__}"
            )
        self.compaction = compaction if compaction is not None else Compaction()
        if governance is not None and working_dir is None:
            # A subagent works in its lead's directory, which the lead resolved and checked.
            wd = governance.lead.working_dir
        else:
            wd = _directory(working_dir)
        self.chat = chat
        self.working_dir = wd
        self.name = name
        self.agent_id = agent_id if agent_id is not None else new_id("agent")
        self.hooks = hooks if hooks is not None else Hooks()
        self.usage_limits = usage_limits if usage_limits is not None else UsageLimits()
        self.governance = governance
        self._permissions = (permissions or Permissions()).bind(wd)
        self._skills = tuple(skills)
        self._base_prompt = system_prompt if system_prompt is not None else chat.get_system_prompt()
        self._hidden = (
            frozenset(normalize_tool_name(n) for n in disallowed_tools)
            if disallowed_tools
            else _NO_NAMES
        )
        self._tools: dict[str, Tool] = {}
        self._specs: tuple[ToolSpec, ...] = ()
        self._active = False
        self._interrupt_reason: str | None = None
        self._session_started = False
        self._pending_config: list[HookInput] = []
        self.last_result: AgentResult | None = None
        if tools or self._skills:
            self.set_tools(tools)
        self._prompt = self._compose_prompt()

    # -- configuration -----------------------------------------------------------------

    @property
    def permissions(self) -> Permissions:
        """The agent's current permissions."""
        return self._permissions

    @property
    def interrupt_reason(self) -> str | None:
        """The reason of a pending interrupt of the active run, or ``None``."""
        return self._interrupt_reason

    @property
    def running(self) -> bool:
        """Whether a run (or a ``parallel_delegate`` batch) is active."""
        return self._active

    def set_permission_mode(self, mode: str) -> None:
        """Narrow the permission mode.

        Takes effect at the next tool call, also for running subagents of a lead. The
        ConfigChange hooks run at the next boundary of the active run (or the next run).

        Args:
            mode: A permission mode no wider than the current one.

        Raises:
            PermissionModeWideningError: ``mode`` is wider than the current mode.
            PermissionsError: ``mode`` is not a permission mode.
        """
        old = self._permissions.mode
        self._permissions = self._permissions.narrow(mode)
        if mode != old:
            self._pending_config.append(
                hook_input(
                    self,
                    HookEvent.ConfigChange,
                    None,
                    key="permission_mode",
                    old_value=old,
                    new_value=mode,
                )
            )

    def set_tools(self, tools: Iterable[Tool]) -> None:
        """Replace the agent's tools (plus the skills' tools and ``load_skill``).

        Args:
            tools: The new tools; names in ``disallowed_tools`` are left out.

        Raises:
            TypeError: An entry is not a Tool.
            ValueError: Two tools share a name.
        """
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
            if self.governance is None:
                # A subagent's skill tools come bound by its delegation (human_input,
                # disallowed_tools), already inside ``tools``.
                for skill in self._skills:
                    yield from skill.tools
            yield skills_tool(self._skills)

    def get_tools(self) -> tuple[Tool, ...]:
        """The tools offered to the model, in order."""
        return tuple(self._tools.values())

    def tool(self, name: str) -> Tool | None:
        """The tool offered to the model as ``name``, or ``None``."""
        return self._tools.get(name)

    def tool_names(self) -> tuple[str, ...]:
        """The names of the tools offered to the model, in order."""
        return tuple(self._tools)

    @property
    def system_prompt(self) -> str | None:
        """The system prompt sent with every request (base prompt plus skills section)."""
        return self._prompt

    def _compose_prompt(self) -> str | None:
        # Built once (and again when a LeadAgent's sub-agents change), not per request.
        sections = [self._base_prompt] if self._base_prompt else []
        if self._skills:
            sections.append(skills_prompt_section(self._skills))
        if self._output is not None:
            sections.append(output_section(self._output))
        if not sections:
            return self._base_prompt
        return "\n\n".join(sections)

    async def end_session(self, reason: str = "closed") -> list[str]:
        """Fire the SessionEnd hooks once, if a run started the session.

        Call it when the host is done with the agent (for example at shutdown); the
        conversation is kept, and a later run starts a new session (SessionStart again).

        Args:
            reason: The ``reason`` the SessionEnd hooks receive.

        Returns:
            The ``"EVENT: message"`` errors of hooks that raised (there is no run result
            to keep them in).
        """
        errors: list[str] = []
        if not self._session_started or self._active:
            return errors
        self._session_started = False
        if wants(self, HookEvent.SessionEnd):
            await self.hooks.dispatch(
                hook_input(self, HookEvent.SessionEnd, None, reason=reason), errors
            )
        return errors

    def interrupt(self, reason: str = "interrupted") -> None:
        """Ask the active run to stop at its next boundary (before a request or tool call).

        Does nothing when no run is active: an interrupt never carries over to a later run.

        Args:
            reason: Why; a lead passes it on to its unsettled subagents.
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
        """Run the agent on ``task`` until it answers, stops, or fails.

        Args:
            task: The user message that starts the run.
            usage_limits: This run's limits (default: the agent's ``usage_limits``).
            on_event: Receives every event synchronously as it happens (a lead's include
                its subagents'), also the final ones of a cancelled run. If it raises, it
                gets no further events, the run finishes normally, and the error is raised
                afterwards (the result is still in :attr:`last_result`).

        Returns:
            The run's result.

        Raises:
            RunActiveError: A run of this agent is already active.
            RequestLimitExceeded: A limit was reached with ``on_exceed="error"``.
            BudgetExceeded: Another limit was reached with ``on_exceed="error"``.
        """
        if on_event is None:
            return await self._run(task, usage_limits=usage_limits, emit=None)
        sink = GuardedSink(on_event)
        result = await self._run(task, usage_limits=usage_limits, emit=sink)
        if sink.error is not None:
            raise sink.error
        return result

    def run_sync(self, task: str, *, usage_limits: UsageLimits | None = None) -> AgentResult:
        """Blocking :meth:`run` for scripts.

        Args:
            task: The user message that starts the run.
            usage_limits: This run's limits (default: the agent's ``usage_limits``).

        Returns:
            The run's result.

        Raises:
            RuntimeError: Called inside a running event loop.
        """
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

        Args:
            task: The user message that starts the run.
            usage_limits: This run's limits (default: the agent's ``usage_limits``).

        Returns:
            An async iterator of the run's events.
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
        source: tuple[Meter, Reservation] | None = None,
        spend: Callable[[Meter], RunSpend] | None = None,
        boundary: Callable[[RunContext], Awaitable[None]] | None = None,
        restore: Callable[[RunContext], None] | None = None,
    ) -> AgentResult:
        """The run itself; ``boundary`` is awaited at every turn boundary and ``restore``
        puts a checkpoint's state into the new run before it starts (LeadAgent's)."""
        if self._active:
            raise RunActiveError(f"Agent {self.name or self.agent_id} already has an active run")
        if not isinstance(task, str):
            raise TypeError(f"task must be a string, got {type(task).__name__}")
        self._active = True
        ctx = RunContext(self, run_id or new_id("run"), usage_limits or self.usage_limits, emit)
        ctx.meter.source = source
        if spend is not None:
            ctx.spend = spend(ctx.meter)
        ctx.turns = self.chat.get_turns()  # a fresh list
        ctx.boundary = boundary
        if restore is not None:
            restore(ctx)
            ctx.resumed = True
        error: BaseException | None = None
        # A subagent's run is inside its delegation's span: only top-level runs get one.
        traced = (
            begin_run(self.name, self.agent_id, self.chat.provider, ctx.run_id, task)
            if STATE.tracer is not None and self.governance is None
            else None
        )
        # Only a top-level run draws its own spend from a shared budget: a subagent's is
        # inside its delegation's reservation.
        ledger = self._own_ledger() if self.governance is None else None
        try:
            if ledger is None:
                await self._timed_loop(ctx, task)
            else:

                def lost(reason: str) -> None:
                    ctx.stop(StopReason.LEASE_LOST)

                async with LeadSpend(ledger, ctx.run_id, lost) as own:
                    ctx.spend = own
                    await self._timed_loop(ctx, task)
        except ProviderFailure as exc:
            error = exc
        except BaseException as exc:
            error = exc
            raise
        finally:
            self._active = False
            # An interrupt applies to the run it was meant for, not to the next one.
            self._interrupt_reason = None
            result = finish_run(ctx, error)
            self.last_result = result
            if traced is not None:
                end_run(traced, result, error)
        if ctx.wants(HookEvent.Stop) or self._pending_config:
            await self._drain_config(ctx)
            await ctx.fire(ctx.hook_input(HookEvent.Stop, reason=result.stop_reason))
        if ctx.limits.on_exceed == "error":
            raise_for_limit(result)  # after the Stop hooks: they see every run end
        return result

    def _own_ledger(self) -> BudgetLedger | None:
        """The shared budget this agent's own requests are drawn from (LeadAgent's)."""
        return None

    async def _timed_loop(self, ctx: RunContext, task: str) -> None:
        seconds = ctx.limits.max_seconds
        if seconds is None:
            await self._loop(ctx, task)
            return
        ctx.deadline = anyio.current_time() + seconds
        with anyio.CancelScope(deadline=ctx.deadline) as scope:
            await self._loop(ctx, task)
        if scope.cancelled_caught:
            ctx.stop_reason = StopReason.TIME_LIMIT

    async def _loop(self, ctx: RunContext, task: str) -> None:
        if not self._session_started:
            self._session_started = True
            if ctx.wants(HookEvent.SessionStart):
                await ctx.fire(ctx.hook_input(HookEvent.SessionStart))
        if ctx.emit is not None:
            ctx.emit(RunStart(**ctx.event_ids(), task=task, limits=ctx.limits))
        if not ctx.resumed:  # a resumed run's prompt was submitted before its checkpoint
            if ctx.wants(HookEvent.UserPromptSubmit):
                decision = await ctx.fire(ctx.hook_input(HookEvent.UserPromptSubmit, prompt=task))
                if decision is not None and decision.decision in ("deny", "stop"):
                    ctx.stop_reason = StopReason.HOOK_REQUESTED_STOP
                    return
            add_task(ctx.turns, task)
        meter = ctx.meter
        # None when the model's context window is unknown: nothing to keep it inside.
        compactor = compactor_for(self.chat, self.name, self.compaction)
        while True:
            if ctx.boundary is not None:
                # Every call of the previous turn is answered and every delegation of it
                # settled: the run can be saved here and continued from here.
                await ctx.boundary(ctx)
            if self._pending_config:
                await self._drain_config(ctx)
            if self._interrupt_reason is not None:
                ctx.stop_reason = StopReason.INTERRUPTED
                return
            # Before the limit check: compaction requests count against the limits, and
            # the request itself is checked after them.
            if compactor is not None and not await compactor.fit(ctx, self._prompt, self._specs):
                return
            limit = meter.before_request()
            spend = ctx.spend
            if limit is None and spend is not None:
                limit = await spend.before_request()
            if limit is not None:
                ctx.stop_reason = limit
                return
            reply: AssistantTurn | None = None
            try:
                reply = await self._request(ctx)
            except ProviderError as exc:
                ctx.stop_reason = StopReason.PROVIDER_ERROR
                raise ProviderFailure(str(exc)) from exc
            finally:
                if spend is not None:
                    await spend.after_request(reply.usage if reply is not None else None)
            meter.add_response(reply.usage)
            if compactor is not None:
                compactor.reported(reply.usage.input_tokens)
            if reply.usage.cost_usd is None and ctx.limits.max_cost_usd is not None:
                self._warn_cost_unknown(ctx)
            ctx.turns.append(reply.turn())
            ctx.turn_results = ()  # this reply's calls have not run yet
            calls = reply.tool_requests
            if ctx.emit is not None:
                ctx.emit(
                    ModelResponseEvent(
                        **ctx.event_ids(),
                        index=ctx.requests,
                        finish_reason=reply.finish_reason,
                        tool_calls=len(calls),
                        input_tokens=reply.usage.input_tokens,
                        output_tokens=reply.usage.output_tokens,
                        duration=reply.duration,
                        cost_usd=reply.usage.cost_usd,
                    )
                )
            if not calls:
                if self._output is None or self._accept(ctx, reply):
                    ctx.stop_reason = StopReason.COMPLETE
                    return
                if ctx.stop_reason is not None:
                    return  # the retries are spent
                continue
            over = meter.limit_reached(reaching=False)
            if over is not None:
                ctx.stop_reason = over
                return  # finish_run answers the open tool calls
            if spend is not None:
                # Before the turn's delegations share what is left.
                await spend.reserve_next(tool_calls=len(calls))
            results = await self._run_tool_calls(ctx, calls)
            ctx.turns.append(Turn("user", results))
            if ctx.stop_reason is not None:
                if ctx.boundary is not None:
                    # Stopped with the turn answered (an interrupt, a hook, a limit): the
                    # checkpoint keeps what the turn's delegations did.
                    await ctx.boundary(ctx)
                return

    def _accept(self, ctx: RunContext, reply: AssistantTurn) -> bool:
        """Whether the final answer matches the output contract (its value is kept then).

        A mismatch with retries left appends the user turn saying what was wrong, so the
        loop's next request is the retry; with none left the run stops ``invalid_output``
        and the last mismatch is the run's error (the rule: :func:`judge`).
        """
        contract = self._output
        assert contract is not None
        verdict = judge(contract, reply.text, ctx.output_attempts)
        if verdict.accepted:
            ctx.output = verdict.value
            return True
        ctx.output_attempts += 1
        if verdict.retry is None:
            ctx.output_error = verdict.error
            ctx.stop_reason = StopReason.INVALID_OUTPUT
            return False
        if ctx.emit is not None and verdict.warning is not None:
            ctx.emit(WarningEvent(**ctx.event_ids(), message=verdict.warning))
        ctx.turns.append(Turn("user", (ContentText(verdict.retry),)))
        return False

    async def _request(self, ctx: RunContext) -> AssistantTurn:
        ctx.requests += 1
        ctx.meter.start_request()
        provider = self.chat.provider
        # Chat replaces its params mapping on change, never mutates it: safe to share.
        request = ModelRequest(self._prompt, tuple(ctx.turns), self._specs, self.chat.params)
        if ctx.emit is not None:
            ctx.emit(ModelRequestEvent(**ctx.event_ids(), index=ctx.requests, model=provider.model))
        token = set_current_agent(self.name)
        try:
            if STATE.tracer is not None:
                return await self._traced_request(ctx, request)
            if ctx.emit is None:
                return await provider.complete(request)
            # A bound method, not a closure: it is alive for the whole request, and a
            # fan-out keeps one per in-flight delegation.
            return await complete_streaming(provider, request, ctx.text_delta)
        finally:
            reset_current_agent(token)

    async def _traced_request(self, ctx: RunContext, request: ModelRequest) -> AssistantTurn:
        provider = self.chat.provider
        with chat_span(self.name, provider, request) as span:
            if ctx.emit is None:
                reply = await provider.complete(request)
            else:
                reply = await complete_streaming(provider, request, ctx.text_delta)
            chat_reply(span, reply)
            return reply

    # -- tool calls ------------------------------------------------------------------------

    async def _run_tool_calls(
        self, ctx: RunContext, calls: Sequence[ContentToolRequest]
    ) -> tuple[ContentToolResult, ...]:
        # Limit slots are taken in request order before anything runs (on a shared budget
        # the ledger's first); the turn's delegations then share what is left of the
        # budget (Meter.expect).
        meter = ctx.meter
        if ctx.spend is None:
            slots = [meter.take_tool_call() for _ in calls]
        else:
            slots = ctx.spend.tool_slots(len(calls), meter.take_tool_call)
        meter.expect(sum(1 for c in calls if c.name == DELEGATE_TOOL_NAME))
        # Kept on the run so a run cut off mid-turn can answer these calls truthfully.
        results: list[ContentToolResult | None] = [None] * len(calls)
        ctx.turn_results = results
        if len(calls) == 1:
            result = results[0] = await self._tool_call(ctx, calls[0], slots[0], results, 0)
            return (result,)

        async def one(i: int) -> None:
            results[i] = await self._tool_call(ctx, calls[i], slots[i], results, i)

        async with anyio.create_task_group() as tg:
            for i in range(len(calls)):
                tg.start_soon(one, i)
        return tuple(r for r in results if r is not None)

    async def _tool_call(
        self,
        ctx: RunContext,
        call: ContentToolRequest,
        slot: bool,
        results: list[ContentToolResult | None],
        index: int,
    ) -> ContentToolResult:
        """One requested call: the gate (limits, permissions, hooks), then the tool."""
        call_id = call.id or new_id("tool")
        if STATE.tracer is not None:
            return await self._traced_tool_call(ctx, call, call_id, slot, results, index)
        gated = await gate(ctx, call, call_id, slot)
        if isinstance(gated, ContentToolResult):
            return gated
        results[index] = RUNNING  # a cancellation from now on cuts it off
        # The gate's frame is gone while the tool runs: a fan-out of long delegations
        # keeps one frame less per call alive.
        return await self._execute(ctx, gated, call, call_id)

    async def _traced_tool_call(
        self,
        ctx: RunContext,
        call: ContentToolRequest,
        call_id: str,
        slot: bool,
        results: list[ContentToolResult | None],
        index: int,
    ) -> ContentToolResult:
        """:meth:`_tool_call` inside its ``execute_tool`` span."""
        with tool_span(call, call_id) as span:
            gated = await gate(ctx, call, call_id, slot)
            tool_decision(span, gated)
            if isinstance(gated, ContentToolResult):
                return gated
            results[index] = RUNNING
            result = await self._execute(ctx, gated, call, call_id)
            tool_result(span, result)
            return result

    async def _execute(
        self, ctx: RunContext, tool: Tool, call: ContentToolRequest, call_id: str
    ) -> ContentToolResult:
        emit = ctx.emit
        started = time.perf_counter()
        delegation_id = self._call_delegation_id(call.name)
        if emit is not None:
            emit(
                ToolStart(
                    **ctx.event_ids(),
                    tool_call_id=call_id,
                    tool_name=call.name,
                    arguments=call.arguments,
                    call_delegation_id=delegation_id,
                )
            )
        value: Any = None
        error: str | None = None
        try:
            with caller_scope(ctx):
                invocation = self._invoke(ctx, tool, call, call_id, delegation_id)
                value = await (invocation if STATE.tracer is None else failures_marked(invocation))
        except ToolRejection as exc:
            error = str(exc)
        except ToolArgumentError as exc:
            error = invalid_arguments_text(exc)
        except Exception as exc:
            error = tool_error_text(exc)
        event = HookEvent.PostToolUse if error is None else HookEvent.PostToolUseFailure
        if ctx.wants(event):
            decision = await ctx.fire(
                ctx.hook_input(
                    event, call=call, call_id=call_id, tool_result=value, tool_error=error
                ),
            )
            if decision is not None and decision.decision == "stop":
                ctx.stop(StopReason.HOOK_REQUESTED_STOP)
        if emit is not None:
            emit(
                ToolEnd(
                    **ctx.event_ids(),
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
        ctx: RunContext,
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

    # -- hooks and warnings ------------------------------------------------------------------

    def _warn_cost_unknown(self, ctx: RunContext) -> None:
        """Say once per run that ``max_cost_usd`` cannot see a response without a cost."""
        if ctx.cost_warned:
            return
        ctx.cost_warned = True
        if ctx.emit is not None:
            provider = self.chat.provider
            ctx.emit(
                WarningEvent(
                    **ctx.event_ids(),
                    message=cost_unknown_text(
                        str(getattr(provider, "name", "?")), str(getattr(provider, "model", "?"))
                    ),
                )
            )

    async def _drain_config(self, ctx: RunContext) -> None:
        pending, self._pending_config = self._pending_config, []
        for pending_input in pending:
            await ctx.fire(msgspec.structs.replace(pending_input, run_id=ctx.run_id))


def _output_contract(schema: object, retries: object) -> OutputContract | None:
    try:
        checked = output_schema_value(schema)
    except SchemaProblem as exc:
        raise DefinitionError(f"output_schema: {exc.problem}") from None
    try:
        count = output_retries_value(retries, checked)
    except SchemaProblem as exc:
        raise DefinitionError(f"output_retries: {exc.problem}") from None
    return None if checked is None else OutputContract(checked, count)


def run_delegated(
    agent: Agent,
    task: str,
    *,
    usage_limits: UsageLimits,
    emit: EventSink | None,
    run_id: str,
    source: tuple[Meter, Reservation] | None = None,
    spend: Callable[[Meter], RunSpend] | None = None,
) -> Awaitable[AgentResult]:
    """Run ``agent`` as a delegation: under its reserved limits, with a preset run id.

    Events go to the lead's sink as they are (the lead's own run guards it), so a
    subagent's run never raises a sink's error itself.

    Args:
        agent: The subagent.
        task: Its first message.
        usage_limits: The budget reserved for it.
        emit: The lead run's event sink.
        run_id: The run id announced in the delegation's events.
        source: The lead's meter and the delegation's fair-share reservation on it,
            which the subagent tops up from when it reaches its share (``None``: never).
        spend: Builds the run's spend on the lead's shared budget from its meter (a
            delegation holding a ledger share: its top-ups are covered there too).

    Returns:
        The awaitable of the subagent's result (a plain function, so a fan-out keeps no
        frame of its own per in-flight delegation).
    """
    return agent._run(
        task, usage_limits=usage_limits, emit=emit, run_id=run_id, source=source, spend=spend
    )


def begin_batch(agent: Agent) -> None:
    """Mark ``agent`` busy for a host-driven batch (``parallel_delegate``).

    Raises:
        RunActiveError: A run or batch of ``agent`` is already active.
    """
    if agent._active:
        raise RunActiveError(f"Agent {agent.name or agent.agent_id} already has an active run")
    agent._active = True


def end_batch(agent: Agent) -> None:
    """Mark ``agent`` idle again; an interrupt ends with the batch it stopped."""
    agent._active = False
    agent._interrupt_reason = None
