"""Command hooks: Claude Code's shell-command hooks as deputy hook callbacks.

A command hook runs one shell command per matching event, the way Claude Code runs it:
the event as JSON on standard input, ``CLAUDE_PROJECT_DIR`` (and, for a plugin's hooks,
``CLAUDE_PLUGIN_ROOT``) in its environment, a time limit (60 s unless the hook says
``timeout``, in seconds). What it answers:

* **exit 0**: standard output, when it is a JSON object, is read as Claude Code's hook
  output: ``"continue": false`` stops the run (``stopReason`` is the reason);
  ``hookSpecificOutput.permissionDecision`` ``"deny"``/``"allow"`` (with
  ``permissionDecisionReason``) and the older ``"decision": "block"``/``"approve"`` (with
  ``reason``) decide a ``PreToolUse`` call. Anything else: no decision.
* **exit 2**: blocks. A ``PreToolUse`` or ``PermissionRequest`` call is denied with the
  command's standard error as the reason the model reads; a ``UserPromptSubmit`` prompt
  stops the run; for other events it is recorded as the hook's error.
* **anything else** (another exit code, the time limit, a command that cannot start) is
  the hook's error. Claude Code carries on past such an error; here a ``PreToolUse``
  error denies the call, as every failing ``PreToolUse`` hook does: a guard that crashed
  never lets a call through.

Matchers are Claude Code's: a tool-name regular expression matched against the whole
name, ``*`` or an empty matcher for every tool. A deputy tool that stands for one of
Claude Code's tools is matched (and reported on standard input) by Claude Code's name,
``Write`` for ``write_file``; others, ``mcp__server__tool`` included, by their own.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from .definitions import CLAUDE_CODE_TOOLS
from .errors import CommandHookError, DefinitionFileError
from .runtime import HookDecision, HookEvent, HookInput, HookMatcher, Hooks

__all__ = ["DEFAULT_HOOK_TIMEOUT", "CommandHook", "claude_tool_name", "command_hooks"]

#: Claude Code's time limit for a command hook, in seconds.
DEFAULT_HOOK_TIMEOUT = 60.0
#: The most of each output stream a hook's answer is read from.
_OUTPUT_CAP = 1 << 20
#: deputy tool name -> the Claude Code name it stands for (the table's first entry).
_CLAUDE_NAMES: Mapping[str, str] = {
    deputy: claude for claude, deputy in reversed(list(CLAUDE_CODE_TOOLS.items()))
}


def claude_tool_name(name: str | None) -> str | None:
    """The name a command hook knows a deputy tool by.

    Args:
        name: A deputy tool name (``None``: an event without a tool).

    Returns:
        Claude Code's name for it (``Write`` for ``write_file``), else ``name`` itself.
    """
    if name is None:
        return None
    return _CLAUDE_NAMES.get(name, name)


class CommandHook:
    """One shell command run as a hook callback (see the module docstring).

    Args:
        command: The shell command line (run by ``/bin/sh -c``).
        event: The event it is registered for.
        matcher: Claude Code's tool-name matcher (``None``, ``""`` or ``"*"``: every call).
        timeout: Seconds before the command is killed.
        plugin_root: The plugin folder, given to the command as ``CLAUDE_PLUGIN_ROOT``.
    """

    __slots__ = ("_regex", "command", "event", "matcher", "plugin_root", "timeout")

    def __init__(
        self,
        command: str,
        event: HookEvent,
        *,
        matcher: str | None = None,
        timeout: float = DEFAULT_HOOK_TIMEOUT,
        plugin_root: Path | None = None,
    ) -> None:
        self.command = command
        self.event = event
        self.matcher = matcher
        self.timeout = timeout
        self.plugin_root = plugin_root
        pattern = None if matcher in (None, "", "*") else matcher
        self._regex = None if pattern is None else re.compile(pattern)

    def __repr__(self) -> str:
        return f"CommandHook({self.event.value}, {self.command!r}, matcher={self.matcher!r})"

    def matches(self, tool_name: str | None) -> bool:
        """Whether the hook runs for a call of ``tool_name``.

        Args:
            tool_name: The deputy tool name (``None``: an event without a tool).

        Returns:
            Whether the matcher takes it, by its Claude Code name or its own.
        """
        if self._regex is None:
            return True
        if tool_name is None:
            return False
        names = {tool_name, claude_tool_name(tool_name)}
        return any(self._regex.fullmatch(n) for n in names if n is not None)

    async def __call__(self, hook_input: HookInput) -> HookDecision | None:
        if not self.matches(hook_input.tool_name):
            return None
        code, out, err = await self._run(_stdin(hook_input), hook_input.working_dir)
        event = hook_input.event
        if code == 2:
            reason = _cut(err.strip()) or f"blocked by the hook command {self.command!r}"
            if event in (HookEvent.PreToolUse, HookEvent.PermissionRequest):
                return HookDecision.deny(reason)
            if event is HookEvent.UserPromptSubmit:
                return HookDecision.stop(reason)
            raise CommandHookError(f"{self.command!r} blocked ({reason})")
        if code != 0:
            detail = err.strip().splitlines()[-1] if err.strip() else "no output on stderr"
            raise CommandHookError(f"{self.command!r} exited with code {code}: {detail}")
        return _decision(event, out)

    async def _run(self, stdin: bytes, working_dir: str | None) -> tuple[int, str, str]:
        env = dict(os.environ)
        if working_dir is not None:
            env["CLAUDE_PROJECT_DIR"] = working_dir
        if self.plugin_root is not None:
            env["CLAUDE_PLUGIN_ROOT"] = str(self.plugin_root)
        try:
            # Shielded: the child may already run when the spawn is cancelled, and a
            # process this hook never got could not be killed.
            with anyio.CancelScope(shield=True):
                process = await anyio.open_process(
                    ["/bin/sh", "-c", self.command],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=env,
                    cwd=working_dir,
                    start_new_session=True,  # its own process group: killed as a whole
                )
        except OSError as exc:
            raise CommandHookError(f"{self.command!r} could not start: {exc}") from None
        out = bytearray()
        err = bytearray()
        try:
            with anyio.move_on_after(self.timeout) as scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_drain, process.stdout, out)
                    tg.start_soon(_drain, process.stderr, err)
                    assert process.stdin is not None
                    try:
                        await process.stdin.send(stdin)
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                        pass  # the command did not read its input
                    finally:
                        await process.stdin.aclose()
                    await process.wait()
                    # What it left running in its group would hold the pipes open.
                    _kill_group(process.pid)
            if scope.cancelled_caught:
                raise CommandHookError(
                    f"{self.command!r} timed out after {self.timeout:g} s and was killed"
                )
        finally:
            with anyio.CancelScope(shield=True):
                # The whole group: the command and anything it left running.
                _kill_group(process.pid)
                await process.wait()
                await process.aclose()
        assert process.returncode is not None
        return process.returncode, out.decode(errors="replace"), err.decode(errors="replace")


async def _drain(stream: anyio.abc.ByteReceiveStream | None, into: bytearray) -> None:
    if stream is None:
        return
    async for chunk in stream:
        if len(into) < _OUTPUT_CAP:
            into.extend(chunk[: _OUTPUT_CAP - len(into)])


def _cut(text: str, limit: int = 4000) -> str:
    """A hook's message as the model reads it: at most ``limit`` characters."""
    return text if len(text) <= limit else text[:limit] + " [cut]"


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _stdin(hook_input: HookInput) -> bytes:
    """The event as Claude Code gives it to a command hook, plus deputy's own ids."""
    data: dict[str, Any] = {
        "session_id": hook_input.run_id or hook_input.agent_id,
        "transcript_path": None,
        "cwd": hook_input.working_dir,
        "permission_mode": hook_input.permission_mode,
        "hook_event_name": hook_input.event.value,
    }
    if hook_input.tool_name is not None:
        data["tool_name"] = claude_tool_name(hook_input.tool_name)
        data["tool_input"] = hook_input.tool_input or {}
    if hook_input.event is HookEvent.PostToolUse:
        data["tool_response"] = hook_input.tool_result
    if hook_input.tool_error is not None:
        data["error"] = hook_input.tool_error
    for key in ("prompt", "message", "reason", "task", "status", "result"):
        value = getattr(hook_input, key)
        if value is not None:
            data[key] = value
    if hook_input.event in (HookEvent.PreCompact, HookEvent.PostCompact):
        # Claude Code's field: this runtime compacts only on its own ("auto").
        data["trigger"] = hook_input.reason or "auto"
    data["deputy"] = {
        "agent_id": hook_input.agent_id,
        "agent_name": hook_input.agent_name,
        "delegation_id": hook_input.delegation_id,
        "tool_name": hook_input.tool_name,
        "tool_call_id": hook_input.tool_call_id,
    }
    if hook_input.context_tokens is not None:
        data["deputy"]["context_tokens"] = hook_input.context_tokens
        data["deputy"]["context_window"] = hook_input.context_window
    return json.dumps(data, default=repr).encode()


def _decision(event: HookEvent, out: str) -> HookDecision | None:
    """The decision in a hook's JSON output (``None``: none, or not JSON)."""
    text = out.strip()
    if not text.startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    if data.get("continue") is False:
        return HookDecision.stop(str(data.get("stopReason") or "stopped by a command hook"))
    if event is not HookEvent.PreToolUse:
        return None
    specific = data.get("hookSpecificOutput")
    if isinstance(specific, dict):
        decision = specific.get("permissionDecision")
        reason = str(specific.get("permissionDecisionReason") or "")
        if decision == "deny":
            return HookDecision.deny(reason or "denied by a command hook")
        if decision == "allow":
            return HookDecision.allow()
    legacy = data.get("decision")
    if legacy == "block":
        return HookDecision.deny(str(data.get("reason") or "blocked by a command hook"))
    if legacy == "approve":
        return HookDecision.allow()
    return None


# -- hooks configuration ------------------------------------------------------------------


def command_hooks(
    config: object,
    source: Path,
    *,
    plugin_root: Path | None = None,
    warnings: list[str] | None = None,
) -> Hooks:
    """The hooks of a Claude Code hooks configuration, as a deputy :class:`Hooks` registry.

    ``config`` is a ``hooks.json`` document (``{"hooks": {EVENT: [...]}}``, a
    ``description`` beside it allowed) or the event map alone, as agent frontmatter and
    settings files write it: ``{EVENT: [{"matcher": "Write|Edit", "hooks": [{"type":
    "command", "command": "...", "timeout": 30}]}]}``.

    Args:
        config: The parsed document.
        source: The file it came from (named in every error).
        plugin_root: The plugin folder the hooks belong to (``CLAUDE_PLUGIN_ROOT``).
        warnings: Receives a line for each hook that cannot run here (a ``prompt`` or
            ``agent`` hook, an event this runtime does not have); without it they are
            errors.

    Returns:
        The registry, hooks in file order.

    Raises:
        DefinitionFileError: The document is not shaped as above; the message names the
            field.
    """
    if isinstance(config, Mapping) and "hooks" in config:
        extra = sorted(set(config) - {"hooks", "description"})
        if extra:
            raise DefinitionFileError(
                f"unknown top-level key(s) {', '.join(map(repr, extra))}; a hooks file has "
                "'hooks' (and optionally 'description')",
                path=source,
            )
        config = config["hooks"]
    if not isinstance(config, Mapping):
        raise DefinitionFileError(
            f"hooks must be a map of event names to matcher lists, got {type(config).__name__}",
            path=source,
        )
    matchers: list[HookMatcher] = []
    for name, groups in config.items():
        try:
            event = HookEvent(name)
        except ValueError:
            _drop(f"hooks.{name}: no such event here; its hooks are not run", source, warnings)
            continue
        if not isinstance(groups, list | tuple):
            raise DefinitionFileError(
                f"hooks.{name} must be a list of {{matcher, hooks}} entries, got "
                f"{type(groups).__name__}",
                path=source,
            )
        for i, group in enumerate(groups):
            where = f"hooks.{name}[{i}]"
            matchers.extend(_group(group, event, where, source, plugin_root, warnings))
    return Hooks(matchers)


def _group(
    group: object,
    event: HookEvent,
    where: str,
    source: Path,
    plugin_root: Path | None,
    warnings: list[str] | None,
) -> list[HookMatcher]:
    if not isinstance(group, Mapping) or not isinstance(group.get("hooks"), list | tuple):
        raise DefinitionFileError(
            f"{where} must be {{'matcher': ..., 'hooks': [...]}}", path=source
        )
    extra = sorted(set(group) - {"matcher", "hooks"})
    if extra:
        raise DefinitionFileError(
            f"{where}: unknown key(s) {', '.join(map(repr, extra))}", path=source
        )
    matcher = group.get("matcher")
    if matcher is not None and not isinstance(matcher, str):
        raise DefinitionFileError(f"{where}.matcher must be text", path=source)
    if matcher not in (None, "", "*"):
        try:
            re.compile(matcher)
        except re.error as exc:
            raise DefinitionFileError(
                f"{where}.matcher {matcher!r} is not a valid regular expression ({exc})",
                path=source,
            ) from None
    found: list[HookMatcher] = []
    for j, entry in enumerate(group["hooks"]):
        at = f"{where}.hooks[{j}]"
        if not isinstance(entry, Mapping):
            raise DefinitionFileError(f"{at} must be a map", path=source)
        kind = entry.get("type", "command")
        if kind != "command":
            _drop(f"{at}: {kind!r} hooks are not run here (only 'command')", source, warnings)
            continue
        command = entry.get("command")
        if not isinstance(command, str) or not command.strip():
            raise DefinitionFileError(f"{at}.command must be a non-empty command line", path=source)
        timeout = entry.get("timeout", DEFAULT_HOOK_TIMEOUT)
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise DefinitionFileError(
                f"{at}.timeout must be a positive number of seconds, got {timeout!r}",
                path=source,
            )
        hook = CommandHook(
            command, event, matcher=matcher, timeout=float(timeout), plugin_root=plugin_root
        )
        found.append(HookMatcher(event, hook))
    return found


def _drop(message: str, source: Path, warnings: list[str] | None) -> None:
    if warnings is None:
        raise DefinitionFileError(message, path=source)
    warnings.append(f"{source}: warning: {message}")
