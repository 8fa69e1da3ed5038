"""``parallel_delegate`` as a workflow: a host-driven, stateless fan-out on Temporal.

The batch is dispatched by the in-process rules, in workflow code: responders in input
order, at most ``max_active`` child workflows at once, each taking its share of the batch
budget when it starts (``reserve_share``, the runtime's own rule, on the runtime's own
``Meter``), and the next one held back once an interrupt arrived or a budget field it
needs is spent (``fanout_blocker``). Each responder is one :class:`SubagentWorkflow`,
``<batch workflow id>/<delegation id>``, settled as in-process: its reservation released
and its usage added. A failed responder never discards its siblings.

Control as on the lead: the ``interrupt`` signal stops the batch (no further responder
starts, running ones are told to stop at their next boundary) and the ``events`` query
returns the batch's events from an offset (a responder's own events join when it
settles).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ChildWorkflowError, FailureError

from ._deadline import Deadline, outlive
from ._delegation import DelegationState, child_ids
from ._hookflow import batch_hooks
from ._loop import Ids, new_id
from ._workflows import EVENTS_QUERY, INTERRUPT_SIGNAL, SubagentWorkflow

with workflow.unsafe.imports_passed_through():
    from ..errors import PermissionCeilingError
    from ..runtime import (
        AgentResult,
        DelegationEnd,
        DelegationStart,
        DelegationStatus,
        Event,
        HookEvent,
        Meter,
        Reservation,
        StopReason,
        batch_reason,
        decode_event,
        delegation_status,
        encode_event,
        fanout_blocker,
        reserve_share,
        responder_requests,
    )
    from ._batch import ParallelInput, ParallelOutput, ResponderTask
    from ._ceiling import child_permissions
    from ._limits import child_seconds
    from ._resource_values import applies_to
    from ._slots import Slots
    from ._values import AgentSpec, PermissionSpec, SubagentInput, SubagentOutput

__all__ = ["ParallelDelegateWorkflow"]


class _Responder(DelegationState):
    """One responder: a delegation with its batch task and its share of the budget."""

    def __init__(self, ids: Ids, task: ResponderTask, admitted_at: float, structured: bool) -> None:
        super().__init__(ids=ids, task=task.task, admitted_at=admitted_at, structured=structured)
        self.responder = task
        self.reservation: Reservation | None = None
        self.settled = False

    def reserve(self, reservation: Reservation) -> None:
        """Hold ``reservation``; its limits are the responder's granted limits."""
        self.reservation = reservation
        self.limits = reservation.limits


def _now() -> float:
    return workflow.now().timestamp()


@workflow.defn(name="DeputyParallelDelegate")
class ParallelDelegateWorkflow:
    """One ``parallel_delegate`` batch; every responder is a :class:`SubagentWorkflow`."""

    def __init__(self) -> None:
        self._events: list[Event] = []
        self._interrupt: str | None = None
        self._children: dict[str, workflow.ChildWorkflowHandle[Any, Any]] = {}
        self._ids = Ids(agent_id="", agent_name=None, run_id="")  # the batch's own

    @workflow.run
    async def run(self, request: ParallelInput) -> ParallelOutput:
        """Dispatch the batch, ``max_active`` at a time, and settle every responder.

        Args:
            request: The responders, their definitions, the batch's limits, permissions
                and slot count.

        Returns:
            The batch as one result and each responder's record and result.
        """
        specs = {s.name: s for s in request.sub_agents}
        agent_id, run_id = new_id("agent"), new_id("run")
        self._ids = Ids(agent_id=agent_id, agent_name=request.name, run_id=run_id)
        meter = Meter(request.limits)
        admitted = _now()
        batch = [
            _Responder(
                child_ids(self._ids, task.agent_name),
                task,
                admitted,
                specs[task.agent_name].output_schema is not None,
            )
            for task in request.responders
        ]
        slots = Slots(request.max_active)
        stop: list[StopReason] = []
        running: list[asyncio.Task[None]] = []
        # The batch's max_seconds: no responder starts once it ran out, and running ones
        # end by their own limits (never later than the batch's), see ``_deadline``.
        deadline = Deadline()
        deadline.start(request.limits)
        for i, d in enumerate(batch):
            await deadline.run(slots.acquire())
            if deadline.expired:
                break
            interrupted = StopReason.INTERRUPTED if self._interrupt is not None else None
            reason = fanout_blocker(meter, interrupted or meter.exceeded(reaching=True))
            if stop or reason is not None:
                slots.release()
                if reason is not None and not stop:
                    stop.append(reason)
                break
            spec = specs[d.responder.agent_name]
            parts = min(request.max_active, len(batch) - i)
            seconds = child_seconds(request.delegation.max_seconds, deadline.left())
            requests = responder_requests(spec.output_schema is not None, spec.output_retries)
            d.reserve(reserve_share(meter, spec.max_requests, parts, seconds, requests=requests))
            running.append(asyncio.create_task(self._respond(d, spec, request, meter, slots, stop)))
        gathered = asyncio.gather(*running)
        await deadline.run(outlive(gathered))
        if deadline.expired:  # running responders stop (their own limits end them too)
            for handle in tuple(self._children.values()):
                await _tell(handle, "time limit reached")
        await gathered  # also when the time ran out before this wait began
        if deadline.expired and not stop:
            stop.append(StopReason.TIME_LIMIT)
        for d in batch:
            if not d.settled:  # never dispatched
                d.settled = True
                d.status, d.stop_reason = DelegationStatus.NOT_STARTED, StopReason.NOT_STARTED
        stop_reason = stop[0] if stop else batch_reason(d.status for d in batch)
        # Interrupt signals still forwarding to children finish before the batch returns.
        await workflow.wait_condition(workflow.all_handlers_finished)
        run = AgentResult(
            response="",
            turns=(),
            usage=meter.snapshot(),
            stop_reason=stop_reason,
            agent_id=agent_id,
            run_id=run_id,
            agent_name=request.name,
            limits=meter.limits,
            hook_errors=tuple(e for d in batch for e in d.hook_errors),  # as in-process
        )
        return ParallelOutput(
            run=run,
            subagents=tuple(d.record() for d in batch),
            results=tuple(d.result for d in batch),
        )

    async def _respond(
        self,
        d: _Responder,
        spec: AgentSpec,
        request: ParallelInput,
        meter: Meter,
        slots: Slots,
        stop: list[StopReason],
    ) -> None:
        """Announce, start and await one responder's child workflow; settle it once."""
        assert d.reservation is not None
        fields = d.ids.fields()
        delegation_id = d.ids.delegation_id or ""
        failed = False
        self._events.append(DelegationStart(**fields, task=d.task, limits=d.limits))
        d.status, d.started_at = DelegationStatus.RUNNING, _now()
        # Interrupted between its reservation and its start: it settles without running
        # and ends the batch ``interrupted``, as in-process.
        skipped = self._interrupt is not None
        try:
            if not skipped:
                permissions = child_permissions(request.permissions, spec)
                d.hook_errors += await self._hook(
                    request, HookEvent.SubagentStart, d, status="running"
                )
                handle = await workflow.start_child_workflow(
                    SubagentWorkflow.run,
                    self._child_input(d, spec, request, permissions),
                    id=f"{workflow.info().workflow_id}/{delegation_id}",
                )
                self._children[delegation_id] = handle
                if self._interrupt is not None:  # arrived while the child was starting
                    await _tell(handle, self._interrupt)
                out: SubagentOutput = await handle
                d.result, d.cleanup_error = out.result, out.cleanup_error
                d.hook_errors += out.hook_errors
                self._events.extend(decode_event(e) for e in out.events)
        except PermissionCeilingError as exc:  # the client checks this before starting
            failed = True
            d.stop_reason, d.error = StopReason.SETUP_ERROR, str(exc)
        except ChildWorkflowError as exc:
            failed = True
            cause = exc.cause if exc.cause is not None else exc
            d.stop_reason, d.error = StopReason.ERROR, str(cause)
        finally:
            self._children.pop(delegation_id, None)
            self._settle(d, meter, failed)
            slots.release()
        if not skipped:
            d.hook_errors += await self._hook(
                request,
                HookEvent.SubagentStop,
                d,
                status=d.status,
                reason=d.stop_reason,
                result=d.result.response if d.result else None,
                error=d.error,
            )
        self._events.append(
            DelegationEnd(
                **fields,
                status=d.status,
                stop_reason=d.stop_reason or StopReason.ERROR,
                usage=d.usage,
                error=d.error,
            )
        )
        if skipped and not stop:
            stop.append(StopReason.INTERRUPTED)

    async def _hook(
        self, request: ParallelInput, event: HookEvent, d: _Responder, **fields: Any
    ) -> tuple[str, ...]:
        """SubagentStart or SubagentStop for ``d``, when the batch asks for it."""
        mode = request.permissions.mode
        return await batch_hooks(
            request.hook_events, self._ids, mode, event, d.hook_fields(), **fields
        )

    @staticmethod
    def _settle(d: _Responder, meter: Meter, failed: bool) -> None:
        """Status, usage and reservation, as the in-process settlement."""
        d.settled = True
        if failed:
            d.status = DelegationStatus.FAILED
        elif d.result is None:
            d.status, d.stop_reason = DelegationStatus.NOT_STARTED, StopReason.NOT_STARTED
        else:
            d.stop_reason = d.result.stop_reason
            d.status = delegation_status(d.stop_reason)
            d.usage = d.result.usage
            d.error = d.result.error
        d.completed_at = _now()
        if d.reservation is not None:
            meter.release(d.reservation)
        meter.add_external(d.usage)

    @staticmethod
    def _child_input(
        d: _Responder, spec: AgentSpec, request: ParallelInput, permissions: PermissionSpec
    ) -> SubagentInput:
        assert d.reservation is not None
        return SubagentInput(
            spec=spec,
            model=request.model if spec.model == "inherit" else spec.model,
            message=d.responder.message,
            limits=d.reservation.limits,
            permissions=permissions,
            lead_permissions=request.permissions,
            agent_id=d.ids.agent_id,
            run_id=d.ids.run_id,
            delegation_id=d.ids.delegation_id or "",
            parent_agent_id=d.ids.parent_agent_id or "",
            parent_run_id=d.ids.parent_run_id or "",
            resources=tuple(r for r in request.resources if applies_to(r, spec.name)),
            observers=request.observers,
        )

    @workflow.signal(name=INTERRUPT_SIGNAL)
    async def interrupt(self, reason: str = "interrupted") -> None:
        """Start no further responder and stop the running ones at their next boundary.

        Args:
            reason: Why (kept for the first interrupt only).
        """
        self._interrupt = self._interrupt or reason
        for handle in tuple(self._children.values()):
            await _tell(handle, reason)

    @workflow.query(name=EVENTS_QUERY)
    def events(self, offset: int = 0) -> list[str]:
        """The batch's encoded events from ``offset`` on (a responder's join when it
        settles).

        Args:
            offset: How many events the caller has already seen.

        Returns:
            Each event as JSON text (``encode_event``), in order.
        """
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"events query: offset must be a whole number >= 0, got {offset!r}")
        return [encode_event(e).decode() for e in self._events[offset:]]


async def _tell(handle: workflow.ChildWorkflowHandle[Any, Any], reason: str) -> None:
    """Interrupt a running child; one that already finished needs nothing."""
    with contextlib.suppress(FailureError):
        await handle.signal(INTERRUPT_SIGNAL, reason)
