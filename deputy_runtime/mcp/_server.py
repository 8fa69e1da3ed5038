"""A named MCP server: its configuration, limits and event sink; it starts sessions."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import McpConfigError
from ._config import McpConfig, McpHttp, McpLimits, McpStdio, check_server_name
from ._events import McpEventSink
from ._names import MCP_PREFIX
from ._session import McpSession

__all__ = ["McpServer"]


class McpServer:
    """How to run one MCP server; each :meth:`session` is a fresh connection.

    The runtime's three resource modes map onto it directly: *shared* is one session
    started on first use and closed when the lead closes (:meth:`McpServerPool.shared`);
    *exclusive* is that session held by one delegation at a time (:attr:`McpSession.lock`
    or the runtime's lease); *owned* is a fresh session per delegation, entered before the
    subagent's first request and left at settlement (``async with server.session()``, or
    :meth:`McpServerPool.owned` / :meth:`McpServerPool.release` across tasks).

    ``roots`` are directories the host lets the server see (absolute paths): the
    ``roots/list`` answer is the working directory of each agent run with a call in
    flight, then these.
    """

    def __init__(
        self,
        name: str,
        config: McpConfig,
        *,
        limits: McpLimits | None = None,
        on_event: McpEventSink | None = None,
        roots: Iterable[str | os.PathLike[str]] = (),
    ) -> None:
        self.name = check_server_name(name, "McpServer name")
        if not isinstance(config, McpStdio | McpHttp):
            raise McpConfigError(
                f"McpServer {name!r}: config must be McpStdio or McpHttp, got "
                f"{type(config).__name__}",
                server=name,
            )
        if limits is not None and not isinstance(limits, McpLimits):
            raise McpConfigError(f"McpServer {name!r}: limits must be McpLimits", server=name)
        if on_event is not None and not callable(on_event):
            raise McpConfigError(f"McpServer {name!r}: on_event must be callable", server=name)
        self.config = config
        self.limits = limits or McpLimits()
        self.on_event = on_event
        #: What ``roots/list`` answers besides the working directory of the run calling.
        self.roots = _roots(name, roots)

    @property
    def tool_prefix(self) -> str:
        """``mcp__<name>__``: every tool of this server has a name starting with it."""
        return f"{MCP_PREFIX}{self.name}__"

    def session(self) -> McpSession:
        """A new, not yet started session (enter it with ``async with``).

        Returns:
            A NEW session of this server; each call gives a separate connection.
        """
        return McpSession(self)

    def describe(self) -> dict[str, Any]:
        """Plain, JSON-encodable data for manifests and logs; no secrets (see the configs).

        Returns:
            ``name`` and the configuration's ``describe()`` fields.
        """
        return {"name": self.name, **self.config.describe()}

    def __repr__(self) -> str:
        return f"McpServer({self.name!r}, {self.config.transport})"


def _roots(name: str, roots: Iterable[str | os.PathLike[str]]) -> tuple[Path, ...]:
    if isinstance(roots, str | os.PathLike):
        raise McpConfigError(
            f"McpServer {name!r}: roots must be a list of absolute paths, got one path",
            server=name,
        )
    out: list[Path] = []
    for i, root in enumerate(roots):
        if not isinstance(root, str | os.PathLike) or not os.path.isabs(root):
            raise McpConfigError(
                f"McpServer {name!r}: roots[{i}] must be an absolute directory path, got {root!r}",
                server=name,
            )
        out.append(Path(os.path.normpath(root)))
    return tuple(out)
