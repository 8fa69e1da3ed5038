"""DelegationPolicy: how a LeadAgent binds subagents to resources, people and models."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, TypeAlias

import msgspec

from ..chat import Chat
from ..definitions import AgentDefinition
from ..errors import DelegationBindingError
from ._hooks import ALWAYS_FORWARDED, NEVER_FORWARDED, HookEvent
from ._leases import LeaseBackend
from ._records import DelegationContext
from ._resources import (
    ExclusiveResource,
    OwnedResources,
    ResourceFactory,
    ResourceMode,
    SharedResources,
)

__all__ = ["ChatFactory", "DelegationPolicy", "HumanInput"]

_MAX_OBSERVERS = 64
_MODE_NAMES = ("shared", "exclusive", "owned")

HumanInput: TypeAlias = Callable[[Any, DelegationContext], Any]
ChatFactory: TypeAlias = Callable[[AgentDefinition, DelegationContext], Chat]


class DelegationPolicy(msgspec.Struct, frozen=True):
    """How a LeadAgent binds subagents to resources, people and models.

    The resources can be spelled short, as a mode name with its settings, or as mode
    objects (see :class:`ResourceMode`). ``DelegationPolicy(resource_mode="exclusive",
    resource_key="k")`` is ``DelegationPolicy(resource_modes=(ExclusiveResource("k"),))``
    and ``DelegationPolicy(resource_mode="owned", resources=f)`` is
    ``DelegationPolicy(resource_modes=(OwnedResources(f),))``.

    Attributes:
        resource_mode: ``"shared"`` (default), ``"exclusive"`` (needs ``resource_key``),
            ``"owned"`` (needs ``resources``), or one mode object.
        resource_key: The exclusive mode's key.
        resources: The owned mode's factory ``resources(agent, definition, context)``.
        human_input: ``human_input(questions, context)`` answers ``ask_user`` for
            subagents; without it a subagent with ``ask_user`` fails before it starts.
        observers: Extra hook events forwarded to the lead's hooks (PreToolUse,
            PostToolUse and PostToolUseFailure always are; PermissionRequest,
            SubagentStart and SubagentStop never).
        chat: ``chat(definition, context)`` builds each subagent's chat.
        lease_backend: Where the exclusive mode's leases are kept (default: the
            in-process table); only with ``resource_mode="exclusive"``.
        resource_modes: Several mode objects, each binding its own resource to every
            delegation (leave ``resource_mode`` at its default then). Filled from
            ``resource_mode`` when not given.
        max_seconds: Wall-clock seconds each delegation may run (its subagent's
            ``UsageLimits.max_seconds``), tightened by the time the lead's run has left.
            A delegation that runs out ends ``stopped`` with stop reason ``time_limit``;
            the lead's model gets its outcome, not an error.
        max_delegations: How many delegations the model may start per agent in one lead
            run: one number for every agent, or a mapping of agent name to number
            (agents not named are unlimited). Further calls end ``not_started`` with stop
            reason ``delegation_limit`` and an error saying the agent's budget is spent.

    Raises:
        DelegationBindingError: A setting is missing, misplaced or of the wrong type.
    """

    resource_mode: str | ResourceMode = "shared"
    resource_key: str | None = None
    resources: ResourceFactory | None = None
    human_input: HumanInput | None = None
    observers: tuple[HookEvent, ...] = ()
    chat: ChatFactory | None = None
    lease_backend: LeaseBackend | None = None
    resource_modes: tuple[ResourceMode, ...] = ()
    max_seconds: float | None = None
    max_delegations: int | Mapping[str, int] | None = None

    def __post_init__(self) -> None:
        modes = _modes(self)
        _check_seconds(self.max_seconds)
        msgspec.structs.force_setattr(
            self, "max_delegations", _delegation_caps(self.max_delegations)
        )
        for name in ("human_input", "chat"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise DelegationBindingError(f"DelegationPolicy.{name} must be callable or None")
        msgspec.structs.force_setattr(self, "observers", _observers(self.observers))
        msgspec.structs.force_setattr(self, "resource_modes", modes)

    @property
    def forwarded_events(self) -> frozenset[HookEvent]:
        """The hook events a subagent forwards to its lead's hooks."""
        return ALWAYS_FORWARDED.union(self.observers)

    def describe(self) -> list[dict[str, Any]]:
        """The resource modes as plain, JSON-encodable data."""
        return [mode.describe() for mode in self.resource_modes]

    def delegation_cap(self, agent_name: str) -> int | None:
        """How many delegations to ``agent_name`` one lead run may start (``None``: any)."""
        caps = self.max_delegations
        if caps is None or isinstance(caps, int):
            return caps
        return caps.get(agent_name)


def _check_seconds(seconds: object) -> None:
    if seconds is None:
        return
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise DelegationBindingError(
            f"DelegationPolicy.max_seconds must be a number or None, got {seconds!r}"
        )
    if not math.isfinite(seconds) or seconds <= 0:
        raise DelegationBindingError(
            f"DelegationPolicy.max_seconds must be finite and > 0, got {seconds!r}"
        )


def _delegation_caps(caps: object) -> int | Mapping[str, int] | None:
    """``max_delegations`` checked; a mapping is copied, keys trimmed and lowercased."""
    if caps is None:
        return None
    if isinstance(caps, int) and not isinstance(caps, bool):
        if caps < 0:
            raise DelegationBindingError(
                f"DelegationPolicy.max_delegations must be >= 0, got {caps}"
            )
        return caps
    if not isinstance(caps, Mapping):
        raise DelegationBindingError(
            "DelegationPolicy.max_delegations must be an int, a mapping of agent name to "
            f"int, or None, got {type(caps).__name__}"
        )
    out: dict[str, int] = {}
    for name, cap in caps.items():
        if not isinstance(name, str) or not name.strip():
            raise DelegationBindingError(
                f"DelegationPolicy.max_delegations keys must be agent names, got {name!r}"
            )
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 0:
            raise DelegationBindingError(
                f"DelegationPolicy.max_delegations[{name!r}] must be an int >= 0, got {cap!r}"
            )
        out[name.strip().lower()] = cap
    return MappingProxyType(out)


def _modes(policy: DelegationPolicy) -> tuple[ResourceMode, ...]:
    """The policy's mode objects, built from the short spelling when needed."""
    mode = policy.resource_mode
    explicit = policy.resource_modes
    if explicit:
        if isinstance(explicit, ResourceMode) or not isinstance(explicit, Iterable):
            raise DelegationBindingError(
                "DelegationPolicy.resource_modes must be a tuple of resource modes"
            )
        explicit = tuple(explicit)
        if mode != "shared" or policy.resource_key is not None or policy.resources is not None:
            raise DelegationBindingError(
                "DelegationPolicy: give resource_modes or resource_mode (with resource_key "
                "or resources), not both."
            )
        if policy.lease_backend is not None:
            raise DelegationBindingError(
                "DelegationPolicy.lease_backend belongs to the short spelling; pass "
                "ExclusiveResource(key, backend=...) in resource_modes instead."
            )
        for entry in explicit:
            if not isinstance(entry, ResourceMode):
                raise DelegationBindingError(
                    "DelegationPolicy.resource_modes entries must be resource modes "
                    f"(SharedResources, ExclusiveResource, OwnedResources), got "
                    f"{type(entry).__name__}"
                )
        return explicit
    if not isinstance(mode, str):
        if not isinstance(mode, ResourceMode):
            raise DelegationBindingError(
                "DelegationPolicy.resource_mode must be 'shared', 'exclusive', 'owned' or "
                f"a resource mode object, got {mode!r}"
            )
        if policy.resource_key is not None or policy.resources is not None:
            raise DelegationBindingError(
                "resource_key and resources belong to the short spelling; a mode object "
                "carries its own settings."
            )
        if policy.lease_backend is not None:
            raise DelegationBindingError(
                "lease_backend belongs to the short spelling; pass "
                "ExclusiveResource(key, backend=...) instead."
            )
        return (mode,)
    if mode not in _MODE_NAMES:
        raise DelegationBindingError(
            f"DelegationPolicy.resource_mode must be 'shared', 'exclusive' or 'owned', got {mode!r}"
        )
    if mode == "exclusive":
        if not isinstance(policy.resource_key, str) or not policy.resource_key.strip():
            raise DelegationBindingError("Exclusive resources require a resource_key.")
    elif policy.resource_key is not None:
        raise DelegationBindingError("resource_key is only supported in exclusive mode.")
    if mode == "owned":
        if not callable(policy.resources):
            raise DelegationBindingError(
                "Owned resources require a factory: DelegationPolicy(resources=callable)."
            )
    elif policy.resources is not None:
        raise DelegationBindingError(
            "Owned resources require a factory; other modes cannot use one."
        )
    if policy.lease_backend is not None and mode != "exclusive":
        raise DelegationBindingError("lease_backend is only supported in exclusive mode.")
    if mode == "exclusive":
        assert policy.resource_key is not None
        if policy.lease_backend is None:
            return (ExclusiveResource(policy.resource_key),)
        return (ExclusiveResource(policy.resource_key, backend=policy.lease_backend),)
    if mode == "owned":
        assert policy.resources is not None
        return (OwnedResources(policy.resources),)
    return (SharedResources(),)


def _observers(values: Iterable[HookEvent | str]) -> tuple[HookEvent, ...]:
    if isinstance(values, str):
        values = (values,)
    out: list[HookEvent] = []
    for value in values:
        try:
            event = HookEvent(value)
        except ValueError:
            raise DelegationBindingError(
                f"Unsupported child observer event {value!r}: not a HookEvent."
            ) from None
        if event in NEVER_FORWARDED:
            raise DelegationBindingError(
                f"Unsupported child observer event {event.value!r}: PermissionRequest, "
                "SubagentStart and SubagentStop are never forwarded."
            )
        if event not in out:
            out.append(event)
    if len(out) > _MAX_OBSERVERS:
        raise DelegationBindingError(f"At most {_MAX_OBSERVERS} observer events are allowed.")
    return tuple(out)
