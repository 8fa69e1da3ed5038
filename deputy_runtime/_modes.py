"""The permission modes, defined once for the runtime, the definitions and the CLI.

A leaf module: it imports nothing of the package, so ``definitions`` and ``runtime`` can
both use it without importing each other.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["PERMISSION_MODES", "PermissionMode"]


class PermissionMode(StrEnum):
    """How much an agent's tool calls may do, from the narrowest to the widest.

    ``readonly``: read-only tools. ``plan``: read-only tools plus a read-only
    ``ask_user``. ``standard``: every tool that is not destructive, writes only under the
    write root. ``full``: every tool not on the deny list. Members are their string
    values, so ``Permissions(mode="plan")`` and ``Permissions(mode=PermissionMode.PLAN)``
    are the same.
    """

    READONLY = "readonly"
    PLAN = "plan"
    STANDARD = "standard"
    FULL = "full"


#: The mode names as plain strings, narrowest first.
PERMISSION_MODES: tuple[str, ...] = tuple(mode.value for mode in PermissionMode)
