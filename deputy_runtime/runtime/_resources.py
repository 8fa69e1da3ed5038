"""Resource modes: how a delegation gets, and gives back, what its subagent works with.

A mode is a small object behind the :class:`ResourceMode` protocol. For each delegation
the builder calls :meth:`ResourceMode.check` on the definition, then
:meth:`ResourceMode.acquire`; whatever must be given back is registered on the
delegation (:meth:`BindRequest.keep`) *before* anything can fail, and the coordinator
releases it exactly once when the delegation settles, shielded from cancellation.

* :class:`SharedResources`: the subagent gets the tool objects of its definition; their
  state is shared with every other delegation.
* :class:`ExclusiveResource`: the same, while holding a lease on a key through a
  :class:`~deputy_runtime.runtime.LeaseBackend`; a busy key fails the delegation with
  ResourceBusyError at once (default) or makes it wait.
* :class:`OwnedResources`: fresh tools per delegation from a host factory, whose cleanup
  runs exactly once whatever happens.

A policy holds a tuple of modes, so one lead can bind several named resources (each
with its own mode) to every delegation; a new mode is one new class.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeAlias, runtime_checkable

import msgspec

from ..definitions import AgentDefinition
from ..errors import DelegationBindingError
from ..tools import Tool
from ._agent import Agent
from ._events import EventSink
from ._hooks import HookEvent
from ._leases import IN_PROCESS_LEASES, Lease, LeaseBackend
from ._records import Binding, Delegation, DelegationContext, DelegationResources, error_text
from ._shared import combined_ledger, reserve_combined

__all__ = [
    "BindRequest",
    "ExclusiveResource",
    "OwnedResources",
    "ResourceFactory",
    "ResourceMode",
    "SharedResources",
]

ResourceFactory: TypeAlias = Callable[
    [Agent, AgentDefinition, DelegationContext],
    "DelegationResources | Awaitable[DelegationResources]",
]


class BindRequest:
    """One delegation asking a resource mode for its resources.

    Attributes:
        delegation: The delegation being built (its ids; ``lease`` once leased).
        definition: The subagent's definition.
        child: The subagent, built but not yet given its tools; ``None`` for modes that
            supply no tools (they bind before the subagent is built).
        skill_tools: The tools of the definition's skills.
        emit: The lead run's event sink (``None`` when nothing listens); events about
            the bound resource carry ``delegation.event_ids()``.
    """

    __slots__ = ("_context", "child", "definition", "delegation", "emit", "skill_tools")

    def __init__(
        self,
        delegation: Delegation,
        definition: AgentDefinition,
        child: Agent | None,
        skill_tools: tuple[Tool, ...],
        context: Callable[[], DelegationContext],
        emit: EventSink | None = None,
    ) -> None:
        self.delegation = delegation
        self.emit = emit
        self.definition = definition
        self.child = child
        self.skill_tools = skill_tools
        self._context = context

    def context(self) -> DelegationContext:
        """The DelegationContext for host callbacks (built on first use)."""
        return self._context()

    def keep(self, binding: Binding) -> None:
        """Register something to release when the delegation settles (exactly once)."""
        d = self.delegation
        if d.bindings is None:
            d.bindings = []
        d.bindings.append(binding)


@runtime_checkable
class ResourceMode(Protocol):
    """How a delegation binds one resource.

    Attributes:
        name: A short name for errors and :meth:`describe` (``"shared"``, ...).
        supplies_tools: ``True`` when the subagent's tools come from this mode instead
            of its definition (owned mode).
    """

    name: str
    supplies_tools: bool

    def check(self, definition: AgentDefinition) -> None:
        """Raise DelegationBindingError if ``definition`` cannot be bound this way."""
        ...

    async def acquire(self, request: BindRequest) -> tuple[Tool, ...]:
        """Bind the resource for one delegation; return the tools it supplies.

        Register anything to release with ``request.keep`` before anything can fail.
        A mode that does not supply the subagent's tools (``supplies_tools`` false) may
        still return tools: they are added to the definition's tools (MCP servers).
        """
        ...

    def describe(self) -> dict[str, Any]:
        """Plain, JSON-encodable data for manifests and logs."""
        ...


class SharedResources(msgspec.Struct, frozen=True):
    """Shared mode: the subagent gets its definition's tool objects, shared by all."""

    name = "shared"
    supplies_tools = False

    def check(self, definition: AgentDefinition) -> None:
        """Any definition can share its tools."""

    async def acquire(self, request: BindRequest) -> tuple[Tool, ...]:
        """Nothing to bind: the definition's tools are used as they are."""
        return ()

    def describe(self) -> dict[str, Any]:
        """``{"mode": "shared"}``."""
        return {"mode": self.name}


class _LeaseBinding:
    __slots__ = ("backend", "lease")

    holds = True

    def __init__(self, backend: LeaseBackend, lease: Lease) -> None:
        self.backend = backend
        self.lease = lease

    async def hold(self, on_lost: Callable[[str], None]) -> None:
        await self.backend.hold(self.lease, on_lost)

    async def release(self) -> str | None:
        try:
            await self.backend.release(self.lease)
        except Exception as exc:
            return f"lease release failed: {error_text(exc)}"
        return None


class ExclusiveResource(msgspec.Struct, frozen=True):
    """Exclusive mode: the definition's tools, used under a lease on ``key``.

    Attributes:
        key: The resource key; overlapping delegations with the same key never run at
            the same time, across every lead that shares the backend.
        wait: ``False`` (default): a busy key fails the delegation at once with
            ResourceBusyError (the lead's model sees the failure and can retry later).
            ``True``: the delegation waits, cancellably, until the key is free; its
            budget is reserved while it waits.
        backend: Where leases are kept (default: the in-process lock table). A backend
            shared between processes makes the key exclusive across them.

    Raises:
        DelegationBindingError: ``key`` is empty or ``backend`` is not a LeaseBackend.
    """

    key: str
    wait: bool = False
    backend: LeaseBackend = IN_PROCESS_LEASES

    name = "exclusive"
    supplies_tools = False

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key.strip():
            raise DelegationBindingError("Exclusive resources require a resource_key.")
        if not isinstance(self.wait, bool):
            raise DelegationBindingError(
                f"ExclusiveResource.wait must be a bool, got {self.wait!r}"
            )
        if not isinstance(self.backend, LeaseBackend):
            raise DelegationBindingError(
                "ExclusiveResource.backend must implement LeaseBackend (acquire, hold, "
                f"release), got {type(self.backend).__name__}"
            )

    def check(self, definition: AgentDefinition) -> None:
        """Any definition can use an exclusive resource."""

    async def acquire(self, request: BindRequest) -> tuple[Tool, ...]:
        """Take the lease (fail fast or wait); the delegation holds it until it settles.

        Raises:
            ResourceBusyError: The key is busy and ``wait`` is false.
        """
        d = request.delegation
        store = combined_ledger(d.ledger, self.backend) if not d.ledger_held else None
        if store is not None:
            # The lead's shared budget lives in the same store: one step takes both.
            await reserve_combined(d, store, self.key, wait=self.wait)
            return ()
        lease = await self.backend.acquire(self.key, d.delegation_id, wait=self.wait)
        request.keep(_LeaseBinding(self.backend, lease))
        d.lease = lease
        return ()

    def describe(self) -> dict[str, Any]:
        """The mode, key, waiting choice and backend type."""
        return {
            "mode": self.name,
            "key": self.key,
            "wait": self.wait,
            "backend": type(self.backend).__name__,
        }


class _Cleanup:
    __slots__ = ("cleanup",)

    holds = False

    async def hold(self, on_lost: Callable[[str], None]) -> None:
        return None

    def __init__(self, cleanup: Callable[[], Any]) -> None:
        self.cleanup = cleanup

    async def release(self) -> str | None:
        try:
            done = self.cleanup()
            if inspect.isawaitable(done):
                await done
        except Exception as exc:
            return error_text(exc)
        return None


class OwnedResources(msgspec.Struct, frozen=True):
    """Owned mode: fresh tools per delegation from ``factory``, cleaned up exactly once.

    Attributes:
        factory: ``factory(agent, definition, context)`` (sync or async) returns
            :class:`DelegationResources`; its ``cleanup`` runs once after the delegation
            settles, fails during setup, or is cancelled.

    Raises:
        DelegationBindingError: ``factory`` is not callable.
    """

    factory: ResourceFactory

    name = "owned"
    supplies_tools = True

    def __post_init__(self) -> None:
        if not callable(self.factory):
            raise DelegationBindingError(
                "Owned resources require a factory: DelegationPolicy(resources=callable)."
            )

    def check(self, definition: AgentDefinition) -> None:
        """The subagent's tools must come from the factory, not from its definition.

        Raises:
            DelegationBindingError: The definition lists tools.
        """
        if definition.tools:
            raise _tools_from_definition(definition)

    async def acquire(self, request: BindRequest) -> tuple[Tool, ...]:
        """Call the factory; its cleanup is registered before anything is validated.

        Raises:
            DelegationBindingError: The definition's skills bring tools, the factory
                returned something else than DelegationResources, or it changed or ran
                the child.
        """
        definition = request.definition
        if definition.tools or request.skill_tools:
            raise _tools_from_definition(definition)
        child = request.child
        assert child is not None  # modes that supply tools bind after the child exists
        before = (child.get_tools(), child.permissions, _hook_snapshot(child))
        made = self.factory(child, definition, request.context())
        if inspect.isawaitable(made):
            made = await made
        if not isinstance(made, DelegationResources):
            raise DelegationBindingError(
                f"The resource factory must return DelegationResources, got {type(made).__name__}."
            )
        # From here on the cleanup runs exactly once, even if what was returned is invalid.
        if made.cleanup is not None:
            request.keep(_Cleanup(made.cleanup) if callable(made.cleanup) else _Invalid())
        made.validate()
        after = (child.get_tools(), child.permissions, _hook_snapshot(child))
        if after != before or child.last_result is not None:
            raise DelegationBindingError(
                "Resource factories must return tools without changing or running the child."
            )
        return made.tools

    def describe(self) -> dict[str, Any]:
        """The mode and the factory's name."""
        return {"mode": self.name, "factory": getattr(self.factory, "__qualname__", "?")}


class _Invalid:
    """A cleanup that was not callable: nothing to run (validate() reports it)."""

    __slots__ = ()

    holds = False

    async def hold(self, on_lost: Callable[[str], None]) -> None:
        return None

    async def release(self) -> str | None:
        return None


def _tools_from_definition(definition: AgentDefinition) -> DelegationBindingError:
    return DelegationBindingError(
        f"Subagent '{definition.name}': owned mode requires tools from the resource "
        "factory, not from the definition or its skills."
    )


def _hook_snapshot(agent: Agent) -> tuple[object, ...]:
    return tuple(agent.hooks.matchers(event) for event in HookEvent)
