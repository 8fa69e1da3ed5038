"""DelegationPolicy: how subagents get their tools, and the per-process lease table.

``shared`` hands a subagent the tool objects of its definition (their state is shared).
``exclusive`` does the same while holding a per-process lease on ``resource_key``: an
overlapping delegation with the same key fails at once with ResourceBusyError.
``owned`` builds fresh tools per delegation through ``resources(agent, definition,
context)`` and runs the returned cleanup exactly once, whatever happens.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import msgspec

from ..errors import DelegationBindingError, ResourceBusyError
from ..tools._tool import Tool
from ._hooks import NEVER_FORWARDED, HookEvent

if TYPE_CHECKING:
    from ..chat._chat import Chat
    from ..definitions import AgentDefinition
    from ._agent import Agent

__all__ = [
    "DelegationContext",
    "DelegationPolicy",
    "DelegationResources",
    "ResourceFactory",
    "acquire_lease",
    "lease_holder",
    "release_lease",
]

_MAX_OBSERVERS = 64


class DelegationContext(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """What host callbacks (resources, human_input, chat) learn about a delegation.

    ``agent_id``/``run_id`` are the subagent's; ``scope`` is the lead's
    ``delegation_scope``; ``working_dir`` is shared with the lead (not a sandbox).
    """

    delegation_id: str
    agent_id: str
    agent_name: str
    run_id: str
    parent_agent_id: str
    parent_run_id: str | None
    tool_call_id: str | None
    working_dir: str
    scope: dict[str, Any] | None = None


class DelegationResources(msgspec.Struct, frozen=True):
    """What an owned-mode factory returns: the subagent's tools and their cleanup.

    ``cleanup`` (sync or async, or ``None``) runs exactly once after the delegation
    settles, fails during setup, or is cancelled; it runs shielded from cancellation.
    """

    tools: tuple[Tool, ...] = ()
    cleanup: Callable[[], Any] | None = None

    def __post_init__(self) -> None:
        # No validation here: this runs inside the host's factory, and raising there would
        # lose the cleanup of whatever the factory opened. The runtime calls validate()
        # after it has taken the cleanup.
        if not isinstance(self.tools, tuple):
            msgspec.structs.force_setattr(self, "tools", tuple(self.tools))

    def validate(self) -> None:
        """Raise DelegationBindingError unless tools are Tools and cleanup is callable."""
        for t in self.tools:
            if not isinstance(t, Tool):
                raise DelegationBindingError(
                    f"DelegationResources.tools must contain Tool objects, got {type(t).__name__}"
                )
        if self.cleanup is not None and not callable(self.cleanup):
            raise DelegationBindingError("DelegationResources.cleanup must be callable or None")


ResourceFactory: TypeAlias = Callable[
    ["Agent", "AgentDefinition", DelegationContext],
    "DelegationResources | Awaitable[DelegationResources]",
]
HumanInput: TypeAlias = Callable[[Any, DelegationContext], Any]
ChatFactory: TypeAlias = Callable[["AgentDefinition", DelegationContext], "Chat"]


class DelegationPolicy(msgspec.Struct, frozen=True):
    """How a LeadAgent binds subagents to tools, people and models (seed 003).

    ``resource_mode``: ``"shared"`` (default), ``"exclusive"`` (needs ``resource_key``)
    or ``"owned"`` (needs ``resources``). ``human_input(questions, context)`` answers
    ``ask_user`` for subagents; without it a subagent with ``ask_user`` fails before it
    starts. ``observers``: extra hook events forwarded to the lead's hooks (PreToolUse,
    PostToolUse and PostToolUseFailure always are; PermissionRequest, SubagentStart and
    SubagentStop never). ``chat(definition, context)`` builds each subagent's chat.
    """

    resource_mode: Literal["shared", "exclusive", "owned"] = "shared"
    resource_key: str | None = None
    resources: ResourceFactory | None = None
    human_input: HumanInput | None = None
    observers: tuple[HookEvent, ...] = ()
    chat: ChatFactory | None = None

    def __post_init__(self) -> None:
        mode = self.resource_mode
        if mode not in ("shared", "exclusive", "owned"):
            raise DelegationBindingError(
                f"DelegationPolicy.resource_mode must be 'shared', 'exclusive' or 'owned', "
                f"got {mode!r}"
            )
        if mode == "exclusive":
            if not isinstance(self.resource_key, str) or not self.resource_key.strip():
                raise DelegationBindingError("Exclusive resources require a resource_key.")
        elif self.resource_key is not None:
            raise DelegationBindingError("resource_key is only supported in exclusive mode.")
        if mode == "owned":
            if not callable(self.resources):
                raise DelegationBindingError(
                    "Owned resources require a factory: DelegationPolicy(resources=callable)."
                )
        elif self.resources is not None:
            raise DelegationBindingError(
                "Owned resources require a factory; other modes cannot use one."
            )
        for name in ("human_input", "chat"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise DelegationBindingError(f"DelegationPolicy.{name} must be callable or None")
        msgspec.structs.force_setattr(self, "observers", _observers(self.observers))

    @property
    def forwarded_events(self) -> frozenset[HookEvent]:
        """The hook events a subagent forwards to its lead's hooks."""
        return frozenset(
            (HookEvent.PreToolUse, HookEvent.PostToolUse, HookEvent.PostToolUseFailure)
        ).union(self.observers)


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


# -- the per-process lease table ----------------------------------------------------------
# The one piece of global mutable state in the runtime, on purpose: an exclusive key must
# be exclusive across every lead (and every event loop thread) of the process. A
# threading.Lock guards check-and-take; nothing awaits while holding it.

_leases: dict[str, object] = {}
_leases_lock = threading.Lock()


def acquire_lease(key: str, holder: object) -> None:
    """Take the lease on ``key`` for ``holder`` or raise ResourceBusyError at once."""
    with _leases_lock:
        current = _leases.get(key)
        if current is not None:
            raise ResourceBusyError(
                f"The exclusive delegation resource {key!r} is busy: another delegation "
                "holds it. Retry after it settles, or use a different resource_key."
            )
        _leases[key] = holder


def release_lease(key: str, holder: object) -> bool:
    """Release ``key`` if ``holder`` holds it; a non-holder never frees another's lease."""
    with _leases_lock:
        if _leases.get(key) is holder:
            del _leases[key]
            return True
        return False


def lease_holder(key: str) -> object | None:
    """The current holder of ``key``'s lease, or ``None`` (for diagnostics and tests)."""
    with _leases_lock:
        return _leases.get(key)
