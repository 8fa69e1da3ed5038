"""The delegation coordinator: the one owner of a lead's delegations.

It keeps the records (every admitted delegation, in admission order), the unsettled ones
(``active``), the delegation slots (``max_active_delegations``), admission, budget
reservation, the run of each subagent, and settlement: exactly once, in a ``finally``,
also under cancellation, releasing what the resource modes bound (shielded) and firing
SubagentStop. The ``delegate_to_agent`` tool (:meth:`DelegationCoordinator.delegate`) and
``parallel_delegate`` both go through it; ``LeadAgent`` is a facade over it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import anyio
import anyio.lowlevel
import msgspec

from .._tracing import STATE, Active
from ..definitions import AgentDefinition
from ._agent import run_delegated
from ._build import LeadHandle, build_subagent
from ._context import RunContext
from ._events import DelegationEnd, DelegationStart, EventSink
from ._hooks import HookEvent, HookInput
from ._records import (
    Brief,
    Delegation,
    SubagentRecord,
    check_brief,
    error_text,
    first_message,
    outcome_json,
    restored_delegation,
    status_of,
)
from ._result import AgentResult, ToolRejection
from ._shared import shared_spend, take_shared
from ._states import DelegationStatus, StopReason
from ._texts import delegation_cap_text, run_limit_text, unknown_agent_text
from ._trace import begin_delegation, end_delegation
from ._usage import Meter, UsageLimits, exhausted, tighter

__all__ = ["SHIELDED_SECONDS", "DelegationCoordinator"]

#: How long settlement waits for SubagentStop hooks and cleanup while being cancelled.
SHIELDED_SECONDS = 10.0


class DelegationCoordinator:
    """Admits, runs and settles the delegations of one lead.

    Args:
        lead: The lead whose delegations these are.
        max_active: How many of a run's delegations run at once (``None``: all).

    Attributes:
        records: Every admitted delegation, in admission order.
        active: The unsettled ones (queued or running), by delegation id.
    """

    __slots__ = (
        "active",
        "counts",
        "forwarded",
        "lead",
        "max_active",
        "records",
        "slots",
        "spans",
    )

    def __init__(self, lead: LeadHandle, *, max_active: int | None) -> None:
        self.lead = lead
        self.max_active = max_active
        self.forwarded = lead.delegation_policy.forwarded_events  # computed once, shared
        self.records: list[Delegation] = []
        self.active: dict[str, Delegation] = {}
        self.slots: tuple[str, anyio.Semaphore] | None = None
        # Delegations started per agent name in the current run (max_delegations).
        self.counts: tuple[str, dict[str, int]] | None = None
        # The open span of each traced delegation, by delegation id (empty: tracing off).
        self.spans: dict[str, Active] = {}

    # -- records and interrupts ------------------------------------------------------------

    def list_records(self) -> list[SubagentRecord]:
        """One record per admitted delegation, in admission order."""
        return [d.record() for d in self.records]

    def results(
        self, agent_name: str | None = None, delegation_id: str | None = None
    ) -> list[AgentResult | None]:
        """Subagent results in admission order, filtered by name and id."""
        key = agent_name.strip().lower() if agent_name is not None else None
        return [
            d.result
            for d in self.records
            if (key is None or d.agent_name == key)
            and (delegation_id is None or d.delegation_id == delegation_id)
        ]

    def settled_of(self, run_id: str) -> list[tuple[SubagentRecord, AgentResult | None]]:
        """The records and results of the delegations of the lead's run ``run_id``.

        Raises:
            RuntimeError: One of them has not settled (a checkpoint is taken only at a
                turn boundary, when every delegation of the turn has).
        """
        entries: list[tuple[SubagentRecord, AgentResult | None]] = []
        for d in self.records:
            if d.parent_run_id != run_id:
                continue
            if not d.settled:
                raise RuntimeError(
                    f"delegation {d.delegation_id} of run {run_id} has not settled: a run "
                    "is saved only at a turn boundary"
                )
            entries.append((d.record(), d.result))
        return entries

    def run_counts(self, run_id: str) -> dict[str, int]:
        """Delegations counted per sub-agent name in run ``run_id`` (``max_delegations``)."""
        if self.counts is None or self.counts[0] != run_id:
            return {}
        return dict(self.counts[1])

    def restore(
        self,
        run_id: str,
        entries: Sequence[tuple[SubagentRecord, AgentResult | None]],
        definitions: Mapping[str, AgentDefinition],
        counts: Mapping[str, int],
    ) -> None:
        """Put a saved run's settled delegations back: records, results and counts.

        They are never run again; the run's conversation already holds their outcomes.

        Args:
            run_id: The run being continued.
            entries: Its delegations' records and results, in admission order.
            definitions: The lead's definitions by name.
            counts: Its delegations counted per name (``max_delegations``).
        """
        for record, result in entries:
            definition = definitions.get(record.agent_name)
            self.records.append(restored_delegation(record, result, definition))
        self.counts = (run_id, dict(counts))

    def interrupt(self, delegation_id: str, reason: str = "interrupted") -> bool:
        """Stop one unsettled delegation at its next boundary (or before it starts).

        Returns:
            ``False`` when no unsettled delegation has that id.
        """
        d = self.active.get(delegation_id)
        if d is None:
            return False
        d.cancel_reason = d.cancel_reason or reason
        if d.child is not None:
            d.child.interrupt(reason)
        return True

    def interrupt_all(self, reason: str) -> None:
        """Stop every unsettled delegation at its next boundary."""
        for delegation_id in tuple(self.active):
            self.interrupt(delegation_id, reason)

    # -- admission ---------------------------------------------------------------------------

    def admit(
        self,
        definition: AgentDefinition | None,
        brief: Brief,
        *,
        parent_run_id: str | None,
        tool_call_id: str | None = None,
        delegation_id: str | None = None,
        agent_name: str | None = None,
        track: bool = True,
    ) -> Delegation:
        """Record a new, queued delegation (``track``: interruptible from now on)."""
        d = Delegation(
            definition,
            agent_name=agent_name,
            delegation_id=delegation_id,
            parent_agent_id=self.lead.agent_id,
            parent_run_id=parent_run_id,
            tool_call_id=tool_call_id,
            brief=brief,
        )
        d.ledger = self.lead.shared_budget
        self.records.append(d)
        if track:
            self.active[d.delegation_id] = d
        return d

    def blocker(self, meter: Meter) -> StopReason | None:
        """Why no further delegation may start now: an interrupt or a reached limit."""
        if self.lead.interrupt_reason is not None:
            return StopReason.INTERRUPTED
        return meter.exceeded(reaching=True)

    # -- the delegate tool ---------------------------------------------------------------------

    async def delegate(
        self,
        ctx: RunContext,
        definitions: Mapping[str, AgentDefinition],
        arguments: Mapping[str, Any],
        call_id: str,
        delegation_id: str,
    ) -> str:
        """One ``delegate_to_agent`` call: route, admit, queue, reserve, build, run, settle.

        Args:
            ctx: The lead's run.
            definitions: The lead's sub-agent definitions by name.
            arguments: The validated tool arguments.
            call_id: The tool call's id.
            delegation_id: The id minted when the call was seen.

        Returns:
            The delegation's outcome as JSON text.

        Raises:
            ToolRejection: The brief is invalid, a run limit is reached, or the
                delegation failed (the model sees the outcome in the error).
        """
        meter = ctx.meter
        try:
            brief = check_brief(arguments)
        except ToolRejection:
            meter.unexpect()  # it will never reserve: its siblings share without it
            raise
        over = meter.exceeded(reaching=True)
        if over is not None:
            meter.unexpect()
            raise _limit_reached(over)
        requested = arguments["agent_name"]
        key = requested.strip().lower()
        definition = definitions.get(key)
        d = self.admit(
            definition,
            brief,
            parent_run_id=ctx.run_id,
            tool_call_id=call_id,
            delegation_id=delegation_id,
            agent_name=key[:128],
        )
        if STATE.tracer is not None:
            self.spans[d.delegation_id] = begin_delegation(d, self._mode_names())
        policy = self.lead.delegation_policy
        if (
            policy.max_delegations is not None
            and definition is not None
            and not self._count(ctx.run_id, key)
        ):
            meter.unexpect()
            cap = policy.delegation_cap(key)
            assert cap is not None  # only a cap refuses a count
            d.error = delegation_cap_text(key, cap)
            self.never_started(d, meter, StopReason.DELEGATION_LIMIT, ctx.emit)
            return outcome_json(d)
        slots = self._slots_for(ctx.run_id)
        if slots is not None:
            # Queued until a slot is free; the budget is reserved only once it runs.
            blocker = await self._wait_for_slot(d, meter, slots, ctx.emit)
            if blocker is not None:
                if blocker.endswith("_limit"):
                    raise _limit_reached(blocker)
                return outcome_json(d)
        reservation = d.reservation = meter.reserve_child(
            definition.max_requests if definition is not None else 0
        )
        if policy.max_seconds is not None or ctx.deadline is not None:
            seconds = tighter(policy.max_seconds, ctx.seconds_left())
            reservation.limits = msgspec.structs.replace(reservation.limits, max_seconds=seconds)
        if definition is not None:
            empty = exhausted(reservation.limits)
            if empty is not None:
                # Granted nothing to run on (running delegations hold the rest of the
                # budget): settle before anything is built, announced or bound, so a
                # flood of delegations cannot make the host build resources for nothing.
                if slots is not None:
                    slots.release()
                d.error = meter.shortfall(empty)
                self.never_started(d, meter, empty, ctx.emit)
                return outcome_json(d)
        failed: BaseException | None = None
        try:
            self.announce(ctx.emit, d)
            if meter.expected:
                # Let the turn's other delegations reserve before this one runs: its
                # child could otherwise finish (and settle its usage) before they do, so
                # their shares would depend on how fast the provider answered.
                await anyio.lowlevel.checkpoint()
            try:
                if definition is None:
                    names = ", ".join(definitions) or "none"
                    raise ToolRejection(unknown_agent_text(requested, names))
                await build_subagent(
                    self.lead, d, reservation.limits, self.forwarded, emit=ctx.emit
                )
            except Exception:
                d.stop_reason = StopReason.SETUP_ERROR
                raise
            await self.start_and_run(d, ctx.emit, meter)
        except BaseException as exc:
            failed = exc
            if not isinstance(exc, Exception):
                raise
        finally:
            if slots is not None:
                slots.release()
            await self.conclude(d, meter, ctx.emit, failed)
        if d.status == DelegationStatus.FAILED:
            raise ToolRejection(f"Subagent '{d.agent_name[:512]}' failed.\n{outcome_json(d)}")
        return outcome_json(d)

    def _count(self, run_id: str, agent_name: str) -> bool:
        """Count one delegation to ``agent_name`` in this run; ``False`` if over its cap."""
        cap = self.lead.delegation_policy.delegation_cap(agent_name)
        if cap is None:
            return True
        if self.counts is None or self.counts[0] != run_id:
            self.counts = (run_id, {})
        counts = self.counts[1]
        used = counts.get(agent_name, 0)
        if used >= cap:
            return False
        counts[agent_name] = used + 1
        return True

    def _slots_for(self, run_id: str) -> anyio.Semaphore | None:
        """This run's delegation slots (``max_active``), or ``None``."""
        if self.max_active is None:
            return None
        if self.slots is None or self.slots[0] != run_id:
            self.slots = (run_id, anyio.Semaphore(self.max_active))
        return self.slots[1]

    async def _wait_for_slot(
        self, d: Delegation, meter: Meter, slots: anyio.Semaphore, emit: EventSink | None
    ) -> StopReason | None:
        """Wait ``queued`` for a slot; ``None`` once ``d`` holds one and may start.

        The lead's state may have changed while ``d`` waited, so it is checked again.
        If ``d`` must not start, the slot is given back, ``d`` is settled ``not_started``
        with nothing built, reserved or announced, and the blocker is returned:
        ``interrupted`` (the lead or this delegation was interrupted) or the stop reason
        of a run limit the lead reached meanwhile (the delegations ahead of it spent the
        budget). A cancelled wait settles ``d`` the same way and propagates.
        """
        try:
            await slots.acquire()
        except BaseException:
            meter.unexpect()
            self.never_started(d, meter, StopReason.NOT_STARTED, emit)
            raise
        reason: StopReason
        if self.lead.interrupt_reason is not None or d.cancel_reason is not None:
            blocker, reason = StopReason.INTERRUPTED, StopReason.NOT_STARTED
        else:
            over = meter.exceeded(reaching=True)
            if over is None:
                return None
            blocker = reason = over
            d.error = meter.shortfall(over)
        meter.unexpect()
        slots.release()
        self.never_started(d, meter, reason, emit)
        return blocker

    # -- running and settling ------------------------------------------------------------------

    async def prepare(self, d: Delegation) -> None:
        """Build a stateless ``parallel_delegate`` responder before anything is dispatched.

        Raises:
            Exception: Whatever building raised; ``d`` is settled as a setup failure.
        """
        try:
            await build_subagent(
                self.lead, d, UsageLimits(max_requests=0), self.forwarded, stateless=True
            )
        except BaseException as exc:
            d.stop_reason = StopReason.SETUP_ERROR
            self.settle(d, None, exc)
            raise

    async def respond(self, d: Delegation, meter: Meter, emit: EventSink | None) -> bool:
        """Run a prepared responder whose budget is reserved; settle it.

        Returns:
            ``False`` when it was stopped before its run (it stays ``not_started``): an
            interrupt or a shared budget that granted nothing, which stop the batch too.
            A responder that raised failed alone (``True``): its siblings still run.
        """
        failed: BaseException | None = None
        started = False
        self.active[d.delegation_id] = d
        if STATE.tracer is not None:
            self.spans[d.delegation_id] = begin_delegation(d, self._mode_names())
        try:
            self.announce(emit, d)
            started = await self.start_and_run(d, emit)
        except BaseException as exc:
            failed = exc
            if not isinstance(exc, Exception):
                raise
        finally:
            await self.conclude(d, meter, emit, failed)
        return started or failed is not None

    def announce(self, emit: EventSink | None, d: Delegation) -> None:
        """Emit DelegationStart (admitted, budget reserved): every started delegation's
        DelegationEnd has one; a delegation that never started has its DelegationEnd alone."""
        if emit is not None:
            emit(
                DelegationStart(
                    **d.event_ids(),
                    task=d.task,
                    limits=d.reservation.limits if d.reservation else None,
                    tool_call_id=d.tool_call_id,
                )
            )

    async def start_and_run(
        self, d: Delegation, emit: EventSink | None, meter: Meter | None = None
    ) -> bool:
        """Fire SubagentStart, then run the built subagent on its brief.

        Args:
            d: The built delegation, its budget reserved.
            emit: The lead run's event sink.
            meter: The lead's meter the delegation may top its share up from (on a
                shared ledger the ledger must grant the top-up too); ``None``: never.

        Returns:
            ``False`` when the delegation was stopped before its run (or the lead's
            shared budget granted it nothing to run on).
        """
        if d.ledger is not None and not await take_shared(d):
            return False
        if not await self._start(d):
            return False
        child = d.child
        assert child is not None
        assert d.reservation is not None
        task = first_message(d.definition, d.brief)
        reservation = d.reservation
        source = (meter, reservation) if meter is not None else None
        spend = shared_spend(d) if source is not None and d.ledger is not None else None
        run = partial(
            run_delegated,
            child,
            task,
            usage_limits=reservation.limits,
            emit=emit,
            run_id=d.run_id,
            source=source,
            spend=spend,
        )
        if d.bindings is None or not any(b.holds for b in d.bindings):
            d.result = await run()
            return True

        def lost(reason: str) -> None:
            d.lease_lost = True
            self.interrupt(d.delegation_id, f"lease_lost: {reason}")

        # A crash of the run is raised after the group, not inside it: inside, a crash
        # that meets a cancellation of the lead leaves as an exception group mixing both,
        # which the delegate tool cannot tell from a cancellation and the caller's cancel
        # scope strips down to the bare crash. After the group, a cancellation wins.
        crash: Exception | None = None
        async with anyio.create_task_group() as tg:
            for binding in d.bindings:
                if binding.holds:
                    tg.start_soon(binding.hold, lost)
            try:
                d.result = await run()
            except Exception as exc:
                crash = exc
            tg.cancel_scope.cancel()
        if crash is not None:
            raise crash
        return True

    async def _start(self, d: Delegation) -> bool:
        """Mark running and fire SubagentStart; ``False`` if it must not start after all."""
        d.status = DelegationStatus.RUNNING
        d.started_at = time.time()
        lead = self.lead
        if lead.hooks.has(HookEvent.SubagentStart):
            await lead.hooks.dispatch(
                self._hook_input(d, HookEvent.SubagentStart, status="running"),
                d.hook_errors,
            )
        return lead.interrupt_reason is None and d.cancel_reason is None

    def never_started(
        self,
        d: Delegation,
        meter: Meter,
        stop_reason: StopReason,
        emit: EventSink | None = None,
    ) -> None:
        """Settle a delegation that left the queue without starting.

        Its DelegationEnd (``not_started``, with the error saying why) is its one event:
        it never had a DelegationStart, nothing was bound and no SubagentStart fired, so
        there is no cleanup or stop hook to run, but a live view and an event log still
        see it settle.
        """
        self.active.pop(d.delegation_id, None)
        d.stop_reason = stop_reason
        self.settle(d, meter, None)
        if emit is not None:
            emit(_end_event(d))
        if self.spans:
            self._end_span(d, None)

    def settle_unstarted(self, batch: list[Delegation]) -> None:
        """Settle every delegation of ``batch`` that never ran as ``not_started``."""
        for d in batch:
            if not d.settled:
                d.settled = True
                d.status = DelegationStatus.NOT_STARTED
                d.stop_reason = StopReason.NOT_STARTED

    def settle(self, d: Delegation, meter: Meter | None, failed: BaseException | None) -> None:
        """Record the final status and usage, release the reservation; exactly once."""
        if d.settled:
            return
        d.settled = True
        d.status, d.stop_reason = status_of(d, failed)
        if failed is not None and d.error is None and d.status == DelegationStatus.FAILED:
            d.error = error_text(failed)
        child = d.child
        if d.result is not None:
            d.usage = d.result.usage
            if d.result.error and d.error is None:
                d.error = d.result.error
            d.hook_errors.extend(d.result.hook_errors)
        elif child is not None and child.last_result is not None:
            d.usage = child.last_result.usage
        if child is not None and child.governance is not None:
            d.hook_errors.extend(child.governance.hook_errors)
        d.completed_at = time.time()
        if meter is not None:
            if d.reservation is not None:
                meter.release(d.reservation)
            meter.add_external(d.usage)

    async def conclude(
        self,
        d: Delegation,
        meter: Meter,
        emit: EventSink | None,
        failed: BaseException | None,
    ) -> None:
        """Settle exactly once, release the bindings, fire SubagentStop, announce the end."""
        self.active.pop(d.delegation_id, None)
        self.settle(d, meter, failed)
        cancelled = failed is not None and isinstance(failed, anyio.get_cancelled_exc_class())
        try:
            stop_hooks = d.started_at is not None and self.lead.hooks.has(HookEvent.SubagentStop)
            if d.bindings is not None or stop_hooks:
                await self._finish_shielded(d, stop_hooks, cancelled)
            if emit is not None:
                emit(_end_event(d))
        finally:
            # The record keeps the result, not the subagent: a long-lived lead's history
            # of delegations must not keep every child's chat, tools and turns alive.
            d.child = None
            if self.spans:
                self._end_span(d, failed)

    def _mode_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.lead.delegation_policy.resource_modes)

    def _end_span(self, d: Delegation, failed: BaseException | None) -> None:
        """End ``d``'s span, if it has one (in the task that started it)."""
        active = self.spans.pop(d.delegation_id, None)
        if active is not None:
            end_delegation(active, d, failed)

    async def _finish_shielded(self, d: Delegation, stop_hooks: bool, cancelled: bool) -> None:
        # Shielded so cleanup and the stop hook run even when the delegation is being
        # cancelled; then (only then) each gets a deadline, so it cannot hang shutdown.
        deadline = SHIELDED_SECONDS if cancelled else None
        with anyio.CancelScope(shield=True):
            await self._release(d, deadline)
            if stop_hooks:
                with anyio.move_on_after(deadline) as scope:
                    await self.lead.hooks.dispatch(
                        self._hook_input(
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
                        f"SubagentStop: did not finish within {SHIELDED_SECONDS:g} s "
                        "during cancellation"
                    )

    async def _release(self, d: Delegation, deadline: float | None) -> None:
        """Release what the resource modes bound, last bound first, exactly once."""
        bindings, d.bindings = d.bindings, None
        if not bindings:
            return
        for binding in reversed(bindings):
            with anyio.move_on_after(deadline) as scope:
                error = await binding.release()
            if scope.cancelled_caught:
                error = f"cleanup did not finish within {SHIELDED_SECONDS:g} s"
            if error is not None and d.cleanup_error is None:
                d.cleanup_error = error

    def _hook_input(self, d: Delegation, event: HookEvent, **fields: Any) -> HookInput:
        """SubagentStart/SubagentStop input: the lead's context plus the delegation's."""
        lead = self.lead
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


def _end_event(d: Delegation) -> DelegationEnd:
    """A settled delegation's DelegationEnd (started or not)."""
    return DelegationEnd(
        **d.event_ids(),
        status=d.status,
        stop_reason=d.stop_reason or StopReason.ERROR,
        usage=d.usage,
        error=d.error,
        tool_call_id=d.tool_call_id,
    )


def _limit_reached(reason: str) -> ToolRejection:
    return ToolRejection(run_limit_text(reason))
