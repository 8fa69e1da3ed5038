"""Sessions hosted in one task group: shared per server, or owned per holder.

A session must be left by the task that entered it; a delegation's acquire and release may
run in different tasks. The pool runs each session in a task of its own task group, so any
task may start one and any task may release it. Leaving the pool closes every session it
still hosts and waits until each is closed (for stdio: its process reaped).
"""

from __future__ import annotations

from types import TracebackType

import anyio
import anyio.abc

from ..errors import McpError
from ._server import McpServer
from ._session import McpSession, SessionState

__all__ = ["McpServerPool"]


class _Hosted:
    def __init__(self, session: McpSession) -> None:
        self.session = session
        self.stop = anyio.Event()
        self.done = anyio.Event()


class McpServerPool:
    """Starts and stops sessions in its own task group (enter it with ``async with``)."""

    def __init__(self) -> None:
        self._tg: anyio.abc.TaskGroup | None = None
        self._hosted: dict[McpSession, _Hosted] = {}
        self._shared: dict[str, McpSession] = {}
        self._locks: dict[str, anyio.Lock] = {}
        self._closed = False

    async def __aenter__(self) -> McpServerPool:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        self._closed = True
        for hosted in list(self._hosted.values()):
            hosted.stop.set()
        assert self._tg is not None
        return await self._tg.__aexit__(exc_type, exc, tb)

    def _check_open(self) -> anyio.abc.TaskGroup:
        if self._tg is None or self._closed:
            raise McpError("McpServerPool is not open: use it inside 'async with'")
        return self._tg

    async def _host(self, hosted: _Hosted, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        try:
            async with hosted.session:
                task_status.started()
                await hosted.stop.wait()
        finally:
            self._hosted.pop(hosted.session, None)
            hosted.done.set()

    async def owned(self, server: McpServer) -> McpSession:
        """Start a fresh session of ``server``; it lives until :meth:`release` or pool exit.

        Args:
            server: The server to start a session of.

        Returns:
            The started (READY) session.

        Raises:
            McpError: The pool is not open.
            McpStartError: The session did not start; its process is reaped first.
        """
        tg = self._check_open()
        hosted = _Hosted(server.session())
        self._hosted[hosted.session] = hosted
        try:
            await tg.start(self._host, hosted)
        except BaseException:
            self._hosted.pop(hosted.session, None)
            raise
        return hosted.session

    async def release(self, session: McpSession) -> None:
        """Close ``session`` and wait until it is closed, even if the caller is cancelled.

        A session the pool does not host (already released) is ignored.

        Args:
            session: A session from :meth:`owned` or :meth:`shared`.
        """
        hosted = self._hosted.get(session)
        if hosted is None:
            return
        if self._shared.get(session.name) is session:
            del self._shared[session.name]
        hosted.stop.set()
        with anyio.CancelScope(shield=True):
            await hosted.done.wait()

    async def shared(self, server: McpServer) -> McpSession:
        """The one session of ``server`` for everybody, started by its first user.

        Concurrent first users wait for the same start. A shared session whose server went
        away (FAILED) is closed and replaced by a new one on the next call.

        Args:
            server: The server to share; one pool shares one server per name.

        Returns:
            The READY shared session of ``server``.

        Raises:
            McpError: The pool is not open, or it already shares a different server of
                the same name.
            McpStartError: A new session did not start.
        """
        self._check_open()
        lock = self._locks.setdefault(server.name, anyio.Lock())
        async with lock:
            current = self._shared.get(server.name)
            if current is not None and current.server is not server:
                raise McpError(
                    f"McpServerPool already shares a different server named {server.name!r}",
                    server=server.name,
                )
            if current is not None and current.state is SessionState.READY:
                return current
            if current is not None:
                await self.release(current)
            session = await self.owned(server)
            self._shared[server.name] = session
            return session

    def sessions(self) -> tuple[McpSession, ...]:
        """The sessions the pool hosts now.

        Returns:
            The hosted sessions, shared and owned, in the order they were started.
        """
        return tuple(self._hosted)
