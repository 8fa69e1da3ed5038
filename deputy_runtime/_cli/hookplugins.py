"""The hooks ``--plugin`` modules give a worker: each module's ``hooks`` attribute.

A plugin's ``hooks`` is a :class:`~deputy_runtime.Hooks` registry, or a function taking no
arguments that returns one. The worker runs them all, plugin by plugin in the order the
plugins were given, each plugin's callbacks in their registration order (the first
decision wins, as for one registry).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType

from ..runtime import HookEvent, HookMatcher, Hooks
from .leadsetup import UsageError

__all__ = ["plugin_hooks"]


def plugin_hooks(modules: Sequence[ModuleType]) -> tuple[Hooks, int]:
    """The plugins' hooks merged into one registry, and how many callbacks it holds.

    Raises:
        UsageError: A plugin's ``hooks`` is not a Hooks registry (or a function returning
            one), or that function raised.
    """
    matchers: list[HookMatcher] = []
    for module in modules:
        value = getattr(module, "hooks", None)
        if value is None:
            continue
        if callable(value) and not isinstance(value, Hooks):
            try:
                value = value()
            except Exception as exc:
                raise UsageError(
                    f"plugin {module.__name__}: hooks() failed: {type(exc).__name__}: {exc}"
                ) from exc
        if not isinstance(value, Hooks):
            raise UsageError(
                f"plugin {module.__name__}: hooks must be a Hooks registry or a function "
                f"returning one, got {type(value).__name__}"
            )
        matchers.extend(m for event in HookEvent for m in value.matchers(event))
    # Registration order across events does not matter: each event has its own order.
    return Hooks(matchers), len(matchers)
