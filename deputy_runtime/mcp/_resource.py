"""An MCP server attached to a lead as a resource mode (``McpResource``).

Rules:

* A subagent gets exactly the MCP tools its definition's ``mcp_tools`` name on this
  server (``mcp__<server>__<tool>``; ``mcp__<server>`` or ``mcp__<server>__*`` for all
  of them), and all of them when its ``mcp_servers`` names the server (Claude Code's
  ``mcpServers: [name]``). A name of a tool the server does not offer fails the delegation's setup,
  naming the tools it does offer. A subagent naming none of its tools binds nothing
  (no server is started for it).
* A server that advertises resources also offers ``mcp__<server>__list_resources`` and
  ``mcp__<server>__read_resource`` (read-only): part of "every tool of the server", or
  named like any of its tools.
* A tool the session does not offer (``McpSession.unavailable_tools``: it requires
  task-augmented execution, or its output schema is invalid) fails the setup of a
  delegation naming it, saying why; a delegation given every tool of the server gets a
  ``WarningEvent`` per such tool instead.
* The tools are added to the definition's other tools and pass the lead's permission
  ceiling, hooks and per-call checks like any tool (annotations decide read-only and
  destructive).
* Lifecycles: ``shared``: one session for the lead and all its delegations, started on
  first use. ``exclusive``: that session, held by one delegation at a time through a
  lease on ``mcp:<server>`` (busy: ResourceBusyError, or a wait with ``wait=True``).
  ``owned``: a fresh server per delegation, started before the subagent's first request
  and stopped when the delegation settles, also under cancellation.
* Sessions are hosted by the lead: ``async with lead:`` (or ``await lead.aclose()`` from
  the task that opened it) bounds every session of this resource; a delegation of a lead
  that is not open fails its setup with a message saying so.
* What the server asks of the client (``_client``): sampling is answered by the
  delegation's own model and charged to its budget, elicitation goes to the lead's
  ``DelegationPolicy(human_input=...)``, and ``roots/list`` is the delegation's working
  directory plus the server's ``roots``. On a shared server a sampling or elicitation
  request made while calls of several delegations are in flight is refused (it cannot
  be told which delegation it is for).
* Server start and stop reach the lead run's event stream as ``McpServerEvent`` (with the
  ids of the delegation that started or used the server); a tool call's progress and the
  log messages that arrive while it runs as ``McpProgressEvent`` and ``McpLogEvent`` with
  the ids of the delegation that made the call (a shared session serves many); every
  event also reaches the server's own ``on_event``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio

from ..definitions import split_tool_names
from ..errors import DelegationBindingError
from ..runtime import (
    IN_PROCESS_LEASES,
    BindRequest,
    Event,
    ExclusiveResource,
    LeaseBackend,
    McpLogEvent,
    McpProgressEvent,
    McpServerEvent,
    WarningEvent,
)
from ..tools import Tool
from ._events import (
    McpEvent,
    McpLogMessage,
    McpProgress,
    McpServerStarted,
    McpServerStopped,
    emit_safely,
)
from ._names import mcp_tool_names
from ._pool import McpServerPool
from ._server import McpServer
from ._session import McpSession

__all__ = ["MCP_MODES", "McpResource"]

#: The lifecycles an attached MCP server can have.
MCP_MODES = ("shared", "exclusive", "owned")

_Sink = Callable[[Event], None]


class _Forward:
    """The on_event of the sessions this resource starts: the server's own sink, plus
    the run event stream of the delegation that is current for the session."""

    __slots__ = ("ids", "server", "sink")

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self.sink: _Sink | None = None
        self.ids: dict[str, Any] = {}

    def __call__(self, event: McpEvent) -> None:
        emit_safely(self.server.on_event, event)
        sink = self.sink
        if sink is None:
            return
        mapped = _run_event(event, self.ids)
        if mapped is not None:
            try:
                sink(mapped)
            except Exception:  # a closed stream must not break a server's cleanup
                return


class _CallSink:
    """A delegation's per-call sink on a shared session: its calls' progress and the log
    messages that arrive while they run, into the lead run's stream with its ids."""

    __slots__ = ("emit", "ids")

    def __init__(self, emit: _Sink, ids: dict[str, Any]) -> None:
        self.emit = emit
        self.ids = ids

    def __call__(self, event: McpEvent) -> None:
        if isinstance(event, McpProgress | McpLogMessage):
            mapped = _run_event(event, self.ids)
            if mapped is not None:
                self.emit(mapped)


def _run_event(event: McpEvent, ids: dict[str, Any]) -> Event | None:
    if isinstance(event, McpProgress):
        return McpProgressEvent(
            **ids,
            server=event.server,
            tool=event.tool,
            progress=event.progress,
            total=event.total,
            message=event.message,
            title=event.title,
        )
    if isinstance(event, McpLogMessage):
        return McpLogEvent(
            **ids,
            server=event.server,
            level=event.level.value,
            logger=event.logger,
            data=event.data,
        )
    if isinstance(event, McpServerStarted):
        return McpServerEvent(
            **ids,
            server=event.server,
            action="start",
            transport=event.transport,
            pid=event.pid,
            duration=event.duration,
            tools=event.tools,
        )
    if isinstance(event, McpServerStopped):
        return McpServerEvent(
            **ids,
            server=event.server,
            action="stop",
            transport=event.transport,
            pid=event.pid,
            duration=event.duration,
            kind=event.kind.value,
            exit_code=event.exit_code,
            error=event.error,
        )
    return None


class _OwnedSession:
    """Releases one owned session when its delegation settles."""

    __slots__ = ("pool", "session")

    holds = False

    def __init__(self, pool: McpServerPool, session: McpSession) -> None:
        self.pool = pool
        self.session = session

    async def hold(self, on_lost: Callable[[str], None]) -> None:
        return None

    async def release(self) -> str | None:
        try:
            await self.pool.release(self.session)
        except Exception as exc:
            return f"MCP server {self.session.name!r} did not stop cleanly: {exc}"
        return None


class McpResource:
    """An MCP server attached to a lead: ``DelegationPolicy(resource_modes=(...))``.

    Args:
        server: The server to attach; its name is the ``<server>`` of ``mcp__`` names.
        mode: ``"shared"`` (default), ``"exclusive"`` or ``"owned"`` (see module rules).
        wait: Exclusive only: wait for a busy server instead of failing the delegation
            with ResourceBusyError.
        backend: Exclusive only: where the lease on ``mcp:<server>`` is kept.

    Attributes:
        mcp_server: The attached server's name (how the builder resolves ``mcp__``
            names).

    Raises:
        DelegationBindingError: ``server`` is not an McpServer, ``mode`` is unknown, or
            ``wait``/``backend`` are given for another mode than exclusive.
    """

    supplies_tools = False

    def __init__(
        self,
        server: McpServer,
        mode: str = "shared",
        *,
        wait: bool = False,
        backend: LeaseBackend = IN_PROCESS_LEASES,
    ) -> None:
        if not isinstance(server, McpServer):
            raise DelegationBindingError(
                f"McpResource server must be an McpServer, got {type(server).__name__}"
            )
        if mode not in MCP_MODES:
            raise DelegationBindingError(
                f"McpResource mode must be one of {', '.join(MCP_MODES)}, got {mode!r}"
            )
        if mode != "exclusive" and (wait or backend is not IN_PROCESS_LEASES):
            raise DelegationBindingError(
                "McpResource wait and backend apply to mode='exclusive' only"
            )
        self.server = server
        self.name = mode
        self.mcp_server = server.name
        self._lease = (
            ExclusiveResource(f"mcp:{server.name}", wait=wait, backend=backend)
            if mode == "exclusive"
            else None
        )
        self._forward = _Forward(server)
        self._shared = McpServer(
            server.name,
            server.config,
            limits=server.limits,
            on_event=self._forward,
            roots=server.roots,
        )
        self._pool: McpServerPool | None = None
        self._binding = anyio.Lock()

    async def __aenter__(self) -> McpResource:
        """Open the resource (the lead does it): sessions can start from now on.

        Returns:
            The resource itself.

        Raises:
            DelegationBindingError: It is already open (attached to an open lead).
        """
        if self._pool is not None:
            raise DelegationBindingError(
                f"McpResource {self.mcp_server!r} is already open; attach one McpResource "
                "to one lead at a time"
            )
        pool = McpServerPool()
        await pool.__aenter__()
        self._pool = pool
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop every session of this resource and wait until each is stopped."""
        pool, self._pool = self._pool, None
        self._forward.sink = None
        # The next lead to open this resource may work in another directory.
        self._shared.roots = self.server.roots
        if pool is not None:
            await pool.__aexit__(None, None, None)

    def check(self, definition: Any) -> None:
        """Any definition can be bound (its MCP names are resolved when bound).

        Args:
            definition: The subagent's definition.
        """

    async def acquire(self, request: BindRequest) -> tuple[Tool, ...]:
        """Bind the server for one delegation; return the MCP tools the definition names.

        Args:
            request: The delegation asking.

        Returns:
            The named tools of this server (none when the definition names none).

        Raises:
            DelegationBindingError: The lead is not open, or a named tool is unknown.
            ResourceBusyError: Exclusive, busy, and not waiting.
            McpStartError: The server did not start (its process is reaped first).
        """
        definition = request.definition
        # ``mcp_servers: [name]`` (Claude Code's mcpServers) asks for every tool of it.
        every = [f"mcp__{s}" for s in definition.mcp_servers or () if s == self.mcp_server]
        mcp, _ = split_tool_names((*(definition.mcp_tools or ()), *every))
        wanted = [n for n in mcp if n.server == self.mcp_server]
        if not wanted:
            return ()
        pool = self._pool
        if pool is None:
            raise DelegationBindingError(
                f"Subagent '{definition.name}' uses MCP server {self.mcp_server!r}, whose "
                "lead is not open: run it inside 'async with lead:'"
            )
        if self._lease is not None:
            await self._lease.acquire(request)
        emit = request.emit
        ids = request.delegation.event_ids()
        if self.name == "owned":
            forward = _Forward(self.server)
            forward.sink, forward.ids = emit, ids
            server = McpServer(
                self.server.name,
                self.server.config,
                limits=self.server.limits,
                on_event=forward,
                roots=(request.context().working_dir, *self.server.roots),
            )
            session = await pool.owned(server)
            request.keep(_OwnedSession(pool, session))
            # Everything the owned server reports already reaches this delegation.
            calls: _CallSink | None = None
        else:
            # A shared session's start (or the replacement of one that failed) is
            # reported to the delegation that caused it; the lock keeps concurrent
            # delegations from reporting each other's (a READY session returns at once).
            async with self._binding:
                if self._shared.roots == self.server.roots:
                    # Outside calls the shared server sees the lead's directory (every
                    # delegation's working directory) and the host's roots.
                    self._shared.roots = (
                        Path(request.context().working_dir),
                        *self.server.roots,
                    )
                self._forward.sink, self._forward.ids = emit, ids
                try:
                    session = await pool.shared(self._shared)
                finally:
                    self._forward.sink = None
            calls = None if emit is None else _CallSink(emit, ids)
        tools = _select(session, wanted, definition.name, calls)
        if emit is not None and any(name.tool is None for name in wanted):
            for tool, reason in session.unavailable_tools().items():
                emit(
                    WarningEvent(
                        **ids,
                        message=f"MCP tool {tool!r} is not offered to subagent "
                        f"'{definition.name}': {reason}",
                    )
                )
        return tools

    def describe(self) -> dict[str, Any]:
        """Plain, JSON-encodable data for manifests and logs.

        Returns:
            ``{"mode": ..., "mcp_server": ...}`` plus the server's ``describe()``.
        """
        out: dict[str, Any] = {"mode": self.name, "mcp_server": self.server.describe()}
        if self._lease is not None:
            out["wait"] = self._lease.wait
            out["backend"] = type(self._lease.backend).__name__
        return out

    def __repr__(self) -> str:
        return f"McpResource({self.server!r}, mode={self.name!r})"


def _select(
    session: McpSession, wanted: list[Any], agent: str, calls: _CallSink | None
) -> tuple[Tool, ...]:
    available = {tool.name: tool for tool in (*session.tools(calls), *session.resource_tools())}
    out: dict[str, Tool] = {}
    for name in wanted:
        if name.tool is None:
            out.update(available)
            continue
        runtime_name = name.name
        tool = available.get(runtime_name)
        if tool is None:
            # Written with characters the runtime name replaces (``.`` becomes ``_``).
            runtime_name = mcp_tool_names(session.name, [name.tool])[name.tool]
            tool = available.get(runtime_name)
        unavailable = session.unavailable_tools()
        why = unavailable.get(name.name) or unavailable.get(runtime_name)
        if tool is None and why is not None:
            raise DelegationBindingError(
                f"Subagent '{agent}' names {name.name!r}, which MCP server "
                f"{session.name!r} lists but this runtime does not offer: {why}"
            )
        if tool is None:
            names = ", ".join(sorted(available)) or "none"
            raise DelegationBindingError(
                f"Subagent '{agent}' names {name.name!r}, but MCP server "
                f"{session.name!r} has no such tool; its tools: {names}"
            )
        out[tool.name] = tool
    return tuple(out.values())
