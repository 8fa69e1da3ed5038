"""The agent loop as workflow code: deterministic, its I/O done by activities.

One :class:`AgentLoop` runs one agent's run (a lead's or a delegation's): check the
budget and the interrupt flag, request the model (an activity), take every tool call's
slot when the turn arrives, run the calls concurrently (tool activities, or the lead's
delegations as child workflows), append their results, and repeat. Nothing here reads a
clock, draws a random number or touches the network or the disk, so a replay of the
workflow's history takes exactly the same steps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypedDict

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError
from temporalio.workflow import ActivityCancellationType

from ._hookflow import (
    LeadHooks,
    ToolStarts,
    after_tool_reply,
    ask_denied,
    delegate_with_hooks,
    expect_start,
    halt,
    log_denial,
)
from ._human import ask_tools

with workflow.unsafe.imports_passed_through():
    from ..chat import (
        ContentText,
        ContentToolRequest,
        ContentToolResult,
        ToolSpec,
        Turn,
        tool_error_text,
    )
    from ..runtime import (
        DELEGATE_TOOL_NAME,
        INTERRUPTED_TEXT,
        NOT_RUN_TEXT,
        TOOL_CALL_LIMIT_TEXT,
        AgentResult,
        Event,
        Meter,
        ModelRequestEvent,
        ModelResponseEvent,
        OutputContract,
        RunStart,
        StopEvent,
        StopReason,
        ToolEnd,
        ToolStart,
        UsageEvent,
        UsageLimits,
        WarningEvent,
        cost_unknown_text,
        judge,
        refill_field,
    )
    from ._activities import MODEL_ACTIVITY, NON_RETRYABLE_ERRORS, TOOL_ACTIVITY
    from ._cancel import cancelling
    from ._deadline import Deadline, close_cut_turn, outlive
    from ._human_values import asks_user
    from ._values import ModelCall, ModelReply, PermissionSpec, ToolCall, ToolReply

__all__ = ["MODEL_RETRY", "TOOL_RETRY", "AgentLoop", "Ids", "new_id"]

#: Model requests: the provider retries inside an attempt; Temporal retries the attempt
#: (a dead worker, a retryable provider error), never an auth or bad-request error.
MODEL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=3,
    non_retryable_error_types=list(NON_RETRYABLE_ERRORS),
)
MODEL_TIMEOUT = timedelta(minutes=10)
#: Tool calls: a tool's own error is a result for the model, not a failure, so a retry
#: happens only when the worker running it is lost (heartbeat timeout).
TOOL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_attempts=3,
    non_retryable_error_types=list(NON_RETRYABLE_ERRORS),
)
TOOL_TIMEOUT = timedelta(minutes=30)
HEARTBEAT_TIMEOUT = timedelta(seconds=20)
#: A cancelled run waits for its activities to stop (they learn it at their next
#: heartbeat), so nothing of the run is still running once it has ended.
CANCELLATION = ActivityCancellationType.WAIT_CANCELLATION_COMPLETED


Delegate = Callable[[ContentToolRequest], Awaitable[ContentToolResult]]
#: Called at each turn boundary (every call of the turn settled, before the next
#: request) with the conversation and the requests sent so far; may continue as new.
Boundary = Callable[[list[Turn], int], Awaitable[None]]
ToolRunner = Callable[[ToolCall], Awaitable[ToolReply]]
#: Answers an ``ask_user`` call in workflow code (``HumanInput.ask``), given the loop.
Ask = Callable[[ContentToolRequest, "AgentLoop"], Awaitable[ToolReply]]
#: Draws more of a limit field from the lead (``LeadTopUp``), given the run's meter at
#: that limit; ``True`` when the lead granted some and the meter's limit was raised.
TopUp = Callable[[Meter, str], Awaitable[bool]]


def new_id(prefix: str) -> str:
    """``prefix_<32 hex>`` from the workflow's seeded random source (replays alike)."""
    return f"{prefix}_{workflow.uuid4().hex}"


class IdFields(TypedDict):
    """The id fields every event and result carries."""

    agent_id: str
    agent_name: str | None
    run_id: str
    delegation_id: str | None
    parent_agent_id: str | None
    parent_run_id: str | None


class Ids:
    """The ids every event and the result of one run carry."""

    __slots__ = (
        "agent_id",
        "agent_name",
        "delegation_id",
        "parent_agent_id",
        "parent_run_id",
        "run_id",
    )

    def __init__(
        self,
        *,
        agent_id: str,
        agent_name: str | None,
        run_id: str,
        delegation_id: str | None = None,
        parent_agent_id: str | None = None,
        parent_run_id: str | None = None,
    ) -> None:
        self.agent_id = agent_id
        self.agent_name = agent_name
        self.run_id = run_id
        self.delegation_id = delegation_id
        self.parent_agent_id = parent_agent_id
        self.parent_run_id = parent_run_id

    def fields(self) -> IdFields:
        """The id fields of events and results, as keyword arguments."""
        return {
            "agent_id": self.agent_id,
            "agent_name": self.agent_name,
            "run_id": self.run_id,
            "delegation_id": self.delegation_id,
            "parent_agent_id": self.parent_agent_id,
            "parent_run_id": self.parent_run_id,
        }


class AgentLoop:
    """One agent's run inside a workflow; see the module docstring.

    ``delegate`` handles ``delegate_to_agent`` calls (the lead's); ``events`` is the
    workflow's event log, appended to in order; ``tool_runner``, when given, runs the
    tool activities instead of the default dispatch (a delegation's bound resources).
    """

    def __init__(
        self,
        *,
        ids: Ids,
        model: str,
        system_prompt: str | None,
        tools: tuple[str, ...],
        extra_tools: tuple[ToolSpec, ...] = (),
        params: dict[str, object] | None = None,
        limits: UsageLimits,
        permissions: PermissionSpec,
        lead_permissions: PermissionSpec | None = None,
        events: list[Event],
        delegate: Delegate | None = None,
        boundary: Boundary | None = None,
        tool_runner: ToolRunner | None = None,
        lead_hooks: LeadHooks | None = None,
        skills: tuple[str, ...] = (),
        ask: Ask | None = None,
        observers: tuple[str, ...] = (),
        top_up: TopUp | None = None,
        output: OutputContract | None = None,
    ) -> None:
        if ask is not None:  # the workflow answers ask_user itself (see _human)
            tools, extra_tools = ask_tools(tools, extra_tools)
        self.ids = ids
        self.model = model
        self.system_prompt = system_prompt
        self.tools = tools
        self.extra_tools = extra_tools
        self.params = dict(params or {})
        self.limits = limits
        self.meter = Meter(limits)
        self.permissions = permissions
        self.lead_permissions = lead_permissions
        self.events = events
        self.delegate = delegate
        self.tool_runner = tool_runner
        self.interrupt_reason: str | None = None
        self.offered = (*tools, *(s.name for s in extra_tools))
        self.boundary = boundary
        self.lead_hooks = lead_hooks
        self.stop_reason: StopReason | None = None  # set by a hook's stop decision
        self.hook_errors: list[str] = []
        self.skills = skills  # the worker builds their load_skill and finds their tools
        self.ask = ask
        self.deadline = Deadline()  # UsageLimits.max_seconds in workflow time
        self.starts = ToolStarts()  # tool calls in flight (see ``_hookflow``)
        self.observers = observers  # a subagent's events forwarded beyond the usual ones
        self.top_up = top_up  # a fair-share delegation's way to its lead's budget
        self.cost_warned = False  # the cost-unknown warning is given once per run
        self.output = output  # the final answer's contract (structured results)
        self.output_rejected = 0  # final answers it rejected so far
        self.output_value: object = None

    def interrupt(self, reason: str) -> None:
        """Stop at the next boundary (before a request, before a tool call)."""
        self.interrupt_reason = self.interrupt_reason or reason

    async def run(
        self, task: str, turns: list[Turn] | None = None, requests: int = 0
    ) -> AgentResult:
        """Run the loop on ``task`` until the model answers or a limit or interrupt stops it.

        ``turns`` and ``requests`` resume a run carried over a continue-as-new (its
        ``RunStart`` is already in the log).
        """
        ids = self.ids.fields()
        hooks = self.lead_hooks
        stopped = False
        self.deadline.start(self.limits)  # the run's hooks count against its time too
        if turns is None:
            if hooks is not None:
                await hooks.before_run(self)
            self.events.append(RunStart(**ids, task=task, limits=self.limits))
            turns = [Turn("user", (ContentText(task),))]
            stopped = hooks is not None and await hooks.prompt(self, task)
        if stopped:
            turns, stop_reason, error = [], StopReason.HOOK_REQUESTED_STOP, None
        else:
            steps = await self.deadline.run(self._steps(turns, requests))
            if steps is None:  # cut off by the time limit
                close_cut_turn(turns, self.deadline, self.events)
            stop_reason, error = steps or (StopReason.TIME_LIMIT, None)
        output = self.output_value if stop_reason == StopReason.COMPLETE else None
        if turns and turns[-1].role == "assistant" and turns[-1].tool_requests:
            # The run stopped at a limit after this reply: none of its calls ran.
            turns.append(
                Turn(
                    "user",
                    tuple(
                        ContentToolResult(c.id, error=NOT_RUN_TEXT) for c in turns[-1].tool_requests
                    ),
                )
            )
        usage = self.meter.snapshot()
        self.events.append(UsageEvent(**ids, usage=usage, limits=self.limits))
        self.events.append(StopEvent(**ids, stop_reason=stop_reason, usage=usage, error=error))
        result = AgentResult(
            response=_last_text(turns),
            turns=tuple(turns),
            usage=usage,
            stop_reason=stop_reason,
            limits=self.limits,
            error=error,
            # A subagent's tool hooks are its lead's: their errors go to its record.
            hook_errors=() if self.ids.delegation_id else tuple(self.hook_errors),
            output=output,
            **ids,
        )
        if hooks is not None:
            await hooks.after_run(self, stop_reason)
        return result

    async def _steps(self, turns: list[Turn], requests: int) -> tuple[StopReason, str | None]:
        while True:
            if self.interrupt_reason is not None:
                return StopReason.INTERRUPTED, None
            over = await self._limit(reaching=True)
            if over is not None:
                return over, None
            requests += 1
            self.meter.start_request()
            self.events.append(
                ModelRequestEvent(**self.ids.fields(), index=requests, model=self.model)
            )
            try:
                answer = await self._request(turns)
            except ActivityError as exc:
                if cancelling(exc):
                    raise
                cause = exc.cause if exc.cause is not None else exc
                return StopReason.PROVIDER_ERROR, str(cause)
            reply = answer.turn
            self.meter.add_response(reply.usage)
            if reply.usage.cost_usd is None and self.limits.max_cost_usd is not None:
                self._warn_cost_unknown(answer)
            turns.append(reply.turn())
            calls = reply.tool_requests
            self.events.append(
                ModelResponseEvent(
                    **self.ids.fields(),
                    index=requests,
                    finish_reason=reply.finish_reason,
                    tool_calls=len(calls),
                    input_tokens=reply.usage.input_tokens,
                    output_tokens=reply.usage.output_tokens,
                    duration=reply.duration,
                    cost_usd=reply.usage.cost_usd,
                )
            )
            if not calls:
                if self.output is None:
                    return StopReason.COMPLETE, None
                verdict = judge(self.output, reply.text, self.output_rejected)
                if verdict.accepted:
                    self.output_value = verdict.value
                    return StopReason.COMPLETE, None
                self.output_rejected += 1
                if verdict.retry is None:
                    return StopReason.INVALID_OUTPUT, verdict.error
                if verdict.warning is not None:
                    self.events.append(WarningEvent(**self.ids.fields(), message=verdict.warning))
                turns.append(Turn("user", (ContentText(verdict.retry),)))
                continue
            over = await self._limit(reaching=False)
            if over is not None:
                return over, None
            slots = [await self._tool_slot() for _ in calls]
            self.meter.expect(sum(1 for c in calls if c.name == DELEGATE_TOOL_NAME))
            results = await asyncio.gather(
                *(self._tool_call(call, slot) for call, slot in zip(calls, slots, strict=True))
            )
            turns.append(Turn("user", tuple(results)))
            if self.stop_reason is not None:
                return self.stop_reason, None
            if self.boundary is not None:
                await self.boundary(turns, requests)

    def _warn_cost_unknown(self, reply: ModelReply) -> None:
        """Say once per run that ``max_cost_usd`` cannot see a response without a cost."""
        if self.cost_warned:
            return
        self.cost_warned = True
        self.events.append(
            WarningEvent(
                **self.ids.fields(),
                message=cost_unknown_text(reply.provider or "?", reply.model or self.model),
            )
        )

    async def _limit(self, *, reaching: bool) -> StopReason | None:
        """``Meter.limit_reached`` with the top-up asked of the lead workflow."""
        over = self.meter.exceeded(reaching=reaching)
        while over is not None and self.top_up is not None:
            field = refill_field(over)
            if field is None or not await self.top_up(self.meter, field):
                break
            over = self.meter.exceeded(reaching=reaching)
        return over

    async def _tool_slot(self) -> bool:
        """``Meter.take_tool_call``, drawing more tool calls from the lead at the limit."""
        if self.meter.take_tool_call():
            return True
        return (
            self.top_up is not None
            and await self.top_up(self.meter, "max_tool_calls")
            and self.meter.take_tool_call()
        )

    async def _request(self, turns: list[Turn]) -> ModelReply:
        call = ModelCall(
            model=self.model,
            agent_name=self.ids.agent_name,
            system_prompt=self.system_prompt,
            turns=tuple(turns),
            tools=self.tools,
            extra_tools=self.extra_tools,
            params=self.params,
            skills=self.skills,
            extra_first=self.delegate is not None,  # a lead's delegate tool comes first
        )
        reply: ModelReply = await workflow.execute_activity(
            MODEL_ACTIVITY,
            call,
            result_type=ModelReply,
            start_to_close_timeout=MODEL_TIMEOUT,
            heartbeat_timeout=HEARTBEAT_TIMEOUT,  # a lost worker's request moves on soon
            retry_policy=MODEL_RETRY,
            cancellation_type=CANCELLATION,
        )
        return reply

    async def _tool_call(self, call: ContentToolRequest, slot: bool) -> ContentToolResult:
        if not slot:  # the run stops after this turn, as in-process
            halt(self, StopReason.TOOL_CALL_LIMIT)
            return ContentToolResult(call.id, error=TOOL_CALL_LIMIT_TEXT)
        if self.interrupt_reason is not None:
            return ContentToolResult(call.id, error=INTERRUPTED_TEXT)
        ids = self.ids.fields()

        def start() -> None:  # after the gate, as in-process (see ``after_tool_reply``)
            self.events.append(
                ToolStart(
                    **ids, tool_call_id=call.id, tool_name=call.name, arguments=call.arguments
                )
            )

        if self.ask is not None and asks_user(call.name) and call.name in self.offered:
            # Answered in workflow code; its permission check is pure, so tool_start goes
            # in first (before the question) only when the call passes it.
            if not ask_denied(self, call):
                start()
            reply = await self.ask(call, self)
            result, ran = reply.result, reply.denied is None
            if reply.denied is not None:
                log_denial(self, call, reply.denied)
        elif self.delegate is not None and call.name in {s.name for s in self.extra_tools}:
            result, ran = await outlive(delegate_with_hooks(self, call, self.delegate, start))
        else:
            expect_start(self, call, start)
            reply = await self._run_tool(call)
            result = reply.result
            ran = after_tool_reply(self, call, reply, start)
        if not ran:  # refused: no tool_start, no tool_end
            return self.deadline.note(call.id, result)
        self.events.append(
            ToolEnd(
                **ids,
                tool_call_id=call.id,
                tool_name=call.name,
                error=result.error,
                result_preview=_preview(result.value) if result.error is None else None,
            )
        )
        return self.deadline.note(call.id, result)

    async def _run_tool(self, call: ContentToolRequest) -> ToolReply:
        request = ToolCall(
            request_id=call.id,
            name=call.name,
            arguments=call.arguments,
            offered=self.tools,
            permissions=self.permissions,
            lead_permissions=self.lead_permissions,
            **self.ids.fields(),
            skills=self.skills,
            observers=self.observers,
        )
        if self.tool_runner is not None:  # routed to the delegation's resources
            return await self.tool_runner(request)
        try:
            reply: ToolReply = await workflow.execute_activity(
                TOOL_ACTIVITY,
                request,
                result_type=ToolReply,
                start_to_close_timeout=TOOL_TIMEOUT,
                heartbeat_timeout=HEARTBEAT_TIMEOUT,
                retry_policy=TOOL_RETRY,
                cancellation_type=CANCELLATION,
            )
        except ActivityError as exc:
            if cancelling(exc):
                raise
            cause = exc.cause if exc.cause is not None else exc
            error = tool_error_text(cause)
            return ToolReply(ContentToolResult(call.id, error=error))
        return reply


def _last_text(turns: list[Turn]) -> str:
    for turn in reversed(turns):
        if turn.role == "assistant" and turn.text:
            return turn.text
    return ""


_PREVIEW_CHARS = 200


def _preview(value: object) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= _PREVIEW_CHARS else text[:_PREVIEW_CHARS] + "…"
