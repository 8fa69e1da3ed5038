"""The stdio transport: one server subprocess, its pipes, and its guaranteed end.

The SDK's own ``stdio_client`` writes the server's stderr to a file and does not expose
the process, so this module runs the process itself and hands the SDK's
:class:`~mcp.ClientSession` the same pair of message streams. It adds what the runtime
needs: a bound on one message's size, stderr kept in a ring buffer (and reported as
events) instead of reaching the terminal, the pid, and a stop that always ends in a
reaped process: close stdin, wait ``close_grace``, SIGTERM the server's process group,
wait ``terminate_grace``, SIGKILL it. The stop runs in a shielded cancel scope with every
wait bounded, so neither a cancelled caller nor a hung server can leave a process behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import anyio.abc
import mcp.types as mcp_types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from ..errors import McpStartError
from ._config import McpLimits, McpStdio
from ._events import McpStopKind

__all__ = ["StdioTransport"]

_POLL = 0.01
# After SIGKILL the kernel ends the process at once; this only bounds a wait for an
# unkillable (uninterruptible sleep) process.
_KILL_WAIT = 5.0
_PIPE_ERRORS = (
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    ConnectionError,
    OSError,
)

_Item = SessionMessage | Exception
_Streams = tuple[MemoryObjectReceiveStream[_Item], MemoryObjectSendStream[SessionMessage]]


class StdioTransport:
    """One run of a stdio server. Use :meth:`open` once; read the fields afterwards."""

    def __init__(
        self,
        server: str,
        config: McpStdio,
        limits: McpLimits,
        on_stderr: Callable[[int | None, str], None],
    ) -> None:
        self.server = server
        self.config = config
        self.limits = limits
        self.pid: int | None = None
        self.exit_code: int | None = None
        self.stop_kind: McpStopKind | None = None
        #: Why the server's stream ended before it was closed (crash, oversized message).
        self.failure: str | None = None
        self.stderr: deque[str] = deque(maxlen=limits.stderr_lines)
        self._on_stderr = on_stderr
        self._closing = False

    @asynccontextmanager
    async def open(self) -> AsyncIterator[_Streams]:
        """Spawn the server; yield (read, write) message streams; stop and reap it on exit."""
        cfg = self.config
        if cfg.cwd is not None and not await anyio.Path(cfg.cwd).is_dir():
            raise McpStartError(
                f"MCP server {self.server!r}: cwd {cfg.cwd!r} is not an existing directory",
                server=self.server,
            )
        try:
            # Shielded: a cancellation arriving while the process is being created would
            # leave a process this transport never learned the pid of. Spawning is quick,
            # and the cancellation is delivered at the next checkpoint, inside the try
            # below, whose cleanup stops the process.
            with anyio.CancelScope(shield=True):
                process = await anyio.open_process(
                    [cfg.command, *cfg.args],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=get_default_environment() | cfg.env,
                    cwd=cfg.cwd,
                    # Its own process group, so the stop can signal whatever it spawned too.
                    start_new_session=True,
                )
        except OSError as exc:
            raise McpStartError(
                f"MCP server {self.server!r}: cannot start {cfg.command!r}: {exc.strerror or exc}",
                server=self.server,
            ) from exc
        # No await between the spawn and the try below: a cancellation there would leak it.
        self.pid = process.pid
        read_send, read_recv = anyio.create_memory_object_stream[_Item](0)
        write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)
        try:
            async with anyio.create_task_group() as tg:
                readers_done = anyio.Event()
                tg.start_soon(self._pump_out, process, read_send, readers_done)
                tg.start_soon(self._pump_in, process, write_recv, read_send)
                tg.start_soon(self._pump_err, process)
                try:
                    yield read_recv, write_send
                finally:
                    with anyio.CancelScope(shield=True):
                        await self._stop(process, write_send, readers_done)
                    tg.cancel_scope.cancel()
        finally:
            for stream in (read_send, read_recv, write_send, write_recv):
                stream.close()
            with anyio.CancelScope(shield=True), anyio.move_on_after(_KILL_WAIT):
                await process.aclose()
            if self.exit_code is None:
                self.exit_code = process.returncode

    # -- pumps ---------------------------------------------------------------------

    async def _pump_out(
        self,
        process: anyio.abc.Process,
        read_send: MemoryObjectSendStream[_Item],
        done: anyio.Event,
    ) -> None:
        """Server stdout -> parsed messages, one per line, each at most max_message_bytes."""
        assert process.stdout is not None
        limit = self.limits.max_message_bytes
        buf = bytearray()
        deliver = True
        try:
            async for chunk in process.stdout:
                if not deliver:
                    continue  # keep draining so the server never blocks on a full pipe
                scan = len(buf)
                buf += chunk
                while True:
                    end = buf.find(b"\n", scan)
                    if end < 0:
                        break
                    line = bytes(buf[:end])
                    del buf[: end + 1]
                    scan = 0
                    if len(line) > limit:
                        deliver = self._oversized(read_send)
                        break
                    if line.strip():
                        item = _parse(line)
                        if isinstance(item, Exception):
                            # Servers that log to stdout break the protocol's framing;
                            # the line goes with their stderr, where a host looks.
                            self._stderr_line(b"[stdout, not JSON-RPC] " + line)
                        try:
                            await read_send.send(item)
                        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                            deliver = False
                            break
                if deliver and len(buf) > limit:
                    deliver = self._oversized(read_send)
                if not deliver:
                    buf.clear()
        except _PIPE_ERRORS:
            pass
        finally:
            if not self._closing and self.failure is None:
                self.failure = "closed its output (the process exited or crashed)"
            read_send.close()
            done.set()

    def _oversized(self, read_send: MemoryObjectSendStream[_Item]) -> bool:
        if not self._closing and self.failure is None:
            self.failure = (
                f"sent a message larger than max_message_bytes "
                f"({self.limits.max_message_bytes} bytes)"
            )
        read_send.close()  # the session sees the connection end
        return False

    async def _pump_in(
        self,
        process: anyio.abc.Process,
        write_recv: MemoryObjectReceiveStream[SessionMessage],
        read_send: MemoryObjectSendStream[_Item],
    ) -> None:
        """Session messages -> server stdin, one JSON line each."""
        assert process.stdin is not None
        try:
            async for message in write_recv:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await process.stdin.send(data.encode() + b"\n")
        except _PIPE_ERRORS:
            if not self._closing and self.failure is None:
                self.failure = "stopped reading its input (the process exited or crashed)"
            read_send.close()

    async def _pump_err(self, process: anyio.abc.Process) -> None:
        """Server stderr -> the ring buffer and the stderr callback, line by line."""
        assert process.stderr is not None
        width = self.limits.stderr_line_chars
        buf = bytearray()
        try:
            async for chunk in process.stderr:
                buf += chunk
                while True:
                    end = buf.find(b"\n")
                    if end < 0:
                        break
                    self._stderr_line(bytes(buf[:end]))
                    del buf[: end + 1]
                if len(buf) > width * 4:  # a long line without a break: report what we have
                    self._stderr_line(bytes(buf))
                    buf.clear()
        except _PIPE_ERRORS:
            pass
        finally:
            if buf:
                self._stderr_line(bytes(buf))

    def _stderr_line(self, raw: bytes) -> None:
        line = raw.decode("utf-8", "replace").rstrip("\r")[: self.limits.stderr_line_chars]
        self.stderr.append(line)
        self._on_stderr(self.pid, line)

    # -- stopping ------------------------------------------------------------------

    async def _stop(
        self,
        process: anyio.abc.Process,
        write_send: MemoryObjectSendStream[SessionMessage],
        readers_done: anyio.Event,
    ) -> None:
        """Close, then escalate; every wait bounded. Runs shielded."""
        exited_first = process.returncode is not None or self.failure is not None
        self._closing = True
        write_send.close()
        assert process.stdin is not None
        with contextlib.suppress(*_PIPE_ERRORS):
            await process.stdin.aclose()
        kind = McpStopKind.CLOSED
        if not await _wait_exit(process, self.limits.close_grace):
            kind = McpStopKind.TERMINATED
            _signal_group(process, signal.SIGTERM)
            if not await _wait_exit(process, self.limits.terminate_grace):
                kind = McpStopKind.KILLED
                _signal_group(process, signal.SIGKILL)
                await _wait_exit(process, _KILL_WAIT)
        with anyio.move_on_after(1.0):
            await readers_done.wait()
        self.exit_code = process.returncode
        self.stop_kind = McpStopKind.FAILED if exited_first else kind


def _parse(line: bytes) -> _Item:
    """One stdout line as a message, or the parse error (the session reports it)."""
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc


async def _wait_exit(process: anyio.abc.Process, within: float) -> bool:
    """Whether the process exited within ``within`` seconds, by polling its return code.

    Not ``process.wait()``: on asyncio that also waits for the pipes to close, which a
    grandchild holding them open would delay. Nothing signals an exit as an event, so
    this polls.
    """
    with anyio.move_on_after(within):
        while process.returncode is None:  # noqa: ASYNC110
            await anyio.sleep(_POLL)
        return True
    return process.returncode is not None


def _signal_group(process: anyio.abc.Process, sig: signal.Signals) -> None:
    """Send ``sig`` to the server's process group (it leads one, see ``open``).

    Only called while the leader has not been seen to exit, so the group id cannot have
    been reused by an unrelated process.
    """
    if process.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)
