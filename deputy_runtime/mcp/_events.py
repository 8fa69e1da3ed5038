"""What MCP sessions report: frozen event values passed to a host callback.

One tagged union (tag field ``type``), JSON-encodable with msgspec like the runtime's own
run events, so a host can log them next to those. The callback is called synchronously
from the session; an exception it raises is swallowed (a broken logger must not stop a
server from being reaped).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import TypeAlias

import msgspec

__all__ = [
    "McpEvent",
    "McpEventSink",
    "McpLogLevel",
    "McpLogMessage",
    "McpProgress",
    "McpServerStarted",
    "McpServerStopped",
    "McpStderrLine",
    "McpStopKind",
    "McpToolCall",
    "McpToolUnavailable",
    "McpToolsChanged",
    "emit_safely",
]


class McpStopKind(enum.Enum):
    """How a session ended."""

    #: A stdio server exited by itself after its input closed (or an HTTP session closed).
    CLOSED = "closed"
    #: A stdio server outlived ``close_grace`` and exited on SIGTERM.
    TERMINATED = "terminated"
    #: A stdio server outlived ``terminate_grace`` too and was killed.
    KILLED = "killed"
    #: The server went away before it was closed (crash, broken pipe, bad message).
    FAILED = "failed"


class _Base(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    server: str


class McpServerStarted(_Base, frozen=True, tag="mcp_server_start"):
    """A session is ready: handshake done and tools listed, ``duration`` seconds after start.

    ``pid`` is the stdio server's process id (``None`` over HTTP).
    """

    transport: str
    pid: int | None
    duration: float
    tools: int


class McpServerStopped(_Base, frozen=True, tag="mcp_server_stop"):
    """A session ended after ``duration`` seconds; for stdio its process is reaped.

    ``exit_code`` is the process's status (negative: the signal that ended it); ``error``
    says why a session failed or did not start.
    """

    transport: str
    pid: int | None
    duration: float
    kind: McpStopKind
    exit_code: int | None = None
    error: str | None = None


class McpToolCall(_Base, frozen=True, tag="mcp_tool_call"):
    """One tool call: ``tool`` is the runtime name, ``mcp_tool`` the server's own name,
    ``title`` the server's display name for it (when it gives one)."""

    tool: str
    mcp_tool: str
    duration: float
    error: str | None = None
    title: str | None = None


class McpToolUnavailable(_Base, frozen=True, tag="mcp_tool_unavailable"):
    """A tool the server lists is not offered (``tool``: its runtime name); ``reason``
    says why. Reported every time the tool list is read."""

    tool: str
    reason: str


class McpToolsChanged(_Base, frozen=True, tag="mcp_tools_changed"):
    """The server announced a new tool list and the session now offers ``tools`` tools."""

    tools: int


class McpLogLevel(enum.Enum):
    """The severity of a server's log message (MCP's syslog levels)."""

    DEBUG = "debug"
    INFO = "info"
    NOTICE = "notice"
    WARNING = "warning"
    ERROR = "error"
    CRITICAL = "critical"
    ALERT = "alert"
    EMERGENCY = "emergency"


class McpProgress(_Base, frozen=True, tag="mcp_progress"):
    """A server's progress report on one running tool call (``notifications/progress``).

    ``progress`` increases with every report; ``total`` is given when the server knows
    it; ``message`` is cut to ``stderr_line_chars``.
    """

    tool: str
    mcp_tool: str
    progress: float
    total: float | None = None
    message: str | None = None
    title: str | None = None


class McpLogMessage(_Base, frozen=True, tag="mcp_log"):
    """A log message the server sent (``notifications/message``).

    ``data`` is the message's data as text (JSON for anything but a string, binary
    summarised), cut to ``stderr_line_chars`` characters like a stderr line.
    """

    level: McpLogLevel
    logger: str | None
    data: str


class McpStderrLine(_Base, frozen=True, tag="mcp_stderr"):
    """One line the stdio server wrote to its standard error (never shown on the terminal)."""

    pid: int | None
    line: str


McpEvent: TypeAlias = (
    McpServerStarted
    | McpServerStopped
    | McpToolCall
    | McpToolsChanged
    | McpToolUnavailable
    | McpProgress
    | McpLogMessage
    | McpStderrLine
)
"""Any event a session reports (a tagged union, tag field ``type``)."""

McpEventSink: TypeAlias = Callable[[McpEvent], None]
"""The host callback for :data:`McpEvent` values: called synchronously from the session;
an exception it raises is ignored."""


def emit_safely(sink: McpEventSink | None, event: McpEvent) -> None:
    """Call ``sink`` with ``event``, ignoring what it raises."""
    if sink is None:
        return
    try:
        sink(event)
    except Exception:  # the host's logger failing must not break a session or its cleanup
        return
