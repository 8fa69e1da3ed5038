"""``LeadAgent.parallel_delegate``: host-driven, stateless fan-out.

Every responder is prepared before anything is dispatched (a preparation failure raises
and dispatches nothing). Then up to ``max_active`` responders run at once; each takes its
share of the batch budget when it starts (one request; token and cost ceilings divided
among the slots that can still run together), so the batch can never exceed its limits.
The batch budget is the lead's ``usage_limits``, tightened per field by the host's
``usage_limits`` for the batch (see :func:`batch_limits`): never wider than the lead's.
A failed responder never discards its siblings.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from .._ids import new_id
from ..errors import DefinitionError, DelegationBindingError, RunActiveError
from ._delegation import (
    Brief,
    Delegation,
    build_outcome,
    build_subagent,
    new_delegation,
    settle,
)
from ._events import EventSink, GuardedSink
from ._runstate import AgentResult, raise_for_limit
from ._usage import _FIELD_NAMES, Meter, UsageLimits, _tighter

if TYPE_CHECKING:
    from ..definitions import AgentDefinition
    from ._lead import LeadAgent

__all__ = ["ParallelResult", "parallel_delegate"]


class ParallelResult(msgspec.Struct, frozen=True, kw_only=True):
    """What a fan-out returns, every list in input order.

    ``statuses``: completed, stopped, failed or not_started. ``outcomes`` are the compact
    outcomes the delegate tool would have returned. ``run`` aggregates the batch: summed
    usage and the batch stop reason (a limit or interrupt reason, else
    ``delegation_error`` if any responder failed, ``delegation_stopped`` if any did not
    complete, else ``complete``).
    """

    names: tuple[str, ...]
    results: tuple[AgentResult | None, ...]
    errors: tuple[str | None, ...]
    statuses: tuple[str, ...]
    outcomes: tuple[dict[str, Any], ...]
    delegation_ids: tuple[str, ...]
    run: AgentResult


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


def _definitions(lead: LeadAgent, pairs: list[tuple[str, str]]) -> list[AgentDefinition]:
    unknown = sorted({n for n, _ in pairs if n.strip().lower() not in lead.available_sub_agents()})
    if unknown:
        raise DefinitionError(
            f"Unknown AgentDefinitions: {', '.join(unknown)}; registered: "
            f"{', '.join(lead.available_sub_agents()) or 'none'}"
        )
    definitions = [lead.sub_agent(n) for n, _ in pairs]
    for d in definitions:
        if d.tools or d.skills or d.mcp_servers:
            raise DelegationBindingError(
                f"AgentDefinition {d.name!r} is not stateless: parallel_delegate responders "
                "may not have tools, skills or mcp_servers."
            )
    return definitions


async def parallel_delegate(
    lead: LeadAgent,
    tasks: Mapping[str, str] | Sequence[tuple[str, str]],
    *,
    max_active: int = 4,
    usage_limits: UsageLimits | None = None,
    on_event: EventSink | None = None,
) -> ParallelResult:
    """See :meth:`LeadAgent.parallel_delegate`."""
    if isinstance(max_active, bool) or not isinstance(max_active, int) or max_active < 1:
        raise ValueError(f"max_active must be a positive int, got {max_active!r}")
    pairs = _pairs(tasks)
    definitions = _definitions(lead, pairs)
    limits = batch_limits(lead.usage_limits, usage_limits)
    if lead._active:
        raise RunActiveError(f"Agent {lead.name or lead.agent_id} already has an active run")
    lead._active = True
    sink = GuardedSink(on_event) if on_event is not None else None
    run_id = new_id("run")
    meter = Meter(limits)
    batch = [
        new_delegation(lead, definition, Brief(task=task), parent_run_id=run_id, tool_call_id=None)
        for definition, (_, task) in zip(definitions, pairs, strict=True)
    ]
    lead._records.extend(batch)
    try:
        try:
            await _prepare(lead, batch)
        except BaseException:
            # Nothing was dispatched; the lead's last run says the batch failed.
            lead.last_result = _aggregate(lead, batch, meter, run_id, "error").run
            raise
        stop_reason = await _dispatch(lead, batch, meter, max_active, sink)
    finally:
        lead._active = False
        lead._interrupt_reason = None  # an interrupt ends with the batch it stopped
    result = _aggregate(lead, batch, meter, run_id, stop_reason)
    lead.last_result = result.run
    if stop_reason.endswith("_limit") and meter.limits.on_exceed == "error":
        raise_for_limit(result.run)
    if sink is not None and sink.error is not None:
        raise sink.error
    return result


def batch_limits(lead: UsageLimits, batch: UsageLimits | None) -> UsageLimits:
    """The limits a fan-out runs under: per field the tighter of the lead's and the batch's.

    ``None`` (unlimited) loses to any number, so host-given batch limits can only tighten
    the lead's, never widen them. ``on_exceed`` is the batch's when it is given.
    """
    if batch is None:
        return lead
    if not isinstance(batch, UsageLimits):
        raise TypeError(f"usage_limits must be a UsageLimits or None, got {type(batch).__name__}")
    tightest: dict[str, Any] = {
        field: _tighter(getattr(lead, field), getattr(batch, field)) for field in _FIELD_NAMES
    }
    return UsageLimits(**tightest, on_exceed=batch.on_exceed)


async def _prepare(lead: LeadAgent, batch: list[Delegation]) -> None:
    """Build every responder; on any failure nothing is dispatched and the error raises."""
    placeholder = UsageLimits(max_requests=0)
    for d in batch:
        try:
            await build_subagent(lead, d, placeholder, stateless=True)
        except BaseException as exc:
            d.stop_reason = "setup_error"
            settle(d, None, exc)
            _not_started(batch)
            raise


async def _dispatch(
    lead: LeadAgent,
    batch: list[Delegation],
    meter: Meter,
    max_active: int,
    on_event: EventSink | None,
) -> str:
    """Run the prepared responders, ``max_active`` at a time; return the stop reason."""
    slots = anyio.Semaphore(max_active)
    stop: list[str] = []

    async def respond(d: Delegation) -> None:
        failed: BaseException | None = None
        lead._running[d.delegation_id] = d
        try:
            lead._announce(on_event, d)
            if not await lead._start_and_run(d, on_event) and not stop:
                stop.append(lead._interrupt_reason or "interrupted")
        except BaseException as exc:
            failed = exc
            if not isinstance(exc, Exception):
                raise
        finally:
            await lead._conclude(d, meter, on_event, failed)
            slots.release()

    try:
        async with anyio.create_task_group() as tg:
            for i, d in enumerate(batch):
                await slots.acquire()
                reason = _dispatch_blocker(lead, meter)
                if stop or reason is not None:
                    slots.release()
                    if reason is not None and not stop:
                        stop.append(reason)
                    break
                d.reservation = _reserve_share(meter, d, parts=min(max_active, len(batch) - i))
                tg.start_soon(respond, d)
    finally:
        _not_started(batch)  # also when the host cancels the batch: nothing stays queued
    return stop[0] if stop else _batch_reason(batch)


def _not_started(batch: list[Delegation]) -> None:
    """Settle every responder that never ran as not_started."""
    for d in batch:
        if not d.settled:
            d.settled = True
            d.status = "not_started"
            d.stop_reason = "not_started"


# Budget fields a responder needs something of before it can make its one request.
_SHARED_FIELDS = (
    ("max_requests", "request_limit"),
    ("max_input_tokens", "input_token_limit"),
    ("max_output_tokens", "output_token_limit"),
    ("max_total_tokens", "total_token_limit"),
    ("max_cost_usd", "cost_limit"),
)


def _dispatch_blocker(lead: LeadAgent, meter: Meter) -> str | None:
    """Why the next responder must not start: an interrupt or an exhausted budget.

    What running responders have reserved counts too, so no responder is ever started
    with a zero share of anything it needs.
    """
    if lead._interrupt_reason is not None:
        return "interrupted"
    reached = meter.exceeded(reaching=True)
    if reached is not None:
        return reached
    for field, reason in _SHARED_FIELDS:
        remaining = meter._remaining(field)
        if remaining is not None and remaining <= 0:
            return reason
    return None


def _reserve_share(meter: Meter, d: Delegation, parts: int) -> Any:
    """One request, and a share of what is left of tokens and cost.

    Shares round up, so the first responders take the remainder and a budget smaller
    than the number of slots still lets some of them run; the meter caps each share at
    what is left, so the batch never exceeds its limits.
    """
    limits = meter.limits
    definition = d.definition
    assert definition is not None  # parallel_delegate checked every name up front
    requests = min(1, definition.max_requests if definition.max_requests is not None else 1)
    shares: dict[str, Any] = {"max_requests": requests, "max_tool_calls": 0}
    for field, _ in _SHARED_FIELDS[1:]:
        remaining = meter._remaining(field)
        if remaining is None:
            continue
        share = remaining / parts
        shares[field] = share if field == "max_cost_usd" else math.ceil(share)
    return meter.reserve_child(requests, UsageLimits(**shares, on_exceed=limits.on_exceed))


def _batch_reason(batch: list[Delegation]) -> str:
    statuses = {d.status for d in batch}
    if "failed" in statuses:
        return "delegation_error"
    if statuses - {"completed"}:
        return "delegation_stopped"
    return "complete"


def _aggregate(
    lead: LeadAgent, batch: list[Delegation], meter: Meter, run_id: str, stop_reason: str
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
    )
