"""What Claude Code plugin folders given as ``--agents`` bring besides their agents.

Discovery reads a plugin's agents (``plugin:agent``), its skills and its commands. The
commands add the rest, the same way in ``run``, ``serve`` and ``worker``:

* **Hooks.** Each plugin's hooks (``hooks/hooks.json``, or the manifest's ``hooks``) become
  command hooks on the lead, so they see every subagent's tool calls (tool events are
  always forwarded to the lead); ``--plugin`` modules' ``hooks`` join them, the modules'
  first. A hook that cannot run here (a ``prompt`` hook, an unknown event) is a warning.
* **MCP servers.** Each plugin's ``.mcp.json`` (either shape, ``${CLAUDE_PLUGIN_ROOT}`` the
  plugin's folder) joins the servers of ``--mcp-config`` / ``./.mcp.json``; a plugin's
  servers are *owned* by default (each delegation starts its own and stops it when it
  ends) unless ``--mcp-mode`` says otherwise. Two sources naming one server is an error.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..command_hooks import command_hooks
from ..definitions import DefinitionProblem, PluginFolder, Severity
from ..errors import DefinitionFileError, DeputyError
from ..runtime import HookEvent, Hooks
from .leadsetup import UsageError

__all__ = ["FolderParts", "folder_parts", "folder_problems", "merge_hooks", "merge_servers"]


class FolderParts:
    """The hooks, MCP servers (with their default modes) and warnings of plugin folders."""

    __slots__ = ("hooks", "modes", "servers", "warnings")

    def __init__(
        self,
        hooks: Hooks | None,
        servers: dict[str, Any],
        modes: dict[str, str],
        warnings: list[str],
    ) -> None:
        self.hooks = hooks
        self.servers = servers
        self.modes = modes
        self.warnings = warnings


def folder_parts(plugins: Sequence[PluginFolder]) -> FolderParts:
    """Read the plugins' hooks and MCP servers.

    Raises:
        UsageError: A hooks file or ``.mcp.json`` is invalid (the message names the file
            and the field), two plugins name one MCP server, or servers are configured
            without the ``mcp`` extra.
    """
    warnings: list[str] = []
    registries: list[Hooks] = []
    servers: dict[str, Any] = {}
    origin: dict[str, Path] = {}
    for plugin in plugins:
        if plugin.hooks is not None and plugin.hooks_source is not None:
            try:
                registries.append(
                    command_hooks(
                        plugin.hooks,
                        plugin.hooks_source,
                        plugin_root=plugin.root,
                        warnings=warnings,
                    )
                )
            except DeputyError as exc:
                raise UsageError(str(exc)) from exc
        if plugin.mcp_servers is not None and plugin.mcp_source is not None:
            for name, config in _plugin_servers(plugin).items():
                if name in servers:
                    raise UsageError(
                        f"MCP server {name!r} is defined by both {origin[name]} and "
                        f"{plugin.mcp_source}; rename one"
                    )
                servers[name] = config
                origin[name] = plugin.mcp_source
    return FolderParts(merge_hooks(*registries), servers, dict.fromkeys(servers, "owned"), warnings)


def folder_problems(plugins: Sequence[PluginFolder]) -> list[DefinitionProblem]:
    """Every problem of the plugins' hooks and MCP files, as ``validate`` prints them:
    what :func:`folder_parts` would refuse (errors) or drop (warnings), without stopping
    at the first."""
    problems: list[DefinitionProblem] = []
    for plugin in plugins:
        if plugin.hooks is not None and plugin.hooks_source is not None:
            warnings: list[str] = []
            try:
                command_hooks(
                    plugin.hooks, plugin.hooks_source, plugin_root=plugin.root, warnings=warnings
                )
            except DefinitionFileError as exc:
                problems.append(_problem(plugin.hooks_source, exc.reason, Severity.ERROR))
            for line in warnings:
                message = line.split(": warning: ", 1)[-1]
                problems.append(_problem(plugin.hooks_source, message, Severity.WARNING))
        if plugin.mcp_servers is not None and plugin.mcp_source is not None:
            try:
                _plugin_servers(plugin)
            except UsageError as exc:
                problems.append(_problem(plugin.mcp_source, str(exc), Severity.ERROR))
    return problems


def _problem(path: Path, message: str, severity: Severity) -> DefinitionProblem:
    prefix = f"{path}: "
    text = message[len(prefix) :] if message.startswith(prefix) else message
    return DefinitionProblem(path, None, None, text, severity)


def _plugin_servers(plugin: PluginFolder) -> dict[str, Any]:
    assert plugin.mcp_source is not None
    try:
        from .. import mcp  # the SDK is an extra: imported only when a plugin has servers
    except ImportError as exc:
        raise UsageError(
            f"{plugin.mcp_source}: plugin {plugin.name!r} has MCP servers, which need the "
            f"'mcp' extra: {exc}"
        ) from exc
    env = {**os.environ, "CLAUDE_PLUGIN_ROOT": str(plugin.root)}
    try:
        servers: dict[str, Any] = mcp.parse_mcp_config(
            plugin.mcp_servers, source=plugin.mcp_source, env=env
        )
    except DeputyError as exc:
        raise UsageError(str(exc)) from exc
    return servers


def merge_hooks(*registries: Hooks | None) -> Hooks | None:
    """One registry holding every given registry's hooks, in order (``None``: none)."""
    present = [r for r in registries if r is not None]
    if not present:
        return None
    if len(present) == 1:
        return present[0]
    return Hooks(m for event in HookEvent for r in present for m in r.matchers(event))


def merge_servers(
    configured: Mapping[str, Any], from_plugins: Mapping[str, Any], label: str
) -> dict[str, Any]:
    """The configured servers and the plugins' together; a name in both is an error."""
    clash = sorted(set(configured) & set(from_plugins))
    if clash:
        raise UsageError(
            f"MCP server(s) {', '.join(map(repr, clash))} are defined by both {label} and "
            "a plugin's .mcp.json; rename one"
        )
    return {**configured, **from_plugins}
