"""Helpers for the MCP tests: the test servers and a look at the process table."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from deputy_runtime.mcp import McpEvent, McpLimits, McpServer, McpStdio

SERVERS = Path(__file__).resolve().parent / "servers"


def stdio_server(
    script: str,
    *,
    name: str | None = None,
    args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    limits: McpLimits | None = None,
    events: list[McpEvent] | None = None,
) -> McpServer:
    """A test server from ``servers/`` run with this interpreter over stdio."""
    return McpServer(
        name or script,
        McpStdio(
            command=sys.executable, args=(str(SERVERS / f"{script}.py"), *args), env=env or {}
        ),
        limits=limits,
        on_event=None if events is None else events.append,
    )


def process_left(pid: int) -> bool:
    """Whether ``pid`` is still a process of ours: running, or exited but not reaped.

    Read from /proc: a pid that is gone, or that now belongs to an unrelated process
    (reused, with another parent), is not ours.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[1]) == os.getpid()


def of_type(events: list[McpEvent], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def assert_reaped(pid: int | None) -> None:
    """The server process ``pid`` existed and is gone (exited and reaped)."""
    assert pid is not None
    assert not process_left(pid)
