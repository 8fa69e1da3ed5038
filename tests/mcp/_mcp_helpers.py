"""Helpers for the MCP tests: the test servers and a look at the process table."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def listening_server(
    argv: list[str], port: int, log: Path, env: dict[str, str]
) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``argv`` (a server on 127.0.0.1:``port``), wait until it accepts connections
    (its output in ``log``), and stop it at the end."""
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                pytest.fail(f"test server exited: {log.read_text()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"test server did not listen: {log.read_text()}")
                time.sleep(0.05)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def http_server(
    directory: Path, script: str = "writer"
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Start a test server (the writer) over HTTP; poll its port until it accepts
    connections."""
    port = free_port()
    argv = [sys.executable, str(SERVERS / f"{script}.py"), "http", str(port)]
    env = {"NOTES_FILE": str(directory / "notes.txt"), "PATH": "/usr/bin:/bin"}
    with listening_server(argv, port, directory / "server.log", env) as process:
        yield f"http://127.0.0.1:{port}/mcp", process
