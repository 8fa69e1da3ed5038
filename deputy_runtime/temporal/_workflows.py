"""The workflows: a lead run, and one child workflow per delegation.

A delegation is admitted, budgeted and settled in the lead's workflow code, so those
steps are replayed from history, never executed twice: the reservation is carved from the
lead's remaining budget when the model's call is handled (first come, first served among
a turn's parallel calls, exactly as in-process), the permission ceiling is checked
before the child starts, and settlement releases the reservation and adds the child's
actual usage once the child workflow returns. The child runs the subagent's loop on any
worker of the task queue.

Control: the ``interrupt`` signal stops the run at its next boundary and is forwarded to
every running child; the ``events`` query returns the encoded event log from an offset
(a child's events join its lead's log when the child settles; query the child workflow,
``<lead workflow id>/<delegation id>``, to follow it live).
"""

from __future__ import annotations

import contextlib
from typing import Any

import msgspec
from temporalio import workflow
from temporalio.exceptions import ChildWorkflowError, FailureError

from ._agent_flow import resolve_agent
from ._cancel import cancelling
from ._checkpoint import EVENTS_CARRIED_BYTES, continue_as_new_if_due, resume
from ._delegation import DelegationState, child_ids
from ._hookflow import LeadHooks, observed_hooks, tool_started
from ._human import ANSWERS_SIGNAL, QUESTION_SIGNAL, HumanInput, human_input_refusal, tell_lead
from ._loop import AgentLoop, Ids, new_id
from ._resource_flow import ResourceScope
from ._top_up import TOP_UP_REPLY_SIGNAL, TOP_UP_SIGNAL, LeadTopUp, TopUpAsk, TopUpReply, grant

with workflow.unsafe.imports_passed_through():
    from ..chat import ContentToolRequest, ContentToolResult, ToolSpec, Turn
    from ..errors import PermissionCeilingError
    from ..runtime import (
        BLANK_TASK_TEXT,
        DELEGATE_DESCRIPTION,
        DELEGATE_TOOL_NAME,
        AgentResult,
        DelegationEnd,
        DelegationStart,
        DelegationStatus,
        Event,
        HookEvent,
        OutputContract,
        Reservation,
        StopReason,
        SubagentRecord,
        decode_event,
        delegate_parameters,
        delegation_status,
        encode_event,
        exhausted,
        invalid_arguments_text,
        routing_section,
        run_limit_text,
        unknown_agent_text,
        with_output_section,
    )
    from ._ceiling import child_permissions
    from ._gate_report import TOOL_STARTED_SIGNAL, GatePassed
    from ._human_values import (
        ANSWER_UPDATE,
        PENDING_QUESTIONS_QUERY,
        AnswerDelivery,
        PendingQuestion,
    )
    from ._limits import DelegationCounts, DelegationLimits, child_seconds, out_of_time
    from ._resource_values import applies_to
    from ._slots import Slots, take_slot
    from ._values import (
        AgentSpec,
        LeadInput,
        LeadOutput,
        LoopCheckpoint,
        PermissionSpec,
        SubagentInput,
        SubagentOutput,
    )

__all__ = [
    "EVENTS_QUERY",
    "INTERRUPT_SIGNAL",
    "LEAD_PERMISSIONS_SIGNAL",
    "SET_PERMISSION_MODE_UPDATE",
    "LeadWorkflow",
    "SubagentWorkflow",
    "delegate_tool_spec",
    "routing_prompt",
]

#: Signal stopping a lead (and its running children) or one child at its next boundary.
INTERRUPT_SIGNAL = "interrupt"
#: Update narrowing a running lead's permission mode (the lead's own calls and its
#: children's, from their next tool call on).
SET_PERMISSION_MODE_UPDATE = "set_permission_mode"
#: Signal carrying the lead's current permissions to a running child.
LEAD_PERMISSIONS_SIGNAL = "lead_permissions"
#: Query returning a workflow's encoded events from an offset.
EVENTS_QUERY = "events"
#: The interrupt reason a lead's running children get when its time runs out.
TIME_UP = "time limit reached"


def delegate_tool_spec(names: tuple[str, ...]) -> ToolSpec:
    """The ``delegate_to_agent`` tool as the lead's model sees it (as in-process)."""
    return ToolSpec(DELEGATE_TOOL_NAME, DELEGATE_DESCRIPTION, delegate_parameters(names))


def routing_prompt(base: str | None, sub_agents: tuple[AgentSpec, ...]) -> str:
    """The lead's system prompt: ``base`` then the generated routing section."""
    section = routing_section((s.name, s.description) for s in sub_agents)
    return f"{base}\n\n{section}" if base else section


class _Brief(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    task: str
    constraints: tuple[str, ...] = ()
    deliverable: str | None = None
    stop_conditions: tuple[str, ...] = ()


class _FirstMessage(msgspec.Struct, frozen=True, gc=False):
    format: str
    definition_initial_prompt: str | None
    brief: _Brief


class _DelegateArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    agent_name: str
    task: str
    constraints: list[str] | None = None
    deliverable: str | None = None
    stop_conditions: list[str] | None = None


class _SetupFailure(Exception):
    """A delegation that cannot start; its message goes to the lead's model."""


FAILED = DelegationStatus.FAILED
NOT_STARTED = DelegationStatus.NOT_STARTED


async def _tell(handle: workflow.ChildWorkflowHandle[Any, Any], name: str, arg: Any) -> None:
    """Signal a running child. A child that finished before the signal reached it (its
    completion not yet seen by the lead) needs nothing, so that failure is dropped."""
    with contextlib.suppress(FailureError):
        await handle.signal(name, arg)


def _now() -> float:
    return workflow.now().timestamp()


def _encoded(events: list[Event], offset: int, base: int = 0) -> list[str]:
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"events query: offset must be a whole number >= 0, got {offset!r}")
    if offset < base:
        raise ValueError(
            f"events query: offset {offset} is before {base}, the first event this run of "
            "the chain keeps (older ones were dropped when the run continued as new)"
        )
    return [encode_event(e).decode() for e in events[offset - base :]]


@workflow.defn(name="DeputySubagent")
class SubagentWorkflow:
    """One delegation: the subagent's loop under its reserved limits."""

    def __init__(self) -> None:
        self._events: list[Event] = []
        self._interrupt: str | None = None
        self._loop: AgentLoop | None = None
        self._lead_permissions: PermissionSpec | None = None
        self._request: SubagentInput | None = None
        self._human = HumanInput(tell_lead)
        self._top_up: LeadTopUp | None = None

    @workflow.run
    async def run(self, request: SubagentInput) -> SubagentOutput:
        """Run the subagent's loop on the delegation's first message.

        Args:
            request: The definition, its reserved limits, permissions and ids.

        Returns:
            The subagent's result and its encoded events.
        """
        request, failed = await resolve_agent(request)
        if failed is not None:
            return SubagentOutput(failed)
        spec = request.spec
        ids = Ids(
            agent_id=request.agent_id,
            agent_name=spec.name,
            run_id=request.run_id,
            delegation_id=request.delegation_id,
            parent_agent_id=request.parent_agent_id,
            parent_run_id=request.parent_run_id,
        )
        scope = ResourceScope(request)
        self._request, checkpoint = request, request.checkpoint
        self._human.allowed = request.human_input  # a lead's delegation is gated before
        if request.fair_share:
            self._top_up = LeadTopUp(request.delegation_id)

        contract = (
            None
            if spec.output_schema is None
            else OutputContract(spec.output_schema, spec.output_retries)
        )

        async def run_loop() -> AgentResult:
            loop = self._loop = AgentLoop(
                ids=ids,
                model=request.model,
                system_prompt=with_output_section(spec.system_prompt, contract),
                tools=spec.tools,
                extra_tools=scope.tool_specs,
                params=spec.params,
                limits=request.limits,
                permissions=request.permissions,
                lead_permissions=request.lead_permissions,
                events=self._events,
                # A delegation holding resources never continues as new: the new run
                # would release its leases and owned resources and bind fresh ones.
                boundary=None if request.resources else self._boundary,
                tool_runner=scope.run_tool if request.resources else None,
                skills=spec.skills,
                ask=self._human.ask,
                lead_hooks=observed_hooks(request.observers),
                observers=request.observers,
                top_up=self._top_up,
                output=contract,
            )
            turns = resume(checkpoint, loop, self._events) if checkpoint is not None else None
            if self._lead_permissions is not None:  # signalled before the loop was built
                loop.lead_permissions = self._lead_permissions
            if self._interrupt is not None:
                loop.interrupt(self._interrupt)
            return await loop.run(request.message, turns, checkpoint.requests if checkpoint else 0)

        interrupted = lambda: self._interrupt is not None  # noqa: E731
        try:
            result, cleanup_error = await scope.run(run_loop, self.interrupt, interrupted)
        except BaseException as exc:
            if cancelling(exc):
                await self.on_cancelled()
            raise
        events = tuple(encode_event(e).decode() for e in self._events)
        hook_errors = tuple(self._loop.hook_errors) if self._loop is not None else ()
        return SubagentOutput(result, events, cleanup_error, hook_errors)

    async def _boundary(self, turns: list[Turn], requests: int) -> None:
        assert self._loop is not None
        assert self._request is not None
        await continue_as_new_if_due(
            self._request,
            self._loop,
            turns,
            requests,
            events=self._events,
            previous=self._request.checkpoint,
        )

    async def on_cancelled(self) -> None:
        """Clean up after this delegation was cancelled (the hook point for cleanup
        activities, e.g. of owned resources); does nothing yet.

        Temporal delivers a workflow's cancellation once, so activities awaited here
        still run; the workflow ends ``CANCELED`` when this returns.
        """

    @workflow.signal(name=INTERRUPT_SIGNAL)
    def interrupt(self, reason: str = "interrupted") -> None:
        """Stop at the next boundary.

        Args:
            reason: Why (kept for the first interrupt only).
        """
        self._interrupt = self._interrupt or reason
        if self._loop is not None:
            self._loop.interrupt(reason)

    @workflow.signal(name=LEAD_PERMISSIONS_SIGNAL)
    def lead_permissions(self, permissions: PermissionSpec) -> None:
        """The lead's permissions changed: check the next tool calls against these.

        Args:
            permissions: The lead's current permissions.
        """
        self._lead_permissions = permissions
        if self._loop is not None:
            self._loop.lead_permissions = permissions

    @workflow.signal(name=ANSWERS_SIGNAL)
    def answers(self, delivery: AnswerDelivery) -> None:
        """The lead took answers to one of this delegation's questions.

        Args:
            delivery: The question's id and the answers as the model receives them.
        """
        self._human.deliver(delivery)

    @workflow.signal(name=TOOL_STARTED_SIGNAL)
    def tool_started(self, passed: GatePassed) -> None:
        """A tool activity passed its gate: log the gate's events and ``tool_start`` now.

        Args:
            passed: The call's id and what its gate did.
        """
        tool_started(self._loop, passed)

    @workflow.signal(name=TOP_UP_REPLY_SIGNAL)
    def top_up_reply(self, reply: TopUpReply) -> None:
        """The lead's answer to this delegation's ask for more budget (see ``_top_up``).

        Args:
            reply: The ask's number and the field's new limit, if any was granted.
        """
        if self._top_up is not None:
            self._top_up.reply(reply)

    @workflow.query(name=EVENTS_QUERY)
    def events(self, offset: int = 0) -> list[str]:
        """The encoded events from ``offset`` on.

        Args:
            offset: How many events the caller has already seen.

        Returns:
            Each event as JSON text (``encode_event``), in order.
        """
        return _encoded(self._events, offset)


@workflow.defn(name="DeputyLead")
class LeadWorkflow:
    """A lead run; every ``delegate_to_agent`` call becomes a :class:`SubagentWorkflow`."""

    def __init__(self) -> None:
        self._events: list[Event] = []
        self._interrupt: str | None = None
        self._loop: AgentLoop | None = None
        self._request: LeadInput | None = None
        self._permissions: PermissionSpec | None = None  # the lead's current permissions
        self._specs: dict[str, AgentSpec] = {}
        self._delegations: list[DelegationState] = []
        self._children: dict[str, workflow.ChildWorkflowHandle[Any, Any]] = {}
        # Running delegations' reservations, by delegation id: what a top-up draws on.
        self._reservations: dict[str, Reservation] = {}
        self._carried: LoopCheckpoint | None = None  # from the previous run of the chain
        self._slots = Slots(None)
        self._counts = DelegationCounts(DelegationLimits(), (), ())
        self._human = HumanInput()  # the run's questions: the lead's and its children's

    @workflow.run
    async def run(self, request: LeadInput) -> LeadOutput:
        """Run the lead's loop; each delegation becomes a child workflow.

        Args:
            request: The task, model, definitions, limits and permissions.

        Returns:
            The lead's result, one record per admitted delegation and their results.
        """
        self._request = request
        self._permissions = request.permissions
        self._specs = {s.name: s for s in request.sub_agents}
        self._slots = Slots(request.max_active_delegations)
        names = tuple(self._specs)
        checkpoint = request.checkpoint
        carried = checkpoint.subagents if checkpoint else ()
        self._counts = DelegationCounts(request.delegation, carried, names)
        if checkpoint is None:
            ids = Ids(agent_id=new_id("agent"), agent_name=request.name, run_id=new_id("run"))
        else:
            ids = Ids(
                agent_id=checkpoint.agent_id, agent_name=request.name, run_id=checkpoint.run_id
            )
        loop = self._loop = AgentLoop(
            ids=ids,
            model=request.model,
            system_prompt=routing_prompt(request.system_prompt, request.sub_agents),
            tools=request.tools,
            extra_tools=(delegate_tool_spec(names),),
            params=request.params,
            limits=request.limits,
            permissions=request.permissions,
            events=self._events,
            delegate=self._delegate,
            boundary=self._boundary,
            lead_hooks=LeadHooks(request.hook_events) if request.hook_events else None,
            ask=self._human.ask,
        )
        turns, self._carried = None, checkpoint
        if checkpoint is not None:
            turns = resume(checkpoint, loop, self._events)
            self._permissions = checkpoint.permissions
        if self._interrupt is not None:
            loop.interrupt(self._interrupt)
        loop.deadline.on_expiry = self._out_of_time
        try:
            result = await loop.run(request.task, turns, checkpoint.requests if checkpoint else 0)
        except BaseException as exc:
            if cancelling(exc):  # every child's cancellation settles before the run ends
                await workflow.wait_condition(lambda: not self._children)
            raise
        # Interrupt signals still forwarding to children finish before the run returns.
        await workflow.wait_condition(workflow.all_handlers_finished)
        records, results = self._settled()
        return LeadOutput(result=result, subagents=records, subagent_results=results)

    def _settled(self) -> tuple[tuple[SubagentRecord, ...], tuple[AgentResult | None, ...]]:
        """Every delegation's record and result, the earlier runs' of the chain first."""
        carried = self._carried
        return (
            (carried.subagents if carried else ()) + tuple(d.record() for d in self._delegations),
            (carried.subagent_results if carried else ())
            + tuple(d.result for d in self._delegations),
        )

    async def _boundary(self, turns: list[Turn], requests: int) -> None:
        assert self._loop is not None
        assert self._request is not None
        records, results = self._settled()
        await continue_as_new_if_due(
            self._request,
            self._loop,
            turns,
            requests,
            events=self._events,
            previous=self._carried,
            subagents=records,
            subagent_results=results,
            keep_bytes=EVENTS_CARRIED_BYTES,
        )

    @workflow.signal(name=INTERRUPT_SIGNAL)
    async def interrupt(self, reason: str = "interrupted") -> None:
        """Stop the lead and every running child at their next boundary.

        Args:
            reason: Why (kept for the first interrupt only).
        """
        self._interrupt = self._interrupt or reason
        if self._loop is not None:
            self._loop.interrupt(reason)
        for handle in tuple(self._children.values()):
            await _tell(handle, INTERRUPT_SIGNAL, reason)

    async def _out_of_time(self) -> None:
        """The run's time ran out: its running children stop at their next boundary
        (their own limits end them at the same time; this also stops a lease wait)."""
        for handle in tuple(self._children.values()):
            await _tell(handle, INTERRUPT_SIGNAL, TIME_UP)

    @workflow.update(name=SET_PERMISSION_MODE_UPDATE)
    async def set_permission_mode(self, mode: str) -> str:
        """Narrow the lead's permission mode.

        Running children check their next tool calls against it, and later delegations
        get it as their ceiling. Widening is rejected by the update's validator.

        Args:
            mode: The narrower mode.

        Returns:
            The lead's mode now.
        """
        current = self._current_permissions()
        narrowed = current.checkable().narrow(mode)
        self._permissions = msgspec.structs.replace(current, mode=narrowed.mode)
        if self._loop is not None:
            self._loop.permissions = self._permissions
        for handle in tuple(self._children.values()):
            await _tell(handle, LEAD_PERMISSIONS_SIGNAL, self._permissions)
        return self._permissions.mode

    @set_permission_mode.validator
    def _check_permission_mode(self, mode: str) -> None:
        # Raises PermissionModeWideningError (or PermissionsError for an unknown mode),
        # which rejects the update before it is written to the history.
        self._current_permissions().checkable().narrow(mode)

    def _current_permissions(self) -> PermissionSpec:
        if self._permissions is not None:
            return self._permissions
        if self._request is not None:
            return self._request.permissions
        return PermissionSpec()

    @workflow.signal(name=QUESTION_SIGNAL)
    def question(self, pending: PendingQuestion) -> None:
        """A running delegation asks a person; its question is pending until answered.

        Args:
            pending: The question, with the ids of the agent asking.
        """
        self._human.register(pending)

    @workflow.update(name=ANSWER_UPDATE)
    async def answer(self, question_id: Any, answers: Any) -> str:
        """Answer a pending question of the run (the lead's or a delegation's).

        Args:
            question_id: The ``question_id`` of its ``QuestionEvent``.
            answers: Each question's text -> a string or a list of strings.

        Returns:
            What the asking model receives: the answers as a JSON object.
        """
        pending, value = self._human.answer(question_id, answers)
        handle = self._children.get(pending.delegation_id or "")
        if handle is not None:
            await _tell(handle, ANSWERS_SIGNAL, AnswerDelivery(pending.question_id, value))
        return value

    @answer.validator
    def _check_answer(self, question_id: Any, answers: Any) -> None:
        # Raises ValueError naming the field, which rejects the update before it is
        # written to the history.
        self._human.check(question_id, answers)

    @workflow.signal(name=TOP_UP_SIGNAL)
    async def top_up(self, ask: TopUpAsk) -> None:
        """A running delegation used up its share: grant it more while the run has some.

        Args:
            ask: The delegation, the limit field and the terms of its ask.
        """
        if self._loop is not None:
            await grant(self._loop.meter, self._reservations.get(ask.delegation_id), ask)

    @workflow.query(name=PENDING_QUESTIONS_QUERY)
    def pending_questions(self) -> list[PendingQuestion]:
        """The run's questions waiting for answers, in the order they were asked.

        Returns:
            One entry per pending question.
        """
        return list(self._human.pending.values())

    @workflow.signal(name=TOOL_STARTED_SIGNAL)
    def tool_started(self, passed: GatePassed) -> None:
        """A tool activity passed its gate: log the gate's events and ``tool_start`` now.

        Args:
            passed: The call's id and what its gate did.
        """
        tool_started(self._loop, passed)

    @workflow.query(name=EVENTS_QUERY)
    def events(self, offset: int = 0) -> list[str]:
        """The encoded events from ``offset`` on (a child's join when it settles).

        Args:
            offset: How many events the caller has already seen.

        Returns:
            Each event as JSON text (``encode_event``), in order.
        """
        return _encoded(self._events, offset, self._carried.events_base if self._carried else 0)

    # -- delegations ------------------------------------------------------------------

    def _ended(self, d: DelegationState) -> None:
        """Log a settled delegation's DelegationEnd; one that never started has only it."""
        self._events.append(
            DelegationEnd(
                **d.ids.fields(),
                status=d.status,
                stop_reason=d.stop_reason or StopReason.ERROR,
                usage=d.usage,
                error=d.error,
                tool_call_id=d.tool_call_id,
            )
        )

    async def _delegate(self, call: ContentToolRequest) -> ContentToolResult:
        loop, request = self._loop, self._request
        assert loop is not None
        assert request is not None
        try:
            args = msgspec.convert(call.arguments, _DelegateArgs)
        except msgspec.ValidationError as exc:
            loop.meter.unexpect()  # refused before it could reserve, as in-process
            return ContentToolResult(call.id, error=invalid_arguments_text(exc))
        if not args.task.strip():
            loop.meter.unexpect()
            return ContentToolResult(call.id, error=BLANK_TASK_TEXT)
        over = loop.meter.exceeded(reaching=True)
        if over is not None:
            loop.meter.unexpect()
            error = run_limit_text(over)
            return ContentToolResult(call.id, error=error)
        key = args.agent_name.strip().lower()[:128]
        spec = self._specs.get(key)
        d = DelegationState(
            ids=child_ids(loop.ids, key),
            tool_call_id=call.id,
            task=args.task,
            admitted_at=_now(),
            structured=spec is not None and spec.output_schema is not None,
        )
        self._delegations.append(d)
        delegation_id = d.ids.delegation_id or ""
        spent = self._counts.take(key) if spec is not None else None
        if spent is not None:  # the agent's max_delegations: refused softly, as in-process
            loop.meter.unexpect()
            d.status, d.stop_reason, d.error = NOT_STARTED, StopReason.DELEGATION_LIMIT, spent
            d.completed_at = _now()
            self._ended(d)
            return ContentToolResult(call.id, value=d.outcome())
        # Queued behind max_active_delegations; the budget is reserved once a slot is held.
        # A queued delegation leaves the queue when the lead is interrupted or out of time.
        blocker = await take_slot(
            self._slots,
            loop.meter,
            lambda: self._interrupt is not None or loop.deadline.expired,
        )
        if blocker is not None:  # told not to start while queued, as in-process
            loop.meter.unexpect()
            d.status, d.completed_at = NOT_STARTED, _now()
            interrupted = blocker == StopReason.INTERRUPTED
            d.stop_reason = StopReason.NOT_STARTED if interrupted else blocker
            if not interrupted:
                d.error = loop.meter.shortfall(blocker)
            self._ended(d)
            if interrupted:
                return ContentToolResult(call.id, value=d.outcome())
            error = run_limit_text(blocker)
            return ContentToolResult(call.id, error=error)
        # Without slots there is no interrupt check here: the loop answers a turn's calls
        # with "interrupted" before handing them over, and nothing awaits until this point.
        reservation = loop.meter.reserve_child(spec.max_requests if spec else 0)
        seconds = child_seconds(request.delegation.max_seconds, loop.deadline.left())
        if seconds is not None:  # its own limit, tightened by the time the lead has left
            reservation.limits = msgspec.structs.replace(reservation.limits, max_seconds=seconds)
        d.limits = reservation.limits
        empty = (exhausted(d.limits) or out_of_time(d.limits)) if spec is not None else None
        if empty is not None:
            # Granted nothing to run on (running siblings hold the rest): settled before
            # anything starts or is announced, holding no budget, as in-process.
            self._slots.release()
            d.error = loop.meter.shortfall(empty)
            loop.meter.release(reservation)
            d.status, d.stop_reason, d.completed_at = NOT_STARTED, empty, _now()
            self._ended(d)
            return ContentToolResult(call.id, value=d.outcome())
        fields = d.ids.fields()
        self._events.append(
            DelegationStart(**fields, task=args.task, limits=d.limits, tool_call_id=call.id)
        )
        try:
            if spec is None:
                available = ", ".join(self._specs) or "none"
                raise _SetupFailure(unknown_agent_text(args.agent_name, available))
            child_input = self._child_input(d, spec, args, request, reservation.fair)
            d.status, d.started_at = DelegationStatus.RUNNING, _now()
            if loop.lead_hooks is not None:
                d.hook_errors += await loop.lead_hooks.subagent(
                    loop, HookEvent.SubagentStart, d.hook_fields(), status="running"
                )
            self._reservations[delegation_id] = reservation  # before its first ask
            handle = await workflow.start_child_workflow(
                SubagentWorkflow.run,
                child_input,
                id=f"{workflow.info().workflow_id}/{delegation_id}",
            )
            self._children[delegation_id] = handle
            if self._interrupt is not None:  # arrived while the child was starting
                await _tell(handle, INTERRUPT_SIGNAL, self._interrupt)
            if self._current_permissions() != child_input.lead_permissions:  # narrowed meanwhile
                await _tell(handle, LEAD_PERMISSIONS_SIGNAL, self._current_permissions())
            out: SubagentOutput = await handle
            d.result = out.result
            d.usage = out.result.usage
            d.status, d.stop_reason = (
                delegation_status(out.result.stop_reason),
                out.result.stop_reason,
            )
            d.error = out.result.error
            d.cleanup_error = out.cleanup_error
            d.hook_errors += out.hook_errors
            self._events.extend(decode_event(e) for e in out.events)
        except _SetupFailure as exc:
            d.status, d.stop_reason, d.error = FAILED, StopReason.SETUP_ERROR, str(exc)
        except ChildWorkflowError as exc:
            if cancelling(exc):
                raise
            cause = exc.cause if exc.cause is not None else exc
            d.status, d.stop_reason, d.error = FAILED, StopReason.ERROR, str(cause)
        finally:
            self._slots.release()
            self._children.pop(delegation_id, None)
            self._reservations.pop(delegation_id, None)
            self._human.forget(delegation_id)
            d.limits = reservation.limits  # with what top-ups granted, as in-process
            loop.meter.release(reservation)
            loop.meter.add_external(d.usage)
        # Not in the finally: a worker evicting the run closes this coroutine, and the
        # workflow's clock cannot be read then.
        d.completed_at = _now()
        if loop.lead_hooks is not None and d.started_at is not None:
            d.hook_errors += await loop.lead_hooks.subagent(
                loop,
                HookEvent.SubagentStop,
                d.hook_fields(),
                status=d.status,
                reason=d.stop_reason,
                result=d.result.response if d.result else None,
                error=d.error,
            )
        self._ended(d)
        if d.status == FAILED:
            error = f"Subagent '{key[:512]}' failed.\n{d.outcome()}"
            return ContentToolResult(call.id, error=error)
        return ContentToolResult(call.id, value=d.outcome())

    def _child_input(
        self,
        d: DelegationState,
        spec: AgentSpec,
        args: _DelegateArgs,
        request: LeadInput,
        fair_share: bool,
    ) -> SubagentInput:
        try:
            permissions = child_permissions(self._current_permissions(), spec)
        except PermissionCeilingError as exc:
            raise _SetupFailure(str(exc)) from exc
        refusal = human_input_refusal(spec, request.human_input)
        if refusal is not None:
            raise _SetupFailure(refusal)
        brief = _Brief(
            task=args.task,
            constraints=tuple(args.constraints or ()),
            deliverable=args.deliverable,
            stop_conditions=tuple(args.stop_conditions or ()),
        )
        message = _FirstMessage("deputy_delegation_v1", spec.initial_prompt, brief)
        assert d.limits is not None
        return SubagentInput(
            spec=spec,
            model=request.model if spec.model == "inherit" else spec.model,
            message=msgspec.json.encode(message).decode(),
            limits=d.limits,
            permissions=permissions,
            lead_permissions=self._current_permissions(),
            agent_id=d.ids.agent_id,
            run_id=d.ids.run_id,
            delegation_id=d.ids.delegation_id or "",
            parent_agent_id=d.ids.parent_agent_id or "",
            parent_run_id=d.ids.parent_run_id or "",
            continue_as_new_after=request.continue_as_new_after,
            resources=tuple(r for r in request.resources if applies_to(r, spec.name)),
            human_input=request.human_input,
            observers=request.observers,
            fair_share=fair_share,
        )
