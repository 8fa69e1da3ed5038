"""Workflow code binding one delegation to its resources (deterministic; I/O by activities).

Before the subagent's loop starts, the child workflow takes its exclusive leases (in key
order, so two delegations waiting for the same two keys cannot deadlock) and keeps each
renewed by a long heartbeating "hold" activity, then creates its owned resources (each on
the worker that takes the "create" activity). Every tool call of the delegation carries
its context and fencing token, and an owned tool's call goes to the task queue of the
worker holding that resource. When that worker is lost (the call is not picked up in
time, or stops heartbeating), the delegation reclaims the dead resource from any worker,
creates a fresh one and runs the call again there: the loop continues, it does not
restart. When the loop ends, however it ends, the owned resources are cleaned up (on
their worker, or reclaimed from another one when it is gone) and the leases released.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from datetime import timedelta

import msgspec
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, TimeoutError, TimeoutType

from ._cancel import cancelling
from ._loop import CANCELLATION, HEARTBEAT_TIMEOUT, TOOL_RETRY, TOOL_TIMEOUT

with workflow.unsafe.imports_passed_through():
    from ..chat import ContentToolResult, ToolSpec, tool_error_text
    from ..runtime import AgentResult, AgentUsage, DelegationContext, StopReason
    from ._activities import NON_RETRYABLE_ERRORS, TOOL_ACTIVITY
    from ._resource_records import LeaseGrant, OwnedPlacement, OwnedResourceRecord
    from ._resource_values import ExclusiveResourceSpec, OwnedResourceSpec, ToolRoute
    from ._resource_worker import (
        LEASE_ACQUIRE_ACTIVITY,
        LEASE_HOLD_ACTIVITY,
        LEASE_RELEASE_ACTIVITY,
        OWNED_CLEANUP_ACTIVITY,
        OWNED_CREATE_ACTIVITY,
        OWNED_RECLAIM_ACTIVITY,
    )
    from ._values import SubagentInput, ToolCall, ToolReply

__all__ = ["OWNED_PICKUP_TIMEOUT", "ResourceScope"]

#: How long a call to a worker's own queue may wait to be picked up before that worker
#: counts as lost. A live worker polls its own queue all the time, so this is short.
OWNED_PICKUP_TIMEOUT = timedelta(seconds=10)
#: Heartbeat timeout of the resource activities (they heartbeat every second).
RESOURCE_HEARTBEAT_TIMEOUT = timedelta(seconds=10)
#: Heartbeat timeout of the lease-holding activity: a lost worker's hold moves to another
#: worker after this, which must be well inside the backend's lease TTL.
LEASE_HEARTBEAT_TIMEOUT = timedelta(seconds=4)
RESOURCE_TIMEOUT = timedelta(minutes=5)
#: A waiting acquire or a hold lasts as long as the delegation.
LEASE_TIMEOUT = timedelta(days=7)
#: How many times one tool call follows its owned resource to a fresh worker.
MAX_RELOCATIONS = 3
RESOURCE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_attempts=5,
    non_retryable_error_types=[
        *NON_RETRYABLE_ERRORS,
        "UnknownResourceError",
        "OwnedResourceError",
        "NoLeaseBackendError",
    ],
)
#: A call on a worker's own queue is tried once there: a lost worker is handled by
#: moving the resource, not by retrying on a queue nobody polls.
ONCE = RetryPolicy(maximum_attempts=1)

LostCallback = Callable[[str], None]


def _worker_lost(exc: ActivityError) -> bool:
    cause = exc.cause
    return isinstance(cause, TimeoutError) and cause.type in (
        TimeoutType.SCHEDULE_TO_START,
        TimeoutType.HEARTBEAT,
    )


def _reason(exc: ActivityError) -> str:
    return str(exc.cause if exc.cause is not None else exc)


class ResourceScope:
    """One delegation's resources inside its child workflow; see the module docstring."""

    def __init__(self, request: SubagentInput) -> None:
        self.request = request
        self.owned = [r for r in request.resources if isinstance(r, OwnedResourceSpec)]
        self.exclusive = sorted(
            (r for r in request.resources if isinstance(r, ExclusiveResourceSpec)),
            key=lambda r: r.key,
        )
        self.context = DelegationContext(
            delegation_id=request.delegation_id,
            agent_id=request.agent_id,
            agent_name=request.spec.name,
            run_id=request.run_id,
            parent_agent_id=request.parent_agent_id,
            parent_run_id=request.parent_run_id,
            tool_call_id=None,
            working_dir=".",
        )
        self.placements: dict[str, OwnedPlacement] = {}
        self.grants: list[LeaseGrant] = []
        self.lost: str | None = None
        self.stopped_waiting = False  # interrupted while waiting for a key
        self.errors: list[str] = []
        self._generation = 0
        self._holders: list[asyncio.Task[None]] = []
        self._lock = asyncio.Lock()

    @property
    def tool_specs(self) -> tuple[ToolSpec, ...]:
        """The owned resources' tools, as the model sees them."""
        return tuple(t for p in self.placements.values() for t in p.tools)

    async def run(
        self,
        loop: Callable[[], Awaitable[AgentResult]],
        on_lost: LostCallback,
        interrupted: Callable[[], bool],
    ) -> tuple[AgentResult, str | None]:
        """Bind, run ``loop``, release (whatever happened).

        Args:
            loop: Builds and runs the subagent's loop (after binding, so it can offer
                :attr:`tool_specs`).
            on_lost: Called when a lease is lost (it interrupts the loop).
            interrupted: Whether the delegation was interrupted (it stops a wait for a
                busy key).

        Returns:
            The loop's result (stop reason ``lease_lost`` when a lease was lost and the
            loop stopped for it; ``setup_error`` without running it when binding failed)
            and the cleanup errors, if any.
        """
        try:
            failure = await self._open(on_lost, interrupted)
            if failure is not None:
                result = self._setup_failed(failure)
            elif self.stopped_waiting:
                result = self._setup_failed(None)
            else:
                result = await loop()
                if self.lost is not None and result.stop_reason == StopReason.INTERRUPTED:
                    result = msgspec.structs.replace(
                        result, stop_reason=StopReason.LEASE_LOST, error=f"lease lost: {self.lost}"
                    )
        finally:
            await self._close()
        return result, "; ".join(self.errors) or None

    def _setup_failed(self, error: str | None) -> AgentResult:
        """The result of a delegation that never ran: ``error`` at setup, or interrupted
        (``None``) while waiting for a key."""
        r = self.request
        return AgentResult(
            response="",
            turns=(),
            usage=AgentUsage(),
            stop_reason=StopReason.SETUP_ERROR if error else StopReason.INTERRUPTED,
            agent_id=r.agent_id,
            run_id=r.run_id,
            agent_name=r.spec.name,
            delegation_id=r.delegation_id,
            parent_agent_id=r.parent_agent_id,
            parent_run_id=r.parent_run_id,
            limits=r.limits,
            error=error,
        )

    async def _open(self, on_lost: LostCallback, interrupted: Callable[[], bool]) -> str | None:
        for spec in self.exclusive:
            acquiring = workflow.start_activity(
                LEASE_ACQUIRE_ACTIVITY,
                args=[spec.key, self.request.delegation_id, spec.wait],
                result_type=LeaseGrant,
                start_to_close_timeout=LEASE_TIMEOUT,
                heartbeat_timeout=RESOURCE_HEARTBEAT_TIMEOUT,
                retry_policy=RESOURCE_RETRY,
            )
            await workflow.wait_condition(lambda a=acquiring: a.done() or interrupted())  # type: ignore[misc]
            if not acquiring.done():
                # Interrupted while waiting for the key: stop waiting. A grant that
                # raced the cancellation is never held, so it expires after its TTL.
                acquiring.cancel()
                with contextlib.suppress(ActivityError, asyncio.CancelledError):
                    await acquiring
                self.stopped_waiting = True
                return None
            try:
                grant: LeaseGrant = acquiring.result()
            except ActivityError as exc:
                return f"exclusive resource {spec.key!r}: {_reason(exc)}"
            if grant.busy is not None:
                return grant.busy
            self.grants.append(grant)
            if self.context.lease_token is None:
                self.context = msgspec.structs.replace(self.context, lease_token=grant.token)
            self._holders.append(asyncio.create_task(self._hold(grant, on_lost)))
        for owned in self.owned:
            try:
                self.placements[owned.name] = await self._create(owned.name)
            except ActivityError as exc:
                return _reason(exc)
        return None

    async def _hold(self, grant: LeaseGrant, on_lost: LostCallback) -> None:
        try:
            reason: str = await workflow.execute_activity(
                LEASE_HOLD_ACTIVITY,
                grant,
                result_type=str,
                # The release waits until the hold has stopped renewing.
                cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                start_to_close_timeout=LEASE_TIMEOUT,
                heartbeat_timeout=LEASE_HEARTBEAT_TIMEOUT,
                retry_policy=RESOURCE_RETRY,
            )
        except ActivityError as exc:
            reason = _reason(exc)
        self.lost = self.lost or reason
        on_lost(f"lease_lost: {reason}")

    async def _create(self, name: str) -> OwnedPlacement:
        self._generation += 1
        record = OwnedResourceRecord(
            name=name,
            resource_id=f"{self.request.delegation_id}/{name}/{self._generation}",
            spec=self.request.spec,
            context=self.context,
        )
        placement: OwnedPlacement = await workflow.execute_activity(
            OWNED_CREATE_ACTIVITY,
            record,
            result_type=OwnedPlacement,
            start_to_close_timeout=RESOURCE_TIMEOUT,
            heartbeat_timeout=RESOURCE_HEARTBEAT_TIMEOUT,
            retry_policy=RESOURCE_RETRY,
        )
        return placement

    async def _reclaim(self, record: OwnedResourceRecord) -> None:
        error: str | None = await workflow.execute_activity(
            OWNED_RECLAIM_ACTIVITY,
            record,
            start_to_close_timeout=RESOURCE_TIMEOUT,
            heartbeat_timeout=RESOURCE_HEARTBEAT_TIMEOUT,
            retry_policy=RESOURCE_RETRY,
        )
        if error is not None:
            self.errors.append(f"{record.name}: reclaim failed: {error}")

    async def _cleanup(self, placement: OwnedPlacement) -> None:
        try:
            error: str | None = await workflow.execute_activity(
                OWNED_CLEANUP_ACTIVITY,
                placement.record,
                task_queue=placement.queue,
                schedule_to_start_timeout=OWNED_PICKUP_TIMEOUT,
                start_to_close_timeout=RESOURCE_TIMEOUT,
                heartbeat_timeout=RESOURCE_HEARTBEAT_TIMEOUT,
                retry_policy=ONCE,
            )
        except ActivityError:
            # Its worker is gone (or the cleanup's own attempt was lost): reclaim it.
            await self._reclaim(placement.record)
            return
        if error is not None:
            self.errors.append(f"{placement.record.name}: {error}")

    async def _close(self) -> None:
        for task in self._holders:
            task.cancel()
        for task in self._holders:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for placement in tuple(self.placements.values()):
            try:
                await self._cleanup(placement)
            except ActivityError as exc:
                self.errors.append(f"{placement.record.name}: {_reason(exc)}")
        for grant in self.grants:
            try:
                await workflow.execute_activity(
                    LEASE_RELEASE_ACTIVITY,
                    grant,
                    start_to_close_timeout=RESOURCE_TIMEOUT,
                    retry_policy=RESOURCE_RETRY,
                )
            except ActivityError as exc:
                # The lease expires after the backend's TTL anyway.
                self.errors.append(f"lease {grant.key!r}: release failed: {_reason(exc)}")

    # -- tool calls -------------------------------------------------------------------

    def _owner(self, name: str) -> OwnedPlacement | None:
        for placement in self.placements.values():
            if any(t.name == name for t in placement.tools):
                return placement
        return None

    async def run_tool(self, call: ToolCall) -> ToolReply:
        """Run ``call`` where its tool lives, with the delegation's context attached."""
        for attempt in range(MAX_RELOCATIONS + 1):
            placement = self._owner(call.name)
            route = ToolRoute(
                context=self.context,
                resource_ids=tuple(p.record.resource_id for p in self.placements.values()),
            )
            offered = (*call.offered, *(t.name for t in self.tool_specs))
            routed = msgspec.structs.replace(call, route=route, offered=offered)
            try:
                if placement is None:
                    reply: ToolReply = await workflow.execute_activity(
                        TOOL_ACTIVITY,
                        routed,
                        result_type=ToolReply,
                        start_to_close_timeout=TOOL_TIMEOUT,
                        heartbeat_timeout=HEARTBEAT_TIMEOUT,
                        retry_policy=TOOL_RETRY,
                        cancellation_type=CANCELLATION,
                    )
                    return reply
                reply = await workflow.execute_activity(
                    TOOL_ACTIVITY,
                    routed,
                    result_type=ToolReply,
                    task_queue=placement.queue,
                    schedule_to_start_timeout=OWNED_PICKUP_TIMEOUT,
                    start_to_close_timeout=TOOL_TIMEOUT,
                    heartbeat_timeout=HEARTBEAT_TIMEOUT,
                    retry_policy=ONCE,
                    cancellation_type=CANCELLATION,
                )
                return reply
            except ActivityError as exc:
                if cancelling(exc):  # the workflow's own cancellation: not a tool failure
                    raise
                if placement is None or not _worker_lost(exc) or attempt == MAX_RELOCATIONS:
                    error = tool_error_text(_reason(exc))
                    return ToolReply(ContentToolResult(call.request_id, error=error))
                try:
                    await self._relocate(placement)
                except ActivityError as again:
                    error = tool_error_text(_reason(again))
                    return ToolReply(ContentToolResult(call.request_id, error=error))
        raise AssertionError("unreachable")  # pragma: no cover

    async def _relocate(self, lost: OwnedPlacement) -> None:
        """Replace ``lost`` (its worker is gone) by a fresh resource, once for all of the
        turn's calls that noticed."""
        async with self._lock:
            name = lost.record.name
            if self.placements.get(name) is not lost:
                return  # another call of the turn moved it already
            await self._reclaim(lost.record)
            self.placements[name] = await self._create(name)
