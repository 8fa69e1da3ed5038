"""The skills and MCP servers of ``deputy-runtime worker``.

The worker's skills are ``run``'s: the plugins' ``skills``. Its MCP servers are those of
``--mcp-config FILE``, else of ``.mcp.json`` in the working directory when there is one
(as ``run`` reads them), plus those of the plugin folders under ``--agents``, each in the
mode ``--mcp-mode NAME=MODE`` gives (``shared`` by default, ``owned`` for a plugin's, or
``exclusive``, which needs a plugin's ``lease_backend``). A
definition under ``--agents`` naming a server the worker has no configuration for makes
the worker refuse to start, naming the definition's file and the server, as it does for
an unknown tool.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..definitions import AgentDefinition, collect_agent_definitions, split_tool_names
from ..errors import DeputyError
from ..skills import Skill
from ..tools import Tool
from .leadsetup import UsageError, load_mcp_servers, mcp_mode_options
from .pluginfolders import merge_servers

__all__ = ["worker_extras"]


def worker_extras(
    args: argparse.Namespace,
    definitions: Mapping[str, AgentDefinition],
    tools: Mapping[str, Tool],
    skills: Mapping[str, Skill | str],
    lease_backend: Any = None,
    plugin_servers: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``DeputyActivities`` keyword arguments for the worker's skills and MCP servers.

    ``plugin_servers`` are the MCP servers of the plugin folders under ``--agents``
    (owned by default, as in ``run``); they join the configured ones.

    Raises:
        UsageError: The MCP configuration cannot be read, ``--mcp-mode`` is malformed or
            asks for ``exclusive`` without a lease backend, or a definition names a server
            that is not configured.
    """
    mcp_config = getattr(args, "mcp_config", None)
    from_plugins = dict(plugin_servers or {})
    servers = merge_servers(
        load_mcp_servers(mcp_config, Path.cwd()),
        from_plugins,
        f"--mcp-config {mcp_config!r}" if mcp_config else str(Path.cwd() / ".mcp.json"),
    )
    modes = {
        **dict.fromkeys(from_plugins, "owned"),
        **mcp_mode_options(getattr(args, "mcp_mode", None) or (), servers),
    }
    for name, mode in modes.items():
        if mode == "exclusive" and lease_backend is None:
            raise UsageError(
                f"--mcp-mode {name}=exclusive: an exclusive MCP server needs the workers' "
                "lease backend; give it with a --plugin whose lease_backend is, e.g., "
                "RedisLeases(url)"
            )
    _check_servers(args.agents, definitions, servers, tools, skills)
    mcp: list[Any] = []
    if servers:
        from .. import mcp as sdk  # the SDK is an extra: imported only when configured

        for name, config in servers.items():
            mode = modes.get(name, "shared")
            server = sdk.McpServer(name, config)
            try:
                if mode == "exclusive":
                    mcp.append(sdk.McpResource(server, mode=mode, backend=lease_backend))
                else:
                    mcp.append(sdk.McpResource(server, mode=mode))
            except DeputyError as exc:
                raise UsageError(f"--mcp-mode {name}={mode}: {exc}") from exc
    return {"skills": tuple(skills.values()), "mcp": tuple(mcp)}


def _check_servers(
    directory: str,
    definitions: Mapping[str, AgentDefinition],
    servers: Mapping[str, Any],
    tools: Mapping[str, Tool],
    skills: Mapping[str, Skill | str],
) -> None:
    sources: Mapping[str, Path] | None = None
    for name, definition in definitions.items():
        mcp, _ = split_tool_names(definition.mcp_tools or ())
        named = (*(n.server for n in mcp), *(definition.mcp_servers or ()))
        for server in dict.fromkeys(named):
            if server in servers:
                continue
            if sources is None:
                sources = collect_agent_definitions(directory, tools, skills, markdown=True).sources
            where = sources.get(name, Path(directory))
            known = ", ".join(servers) or "none (no --mcp-config and no .mcp.json here)"
            raise UsageError(
                f"{where}: agent {name!r} names MCP server {server!r}, which this worker "
                f"has no configuration for (configured: {known}); give it in --mcp-config "
                "or .mcp.json"
            )
