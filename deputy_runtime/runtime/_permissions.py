"""Permissions: which tool calls an agent may make.

A :class:`Permissions` value decides every tool call before it runs, in this order:

1. The deny list. A denied name is refused in every mode; deny always wins.
2. The allow list, when it is not empty, is a gate: a tool not on it is refused.
   (``delegate_to_agent`` is gated too; a host that allowlists must list it.)
3. The mode rules, from the tool's annotations and name:

   * ``full`` allows everything.
   * ``standard`` allows every tool that is not ``destructive`` (a destructive tool only
     when allowlisted); ``write_file`` / ``edit_file`` only for a ``path`` inside
     ``write_root`` (the agent's working directory unless set).
   * ``plan`` is ``readonly`` plus a read-only ``ask_user``.
   * ``readonly`` allows read-only tools (``read_only`` and not ``destructive``) and
     allowlisted tools that are neither destructive nor a known write tool
     (``write_file``, ``edit_file``, ...); ``ask_user`` only when allowlisted.
   * A LeadAgent's own ``delegate_to_agent`` tool (its function is
     :func:`delegate_placeholder`) passes the mode rules in every mode: the subagent it
     starts is bounded by the permission ceiling instead (see
     :meth:`Permissions.ceiling`). A host tool that merely shares the name gets no
     exemption.

4. ``can_use_tool(tool_name, arguments, context)`` (sync or async), only in
   :meth:`Permissions.check`. It must return :class:`PermissionAllow` or
   :class:`PermissionDeny`; an exception or any other value denies the call.

Modes only ever narrow: :data:`MODE_TRANSITIONS` is the one table used both for
``agent.set_permission_mode`` (:meth:`Permissions.narrow`) and for subagent modes
(:meth:`Permissions.ceiling`). This is policy, not an OS sandbox.
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeAlias

import msgspec

from .._modes import PERMISSION_MODES, PermissionMode
from ..errors import PermissionCeilingError, PermissionModeWideningError, PermissionsError
from ..tools import Tool

__all__ = [
    "DELEGATE_TOOL_NAME",
    "KNOWN_WRITE_TOOLS",
    "MODE_TRANSITIONS",
    "PERMISSION_MODES",
    "CanUseTool",
    "PermissionAllow",
    "PermissionDeny",
    "PermissionMode",
    "PermissionResult",
    "Permissions",
    "delegate_placeholder",
    "normalize_tool_name",
]


_R, _P, _S, _F = PermissionMode  # readonly, plan, standard, full
#: Allowed target modes per current mode (``set_permission_mode`` and child modes).
MODE_TRANSITIONS: Mapping[PermissionMode, frozenset[PermissionMode]] = MappingProxyType(
    {
        _R: frozenset({_R}),
        _S: frozenset({_S, _R}),
        _P: frozenset({_P, _R}),
        _F: frozenset({_F, _S, _P, _R}),
    }
)

#: The lead's delegation tool: it passes every mode's rules (the child gets a ceiling).
DELEGATE_TOOL_NAME = "delegate_to_agent"


def delegate_placeholder(**_: Any) -> Any:
    """The function of a LeadAgent's own delegate tool; it never runs directly.

    Only a tool carrying this function gets the delegate exemption from mode rules, so a
    host tool that merely shares the name is checked like any other tool.
    """
    raise RuntimeError("delegate_to_agent only runs inside its LeadAgent's run")


ASK_USER_TOOL_NAME = "ask_user"
#: Tools that write or execute whatever their annotations say; never allowed in
#: readonly or plan mode, and write-root checked in standard mode.
KNOWN_WRITE_TOOLS = frozenset(
    {
        "write_file",
        "edit_file",
        "multi_edit",
        "notebook_edit",
        "bash",
        "kill_shell",
        "run_code",
        "install_package",
    }
)
#: Known write tools whose ``path`` argument must lie inside the write root.
_PATH_WRITE_TOOLS = frozenset({"write_file", "edit_file", "multi_edit", "notebook_edit"})

_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def normalize_tool_name(name: str) -> str:
    """Lowercase a tool name and turn runs of other characters into ``_``."""
    low = name.lower()
    if low.isidentifier() and "__" not in low:
        return low  # the common case: already a plain snake_case name
    return _NON_ALNUM.sub("_", low)


class PermissionAllow(msgspec.Struct, frozen=True, tag="allow"):
    """The call may run."""


class PermissionDeny(msgspec.Struct, frozen=True, tag="deny"):
    """The call may not run. ``reason`` goes back to the model; ``interrupt`` stops the run.

    ``final`` denials cannot be approved by a PermissionRequest hook: the deny list's,
    and those of a ``can_use_tool`` callback that failed (fail closed). A callback may
    return ``final=True`` itself.
    """

    reason: str
    interrupt: bool = False
    final: bool = False


PermissionResult: TypeAlias = PermissionAllow | PermissionDeny
_ALLOW = PermissionAllow()

#: ``can_use_tool(tool_name, arguments, context)``; may be sync or async.
CanUseTool: TypeAlias = Callable[
    [str, Mapping[str, Any], Any], "PermissionResult | Awaitable[PermissionResult]"
]


def _names(values: Iterable[str] | str, field: str) -> frozenset[str]:
    if isinstance(values, str):
        raise PermissionsError(f"Permissions.{field} must be a list of tool names, not a string")
    out = set()
    for value in values:
        if not isinstance(value, str) or not value:
            raise PermissionsError(
                f"Permissions.{field} entries must be non-empty strings, got {value!r}"
            )
        out.add(normalize_tool_name(value))
    return frozenset(out)


class Permissions(msgspec.Struct, frozen=True):
    """Immutable permission settings for one agent.

    ``allow`` / ``deny`` are tool names (normalised to lowercase). ``write_root`` bounds
    ``write_file`` / ``edit_file`` in standard mode; ``None`` means the agent's working
    directory, fixed by :meth:`bind` when the agent is built. ``working_dir`` is where
    relative paths in tool arguments resolve; ``bind`` sets it too.
    """

    mode: PermissionMode = PermissionMode.STANDARD
    allow: frozenset[str] = frozenset()
    deny: frozenset[str] = frozenset()
    can_use_tool: CanUseTool | None = None
    write_root: Path | None = None
    working_dir: Path | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODE_TRANSITIONS:
            raise PermissionsError(
                f"Permissions.mode {self.mode!r} is invalid: expected one of "
                + ", ".join(repr(m) for m in PERMISSION_MODES)
            )
        msgspec.structs.force_setattr(self, "mode", PermissionMode(self.mode))
        msgspec.structs.force_setattr(self, "allow", _names(self.allow, "allow"))
        msgspec.structs.force_setattr(self, "deny", _names(self.deny, "deny"))
        if self.can_use_tool is not None and not callable(self.can_use_tool):
            raise PermissionsError("Permissions.can_use_tool must be callable or None")
        for field in ("write_root", "working_dir"):
            value = getattr(self, field)
            if value is not None:
                if not isinstance(value, str | os.PathLike):
                    raise PermissionsError(f"Permissions.{field} must be a path or None")
                msgspec.structs.force_setattr(self, field, Path(os.path.realpath(value)))

    # -- building --------------------------------------------------------------------

    def bind(self, working_dir: str | os.PathLike[str]) -> Permissions:
        """Fix the working directory (and a default write root) when an agent is built.

        Already-set values are kept, so a subagent's ceiling keeps its lead's roots.
        """
        if self.working_dir is not None and self.write_root is not None:
            return self
        wd = self.working_dir or Path(os.path.realpath(working_dir))
        return msgspec.structs.replace(self, working_dir=wd, write_root=self.write_root or wd)

    def narrow(self, mode: str) -> Permissions:
        """The same permissions in a narrower ``mode``; widening raises.

        Same mode returns ``self``. Allowed targets come from :data:`MODE_TRANSITIONS`;
        any other known mode raises :class:`PermissionModeWideningError` naming both modes,
        an unknown one :class:`PermissionsError`.
        """
        if mode == self.mode:
            return self
        if mode not in MODE_TRANSITIONS:
            expected = ", ".join(repr(m) for m in PERMISSION_MODES)
            raise PermissionsError(f"Unknown permission mode {mode!r}: expected one of {expected}")
        if mode not in MODE_TRANSITIONS[self.mode]:
            allowed = ", ".join(sorted(MODE_TRANSITIONS[self.mode]))
            raise PermissionModeWideningError(
                f"Cannot change permission mode from {self.mode!r} to {mode!r}: only "
                f"narrowing is allowed (from {self.mode!r}: {allowed})"
            )
        return msgspec.structs.replace(self, mode=PermissionMode(mode))

    def ceiling(
        self, requested_mode: str | None = None, extra_deny: Iterable[str] = ()
    ) -> Permissions:
        """The most a subagent of an agent with these permissions may do.

        ``requested_mode`` (the definition's ``permission_mode``) defaults to the current
        mode; a mode the transition table does not allow raises
        :class:`PermissionCeilingError`. The deny list gains ``extra_deny`` (the
        definition's ``disallowed_tools``); allow list, ``can_use_tool``, write root and
        working directory are inherited unchanged.
        """
        mode = self.mode if requested_mode is None else requested_mode
        if mode not in MODE_TRANSITIONS[self.mode]:
            raise PermissionCeilingError(
                "Sub-agent permission mode cannot change under the lead policy: "
                f"Lead mode {self.mode} cannot delegate with mode {mode}. Use mode "
                f"{self.mode}, then tighten the child with disallowed_tools "
                "or max_requests."
            )
        extra = _names(extra_deny, "deny")
        if mode == self.mode and extra <= self.deny:
            return self
        return msgspec.structs.replace(self, mode=PermissionMode(mode), deny=self.deny | extra)

    def describe(self) -> dict[str, Any]:
        """Plain, JSON-encodable data for manifests and logs (the callback as a flag)."""
        return {
            "mode": self.mode,
            "allow": sorted(self.allow),
            "deny": sorted(self.deny),
            "can_use_tool": self.can_use_tool is not None,
            "write_root": None if self.write_root is None else str(self.write_root),
        }

    # -- checking --------------------------------------------------------------------

    def check_static(self, tool: Tool, arguments: Mapping[str, Any]) -> PermissionDeny | None:
        """Deny list, allow list, mode rules and write root; ``None`` means not denied.

        Synchronous and cheap: the agent loop calls it for every tool call, and a lead
        calls it on its *current* permissions for each of its subagents' calls.
        """
        name = normalize_tool_name(tool.name)
        if name in self.deny:
            return PermissionDeny(f"Tool '{tool.name}' is denied by the deny list.", final=True)
        allowlisted = name in self.allow
        if self.allow and not allowlisted:
            return PermissionDeny(
                f"Tool '{tool.name}' is not on the allow list ({', '.join(sorted(self.allow))})."
            )
        mode = self.mode
        if mode == "full" or tool.function is delegate_placeholder:
            return None
        if mode == "standard":
            if tool.destructive and not allowlisted and name not in _PATH_WRITE_TOOLS:
                return PermissionDeny(
                    f"Tool '{tool.name}' is destructive and the permission mode is "
                    "'standard'; it needs mode 'full' or the allow list."
                )
            if name in _PATH_WRITE_TOOLS:
                return self._check_write_root(tool, arguments)
            return None
        # readonly and plan: nothing that writes, whatever the lists say
        if tool.destructive or name in KNOWN_WRITE_TOOLS:
            return self._deny_readonly(tool.name, "writes or destroys data")
        if name == ASK_USER_TOOL_NAME and tool.read_only and (mode == "plan" or allowlisted):
            return None
        if name == ASK_USER_TOOL_NAME:
            return PermissionDeny("Tool 'ask_user' is not available in permission mode 'readonly'.")
        if (tool.read_only and not tool.destructive) or allowlisted:
            return None
        return self._deny_readonly(tool.name, "is not read-only")

    async def check(
        self, tool: Tool, arguments: Mapping[str, Any], context: Any = None
    ) -> PermissionResult:
        """:meth:`check_static`, then ``can_use_tool``; an error or junk result denies."""
        denied = self.check_static(tool, arguments)
        if denied is not None:
            return denied
        callback = self.can_use_tool
        if callback is None:
            return _ALLOW
        try:
            result: Any = callback(tool.name, arguments, context)
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:  # fail closed: a broken callback never allows a call
            return PermissionDeny(
                f"Tool '{tool.name}' denied: can_use_tool raised {type(exc).__name__}: {exc}",
                final=True,
            )
        if isinstance(result, PermissionAllow | PermissionDeny):
            return result
        return PermissionDeny(
            f"Tool '{tool.name}' denied: can_use_tool returned {type(result).__name__}, "
            "expected PermissionAllow or PermissionDeny.",
            final=True,
        )

    # -- helpers ---------------------------------------------------------------------

    def _deny_readonly(self, tool_name: str, why: str) -> PermissionDeny:
        hint = ""
        if (
            self.mode == "plan"
            and ASK_USER_TOOL_NAME not in self.deny
            and (not self.allow or ASK_USER_TOOL_NAME in self.allow)
        ):
            hint = " Use ask_user to ask the user instead."
        return PermissionDeny(
            f"Tool '{tool_name}' {why} and the permission mode is '{self.mode}'.{hint}"
        )

    def _check_write_root(self, tool: Tool, arguments: Mapping[str, Any]) -> PermissionDeny | None:
        tool_name = tool.name
        path = arguments.get("path")
        if not isinstance(path, str) or not path or "\x00" in path:
            return PermissionDeny(f"Tool '{tool_name}' needs a valid 'path' argument.")
        home = self.working_dir or Path(os.getcwd())
        root = self.write_root or home
        # Resolve the path exactly as the tool will: a file tool made for another
        # directory (tools_file(other)) writes relative to that directory, not ours.
        base = tool.path_base or home
        try:
            target = os.path.realpath(os.path.join(base, path))
        except (OSError, ValueError) as exc:
            return PermissionDeny(f"Tool '{tool_name}': path {path!r} is invalid ({exc}).")
        root_s = str(root)
        if target != root_s and not target.startswith(root_s.rstrip(os.sep) + os.sep):
            return PermissionDeny(
                f"Tool '{tool_name}' may only write under {root_s}; {path!r} is outside it."
            )
        return None
