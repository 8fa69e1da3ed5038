"""``LeadAgent.parallel_delegate``: host-driven, stateless fan-out.

Every responder is prepared before anything is dispatched (a preparation failure raises
and dispatches nothing). Then up to ``max_active`` responders run at once; each takes its
share of the batch budget when it starts (one request, or one per allowed answer of an
output schema; token and cost ceilings divided among the slots that can still run
together), so the batch can never exceed its limits.
The batch budget is the lead's ``usage_limits``, tightened per field by the host's
``usage_limits`` for the batch (see :func:`batch_limits`): never wider than the lead's.
A failed responder never discards its siblings.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import anyio
import msgspec

from .._ids import new_id
from .._outputschema import DEFAULT_OUTPUT_RETRIES
from ..definitions import AgentDefinition
from ..errors import DefinitionError, DelegationBindingError
from ._agent import Agent, begin_batch, end_batch
from ._coordinator import DelegationCoordinator
from ._events import EventSink, GuardedSink
from ._records import Brief, Delegation, build_outcome
from ._result import AgentResult, raise_for_limit
from ._states import DelegationStatus, StopReason
from ._usage import LIMIT_FIELDS, LIMIT_STOP_REASONS, Meter, Reservation, UsageLimits, tighter

__all__ = [
    "ParallelResult",
    "batch_limits",
    "batch_reason",
    "check_batch",
    "fanout_blocker",
    "parallel_delegate",
    "reserve_share",
    "responder_requests",
]


class ParallelResult(msgspec.Struct, frozen=True, kw_only=True):
    """What a fan-out returns, every list in input order.

    Attributes:
        names: The definition names.
        results: Each responder's result (``None`` if it did not run).
        errors: Each responder's error text, if any.
        statuses: Each responder's status: completed, stopped, failed or not_started.
        outcomes: The compact outcomes the delegate tool would have returned.
        outputs: Each responder's decoded final answer when its definition has an
            ``output_schema`` and it completed (an instance of a type schema, else the
            JSON value), else ``None``.
        delegation_ids: Each responder's delegation id.
        run: The batch as one result: summed usage and the batch stop reason (a limit or
            ``interrupted``, else ``delegation_error`` if any responder failed,
            ``delegation_stopped`` if any did not complete, else ``complete``).
    """

    names: tuple[str, ...]
    results: tuple[AgentResult | None, ...]
    errors: tuple[str | None, ...]
    statuses: tuple[DelegationStatus, ...]
    outcomes: tuple[dict[str, Any], ...]
    delegation_ids: tuple[str, ...]
    run: AgentResult
    outputs: tuple[Any, ...] = ()


def _pairs(tasks: Mapping[str, str] | Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    if isinstance(tasks, Mapping):
        pairs = list(tasks.items())
    elif isinstance(tasks, str | bytes) or not isinstance(tasks, Sequence):
        raise TypeError("tasks must be a mapping name -> task or a sequence of (name, task)")
    else:
        pairs = []
        for i, item in enumerate(tasks):
            if not (isinstance(item, tuple | list) and len(item) == 2):
                raise TypeError(f"tasks[{i}] must be a (name, task) pair, got {item!r}")
            pairs.append((item[0], item[1]))
    if not pairs:
        raise ValueError("tasks must not be empty")
    for name, task in pairs:
        if not isinstance(name, str) or not isinstance(task, str) or not task.strip():
            raise TypeError(f"task for {name!r} must be a non-blank string")
    return pairs


def _definitions(
    registered: Mapping[str, AgentDefinition], pairs: list[tuple[str, str]]
) -> list[AgentDefinition]:
    unknown = sorted({n for n, _ in pairs if n.strip().lower() not in registered})
    if unknown:
        raise DefinitionError(
            f"Unknown AgentDefinitions: {', '.join(unknown)}; registered: "
            f"{', '.join(registered) or 'none'}"
        )
    definitions = [registered[n.strip().lower()] for n, _ in pairs]
    for d in definitions:
        if d.tools or d.skills or d.mcp_servers:
            raise DelegationBindingError(
                f"AgentDefinition {d.name!r} is not stateless: parallel_delegate responders "
                "may not have tools, skills or mcp_servers."
            )
    return definitions


async def parallel_delegate(
    lead: Agent,
    coordinator: DelegationCoordinator,
    registered: Mapping[str, AgentDefinition],
    tasks: Mapping[str, str] | Sequence[tuple[str, str]],
    *,
    max_active: int = 4,
    usage_limits: UsageLimits | None = None,
    on_event: EventSink | None = None,
) -> ParallelResult:
    """See :meth:`LeadAgent.parallel_delegate`."""
    pairs, definitions = check_batch(registered, tasks, max_active)
    limits = batch_limits(lead.usage_limits, usage_limits)
    begin_batch(lead)
    sink = GuardedSink(on_event) if on_event is not None else None
    run_id = new_id("run")
    meter = Meter(limits)
    batch = [
        coordinator.admit(definition, Brief(task=task), parent_run_id=run_id, track=False)
        for definition, (_, task) in zip(definitions, pairs, strict=True)
    ]
    try:
        try:
            for d in batch:
                await coordinator.prepare(d)
        except BaseException:
            # Nothing was dispatched; the lead's last run says the batch failed.
            coordinator.settle_unstarted(batch)
            lead.last_result = _aggregate(lead, batch, meter, run_id, StopReason.ERROR).run
            raise
        stop_reason = await _dispatch(coordinator, batch, meter, max_active, sink)
    finally:
        end_batch(lead)
    result = _aggregate(lead, batch, meter, run_id, stop_reason)
    lead.last_result = result.run
    if stop_reason.endswith("_limit") and meter.limits.on_exceed == "error":
        raise_for_limit(result.run)
    if sink is not None and sink.error is not None:
        raise sink.error
    return result


def check_batch(
    registered: Mapping[str, AgentDefinition],
    tasks: Mapping[str, str] | Sequence[tuple[str, str]],
    max_active: int,
) -> tuple[list[tuple[str, str]], list[AgentDefinition]]:
    """Check a fan-out before anything is prepared: its tasks, names and slot count.

    Args:
        registered: The sub-agent definitions by name.
        tasks: Definition name -> task, or ``(name, task)`` pairs.
        max_active: How many responders may run at once.

    Returns:
        The ``(name, task)`` pairs and each pair's definition, in input order.

    Raises:
        DefinitionError: A name is not in ``registered``.
        DelegationBindingError: A definition has tools, skills or mcp_servers.
        ValueError: ``tasks`` is empty or ``max_active`` is not a positive int.
        TypeError: ``tasks`` has the wrong shape.
    """
    if isinstance(max_active, bool) or not isinstance(max_active, int) or max_active < 1:
        raise ValueError(f"max_active must be a positive int, got {max_active!r}")
    pairs = _pairs(tasks)
    return pairs, _definitions(registered, pairs)


def batch_limits(lead: UsageLimits, batch: UsageLimits | None) -> UsageLimits:
    """The limits a fan-out runs under: per field the tighter of the lead's and the batch's.

    ``None`` (unlimited) loses to any number, so host-given batch limits can only tighten
    the lead's, never widen them. ``on_exceed`` is the batch's when it is given.

    Raises:
        TypeError: ``batch`` is neither a UsageLimits nor ``None``.
    """
    if batch is None:
        return lead
    if not isinstance(batch, UsageLimits):
        raise TypeError(f"usage_limits must be a UsageLimits or None, got {type(batch).__name__}")
    tightest: dict[str, Any] = {
        field: tighter(getattr(lead, field), getattr(batch, field))
        for field in (*LIMIT_FIELDS, "max_seconds")
    }
    return UsageLimits(**tightest, on_exceed=batch.on_exceed)


async def _dispatch(
    coordinator: DelegationCoordinator,
    batch: list[Delegation],
    meter: Meter,
    max_active: int,
    on_event: EventSink | None,
) -> StopReason:
    """Run the prepared responders, ``max_active`` at a time; return the stop reason."""
    slots = anyio.Semaphore(max_active)
    stop: list[StopReason] = []
    seconds = meter.limits.max_seconds
    deadline = anyio.current_time() + seconds if seconds is not None else math.inf
    per_delegation = coordinator.lead.delegation_policy.max_seconds

    async def respond(d: Delegation) -> None:
        try:
            if not await coordinator.respond(d, meter, on_event) and not stop:
                # A shared budget that granted nothing ends the batch with that limit.
                limit = d.stop_reason if d.stop_reason in _LIMIT_REASONS else None
                stop.append(limit or StopReason.INTERRUPTED)
        finally:
            slots.release()

    try:
        with anyio.CancelScope(deadline=deadline) as scope:
            async with anyio.create_task_group() as tg:
                for i, d in enumerate(batch):
                    await slots.acquire()
                    reason = fanout_blocker(meter, coordinator.blocker(meter))
                    if stop or reason is not None:
                        slots.release()
                        if reason is not None and not stop:
                            stop.append(reason)
                        break
                    parts = min(max_active, len(batch) - i)
                    left = None if seconds is None else max(0.0, deadline - anyio.current_time())
                    definition = d.definition
                    assert definition is not None  # parallel_delegate checked every name
                    d.reservation = reserve_share(
                        meter,
                        definition.max_requests,
                        parts,
                        tighter(per_delegation, left),
                        requests=responder_requests(
                            definition.output_schema is not None, definition.output_retries
                        ),
                    )
                    tg.start_soon(respond, d)
        if scope.cancelled_caught and not stop:
            stop.append(StopReason.TIME_LIMIT)
    finally:
        # Also when the host cancels the batch: nothing stays queued.
        coordinator.settle_unstarted(batch)
    return stop[0] if stop else batch_reason(d.status for d in batch)


# Budget fields a responder needs something of before it can make its one request.
_SHARED_FIELDS = tuple(pair for pair in LIMIT_STOP_REASONS if pair[0] != "max_tool_calls")


_LIMIT_REASONS = frozenset(reason for _, reason in _SHARED_FIELDS)


def fanout_blocker(meter: Meter, reached: StopReason | None) -> StopReason | None:
    """Why the next responder must not start: ``reached`` (an interrupt or a run limit
    already passed, if any), else an exhausted budget.

    What running responders have reserved counts too, so no responder is ever started
    with a zero share of anything it needs.

    Args:
        meter: The batch's meter.
        reached: The lead's own blocker (``interrupted`` or a limit), or ``None``.

    Returns:
        The stop reason the batch ends with, or ``None`` when the next may start.
    """
    if reached is not None:
        return reached
    for field, reason in _SHARED_FIELDS:
        remaining = meter.remaining(field)
        if remaining is not None and remaining <= 0:
            return reason
    return None


def responder_requests(structured: bool, retries: int | None) -> int:
    """The requests a responder is reserved: one, plus its output retries when its
    definition has an output schema (``retries`` ``None``: the default)."""
    if not structured:
        return 1
    return 1 + (DEFAULT_OUTPUT_RETRIES if retries is None else retries)


def reserve_share(
    meter: Meter,
    max_requests: int | None,
    parts: int,
    seconds: float | None = None,
    *,
    requests: int = 1,
) -> Reservation:
    """Reserve one responder's share of the batch budget: its requests (one, or one per
    allowed answer of an output schema), and a share of what is left of tokens and cost.

    Shares round up, so the first responders take the remainder and a budget smaller
    than the number of slots still lets some of them run; the meter caps each share at
    what is left, so the batch never exceeds its limits.

    Args:
        meter: The batch's meter.
        max_requests: The responder's definition's ``max_requests``.
        parts: The slots that can still run together (``min(max_active, not yet
            dispatched)``).
        seconds: The responder's time limit, if any.
        requests: The requests it may make at most (its output retries count).

    Returns:
        The reservation, held on ``meter`` until released.
    """
    limits = meter.limits
    requests = min(requests, max_requests if max_requests is not None else requests)
    shares: dict[str, Any] = {"max_requests": requests, "max_tool_calls": 0}
    for field, _ in _SHARED_FIELDS[1:]:
        remaining = meter.remaining(field)
        if remaining is None:
            continue
        share = remaining / parts
        shares[field] = share if field == "max_cost_usd" else math.ceil(share)
    if seconds is not None:
        shares["max_seconds"] = seconds
    return meter.reserve_child(requests, UsageLimits(**shares, on_exceed=limits.on_exceed))


def batch_reason(statuses: Iterable[DelegationStatus]) -> StopReason:
    """A batch's stop reason from its responders' statuses when nothing stopped it:
    ``delegation_error`` if one failed, ``delegation_stopped`` if one did not complete,
    else ``complete``."""
    seen = set(statuses)
    if DelegationStatus.FAILED in seen:
        return StopReason.DELEGATION_ERROR
    if seen - {DelegationStatus.COMPLETED}:
        return StopReason.DELEGATION_STOPPED
    return StopReason.COMPLETE


def _aggregate(
    lead: Agent, batch: list[Delegation], meter: Meter, run_id: str, stop_reason: StopReason
) -> ParallelResult:
    run = AgentResult(
        response="",
        turns=(),
        usage=meter.snapshot(),
        stop_reason=stop_reason,
        agent_id=lead.agent_id,
        run_id=run_id,
        agent_name=lead.name,
        limits=meter.limits,
        hook_errors=tuple(e for d in batch for e in d.hook_errors),
    )
    return ParallelResult(
        names=tuple(d.agent_name for d in batch),
        results=tuple(d.result for d in batch),
        errors=tuple(d.error for d in batch),
        statuses=tuple(d.status for d in batch),
        outcomes=tuple(build_outcome(d) for d in batch),
        delegation_ids=tuple(d.delegation_id for d in batch),
        run=run,
        outputs=tuple(d.output() for d in batch),
    )
