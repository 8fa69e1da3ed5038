"""The worker side of durable resource modes: owned resources and exclusive leases.

Owned resources live on one worker for as long as a delegation runs. Every worker with
owned-resource factories also serves a task queue of its own (``<task queue>/worker-<hex>``);
the delegation's "create" activity runs on the shared queue, makes the resource on
whichever worker took it and answers with that worker's own queue, and every later tool
call and the cleanup of that resource go to that queue. A worker that dies takes its
resources with it: the delegation notices (the call is not picked up in time), reclaims
the dead resource from any worker with the factory's ``reclaim`` and the recorded
description, and creates a fresh one (see ``_resource_flow``).

Exclusive leases are taken, kept and released by activities through the worker's
``lease_backend``; the fencing token reaches the delegation's tool calls as
:func:`current_delegation`'s ``lease_token``.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import timedelta
from typing import Any

import msgspec
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from ..chat import ToolSpec
from ..errors import ResourceBusyError
from ..runtime import DelegationContext, DelegationResources, Lease, LeaseBackend
from ..tools import Tool
from ._resource_records import LeaseGrant, OwnedPlacement, OwnedResourceRecord
from ._resource_values import ToolRoute

__all__ = [
    "LEASE_ACQUIRE_ACTIVITY",
    "LEASE_HOLD_ACTIVITY",
    "LEASE_RELEASE_ACTIVITY",
    "OWNED_CLEANUP_ACTIVITY",
    "OWNED_CREATE_ACTIVITY",
    "OWNED_RECLAIM_ACTIVITY",
    "OwnedResourceFactory",
    "WorkerResources",
    "current_delegation",
    "paired_worker",
]

OWNED_CREATE_ACTIVITY = "deputy_owned_create"
OWNED_CLEANUP_ACTIVITY = "deputy_owned_cleanup"
OWNED_RECLAIM_ACTIVITY = "deputy_owned_reclaim"
LEASE_ACQUIRE_ACTIVITY = "deputy_lease_acquire"
LEASE_HOLD_ACTIVITY = "deputy_lease_hold"
LEASE_RELEASE_ACTIVITY = "deputy_lease_release"
#: How often a waiting or holding activity reports that its worker is alive.
_HEARTBEAT_SECONDS = 1.0

CreateOwned = Callable[
    [OwnedResourceRecord], "DelegationResources | Awaitable[DelegationResources]"
]
ReclaimOwned = Callable[[OwnedResourceRecord], Any]

_current: ContextVar[DelegationContext | None] = ContextVar(
    "deputy_runtime_temporal_delegation", default=None
)


def current_delegation() -> DelegationContext | None:
    """The delegation whose tool call is running, inside a ``deputy_tool_call`` activity.

    Returns:
        Its context (ids, the worker's working directory and the fencing token of its
        exclusive lease, ``lease_token``), or ``None`` outside a delegation's tool call.
    """
    return _current.get()


class OwnedResourceFactory(msgspec.Struct, frozen=True):
    """A named owned resource on a worker: how to make one, and how to remove one from
    any worker.

    Attributes:
        create: ``create(record)`` (sync or async) returns
            :class:`~deputy_runtime.DelegationResources`: the delegation's tools and the
            ``cleanup`` this worker runs when the delegation ends. ``record`` is an
            :class:`OwnedResourceRecord`: the definition, the delegation's context and a
            ``resource_id`` unique to this resource.
        reclaim: ``reclaim(record)`` (sync or async) removes the resource ``record``
            describes when the worker that made it is gone, from another worker: it gets
            only the record, so ``create`` must put the resource where ``reclaim`` can
            find it from ``record`` alone (a path or name derived from ``resource_id``).
            It may be called for a resource that was never made, or already removed.

    Cleanup is at least once: ``cleanup`` and ``reclaim`` may both run for one resource,
    and either may run again after a crash, so both must be idempotent.

    Raises:
        TypeError: ``create`` or ``reclaim`` is not callable.
    """

    create: CreateOwned
    reclaim: ReclaimOwned

    def __post_init__(self) -> None:
        for field in ("create", "reclaim"):
            if not callable(getattr(self, field)):
                raise TypeError(f"OwnedResourceFactory.{field} must be callable")


class _Live:
    __slots__ = ("cleanup", "tools")

    def __init__(self, tools: dict[str, Tool], cleanup: Callable[[], Any] | None) -> None:
        self.tools = tools
        self.cleanup = cleanup


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """Call a host callable (sync or async); an async one heartbeats while it runs, so
    the workflow tells a slow factory from a lost worker."""
    done = fn(*args)
    if inspect.isawaitable(done):
        done = await _heartbeating(done)
    return done


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class WorkerResources:
    """One worker's owned-resource factories, the resources it holds now, and its lease
    backend; the activities that use them."""

    def __init__(
        self,
        owned: Mapping[str, OwnedResourceFactory] | None,
        lease_backend: LeaseBackend | None,
        working_dir: str,
    ) -> None:
        factories = dict(owned or {})
        for name, factory in factories.items():
            if not isinstance(name, str) or not name.strip():
                raise ValueError(f"owned_resources: names must be non-blank strings, got {name!r}")
            if not isinstance(factory, OwnedResourceFactory):
                raise TypeError(
                    f"owned_resources[{name!r}] must be an OwnedResourceFactory, got "
                    f"{type(factory).__name__}"
                )
        if lease_backend is not None and not isinstance(lease_backend, LeaseBackend):
            raise TypeError(
                "lease_backend must implement LeaseBackend (acquire, hold, release), got "
                f"{type(lease_backend).__name__}"
            )
        self.factories = factories
        self.lease_backend = lease_backend
        self.working_dir = working_dir
        self.queue: str | None = None
        self._live: dict[str, _Live] = {}

    def bind(self, task_queue: str) -> str:
        """Name this worker's own task queue (once), next to the shared ``task_queue``."""
        if self.queue is None:
            self.queue = f"{task_queue}/worker-{uuid.uuid4().hex}"
        return self.queue

    def shared_activities(self) -> list[Any]:
        """The activities any worker of the shared queue runs."""
        return [self.create, self.reclaim, self.acquire, self.hold, self.release]

    def tool(self, route: ToolRoute | None, name: str) -> Tool | None:
        """The owned tool ``name`` of the delegation ``route`` names, if it lives here."""
        if route is None:
            return None
        for resource_id in route.resource_ids:
            live = self._live.get(resource_id)
            if live is not None and name in live.tools:
                return live.tools[name]
        return None

    @staticmethod
    @contextmanager
    def scope(route: ToolRoute | None, working_dir: str) -> Iterator[None]:
        """Make ``route``'s delegation :func:`current_delegation` inside the block."""
        if route is None:
            yield
            return
        context = msgspec.structs.replace(route.context, working_dir=working_dir)
        token = _current.set(context)
        try:
            yield
        finally:
            _current.reset(token)

    def _factory(self, name: str) -> OwnedResourceFactory:
        factory = self.factories.get(name)
        if factory is None:
            known = ", ".join(sorted(self.factories)) or "none"
            raise ApplicationError(
                f"owned resource {name!r} is not registered on this worker (known: {known})",
                type="UnknownResourceError",
                non_retryable=True,
            )
        return factory

    # -- owned resources --------------------------------------------------------------

    @activity.defn(name=OWNED_CREATE_ACTIVITY)
    async def create(self, record: OwnedResourceRecord) -> OwnedPlacement:
        """Make the owned resource ``record`` describes on this worker.

        An earlier attempt may have made it on a worker since lost, so a retry first
        reclaims it.

        Args:
            record: The resource's recorded description.

        Returns:
            This worker's own task queue and the resource's tool specs.

        Raises:
            ApplicationError: The name is not registered, or the factory failed or
                returned something else than DelegationResources (not retried).
        """
        factory = self._factory(record.name)
        context = msgspec.structs.replace(record.context, working_dir=self.working_dir)
        record = msgspec.structs.replace(record, context=context)
        assert self.queue is not None, "deputy_worker names the worker's own queue"
        if activity.info().attempt > 1:
            await _call(factory.reclaim, record)
        try:
            made = await _call(factory.create, record)
        except Exception as exc:
            raise ApplicationError(
                f"owned resource {record.name!r}: the factory failed: {_error_text(exc)}",
                type="OwnedResourceError",
                non_retryable=True,
            ) from exc
        if not isinstance(made, DelegationResources):
            await _call(factory.reclaim, record)
            raise ApplicationError(
                f"owned resource {record.name!r}: the factory must return "
                f"DelegationResources, got {type(made).__name__}",
                type="OwnedResourceError",
                non_retryable=True,
            )
        self._live[record.resource_id] = _Live({t.name: t for t in made.tools}, made.cleanup)
        try:
            made.validate()
        except Exception as exc:
            await self._cleanup_here(record)
            raise ApplicationError(
                f"owned resource {record.name!r}: {exc}",
                type="OwnedResourceError",
                non_retryable=True,
            ) from exc
        specs = tuple(ToolSpec(t.name, t.description, t.parameters) for t in made.tools)
        return OwnedPlacement(
            record=record, queue=self.queue, worker=activity.info().task_queue, tools=specs
        )

    async def _cleanup_here(self, record: OwnedResourceRecord) -> str | None:
        live = self._live.pop(record.resource_id, None)
        if live is None or live.cleanup is None:
            return None
        try:
            await _call(live.cleanup)
        except Exception as exc:
            return _error_text(exc)
        return None

    @activity.defn(name=OWNED_CLEANUP_ACTIVITY)
    async def cleanup(self, record: OwnedResourceRecord) -> str | None:
        """Run the cleanup of a resource this worker made (on this worker's own queue).

        Args:
            record: The resource's recorded description.

        Returns:
            The cleanup's error text, or ``None``.
        """
        if record.resource_id not in self._live:
            # Not made here (or cleaned already): the factory's reclaim finds it anyway.
            return await self.reclaim(record)
        return await self._cleanup_here(record)

    @activity.defn(name=OWNED_RECLAIM_ACTIVITY)
    async def reclaim(self, record: OwnedResourceRecord) -> str | None:
        """Remove a resource whose worker is gone, from this worker, with only its record.

        Args:
            record: The resource's recorded description.

        Returns:
            The reclaim's error text, or ``None``.
        """
        if record.resource_id in self._live:
            return await self._cleanup_here(record)
        factory = self._factory(record.name)
        try:
            await _call(factory.reclaim, record)
        except Exception as exc:
            return _error_text(exc)
        return None

    # -- exclusive leases -------------------------------------------------------------

    def _backend(self) -> LeaseBackend:
        if self.lease_backend is None:
            raise ApplicationError(
                "this worker has no lease backend for exclusive resources: "
                "DeputyActivities(lease_backend=RedisLeases(...))",
                type="NoLeaseBackendError",
                non_retryable=True,
            )
        return self.lease_backend

    @activity.defn(name=LEASE_ACQUIRE_ACTIVITY)
    async def acquire(self, key: str, holder: str, wait: bool) -> LeaseGrant:
        """Take the lease on ``key`` for ``holder`` (waiting, heartbeating, if ``wait``).

        Args:
            key: The resource key.
            holder: The delegation id.
            wait: Wait for a busy key instead of answering busy.

        Returns:
            The grant, or a grant with ``busy`` set (token 0) when the key is busy.
        """
        backend = self._backend()
        try:
            lease = await _heartbeating(backend.acquire(key, holder, wait=wait))
        except ResourceBusyError as exc:
            return LeaseGrant(key=key, holder=holder, token=0, busy=str(exc))
        return LeaseGrant(key=lease.key, holder=lease.holder, token=lease.token)

    @activity.defn(name=LEASE_HOLD_ACTIVITY)
    async def hold(self, grant: LeaseGrant) -> str:
        """Keep the lease alive until cancelled; answer why when it is lost.

        Args:
            grant: The lease to keep.

        Returns:
            The reason the lease was lost.
        """
        backend = self._backend()
        lost: list[str] = []
        lease = Lease(key=grant.key, holder=grant.holder, token=grant.token)
        await _heartbeating(backend.hold(lease, lost.append))
        return lost[0] if lost else "lease hold ended"

    @activity.defn(name=LEASE_RELEASE_ACTIVITY)
    async def release(self, grant: LeaseGrant) -> None:
        """Release the lease if it is still this grant's (idempotent).

        Args:
            grant: The lease to release.
        """
        lease = Lease(key=grant.key, holder=grant.holder, token=grant.token)
        await self._backend().release(lease)


async def _heartbeating(work: Awaitable[Any]) -> Any:
    """Await ``work``, heartbeating every second, so a lost worker is noticed quickly and
    a cancellation from the workflow reaches the activity."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=_HEARTBEAT_SECONDS)
            if done:
                return task.result()
            activity.heartbeat()
    finally:
        if not task.done():
            task.cancel()


class _PairedWorker(Worker):
    """The shared-queue worker, running this worker's own-queue worker alongside."""

    def __init__(self, client: Client, *, own: Worker, **options: Any) -> None:
        super().__init__(client, **options)
        self._own = own

    async def run(self) -> None:
        """Run both workers; shutting this one down shuts down both."""
        async with self._own:
            await super().run()


def paired_worker(
    client: Client,
    resources: WorkerResources,
    own_activities: list[Any],
    **options: Any,
) -> Worker:
    """The worker for ``options`` (a ``Worker``'s keyword arguments), and, when the worker
    has owned-resource factories, a second one on its own queue running
    ``own_activities``."""
    if not resources.factories:
        return Worker(client, **options)
    own = Worker(
        client,
        task_queue=resources.bind(options["task_queue"]),
        activities=own_activities,
        interceptors=options.get("interceptors", ()),
        graceful_shutdown_timeout=options.get("graceful_shutdown_timeout", timedelta(0)),
        max_heartbeat_throttle_interval=options.get(
            "max_heartbeat_throttle_interval", timedelta(seconds=60)
        ),
    )
    return _PairedWorker(client, own=own, **options)
