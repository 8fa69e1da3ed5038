"""Using the asyncio-only Temporal SDK from a trio (or any anyio) host.

Temporal's Python SDK runs only on asyncio. A trio application talks to it through a
:class:`TemporalBridge`: a daemon thread running its own asyncio event loop, to which
coroutine functions are submitted; the trio task waits in a worker thread
(``anyio.to_thread``), so the trio loop is never blocked. Cancelling the waiting task
cancels the submitted coroutine. This module imports nothing from Temporal itself.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from .._tracing import STATE

__all__ = ["TemporalBridge", "run_in_asyncio_thread"]

T = TypeVar("T")


class TemporalBridge:
    """An asyncio event loop in a thread of its own, for asyncio-only clients.

    ``async with TemporalBridge() as bridge: await bridge.call(fn, *args)`` runs
    ``fn(*args)`` (a coroutine function) on the bridge's loop and returns its result.
    Objects created there (a Temporal ``Client``, a worker) belong to that loop: use them
    only through :meth:`call`. Leaving the block cancels whatever is still running on the
    loop and joins the thread.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the loop's thread (idempotent while running)."""
        if self._thread is not None:
            return
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        thread = threading.Thread(target=serve, name="deputy-temporal-asyncio", daemon=True)
        thread.start()
        ready.wait()
        self._loop, self._thread = loop, thread

    async def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``fn(*args)`` on the bridge's loop and wait for it without blocking.

        Args:
            fn: An asyncio coroutine function.
            *args: Its positional arguments.

        Returns:
            What the coroutine returned (its exception is raised here).

        Raises:
            RuntimeError: The bridge is not started.
        """
        loop = self._loop
        if loop is None:
            raise RuntimeError("TemporalBridge.call: the bridge is not started")

        carried = _trace_context()

        async def job() -> T:
            if carried is None:
                return await fn(*args)
            from opentelemetry import context as otel_context

            token = otel_context.attach(carried)
            try:
                return await fn(*args)
            finally:
                otel_context.detach(token)

        # A fresh context: the caller's would tell sniffio (and so anyio) that the job
        # runs on the host's library (trio), not on the bridge's asyncio loop. Only the
        # caller's OpenTelemetry context is carried over, while tracing is on, so spans the
        # job starts (a ``start_lead``) continue the caller's trace.
        future = contextvars.Context().run(asyncio.run_coroutine_threadsafe, job(), loop)
        try:
            return await anyio.to_thread.run_sync(future.result, abandon_on_cancel=True)
        finally:
            if not future.done():
                future.cancel()

    def close(self) -> None:
        """Cancel the loop's remaining tasks, stop it and join its thread (blocking)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        self._loop = self._thread = None

        async def shutdown() -> None:
            current = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not current]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await loop.shutdown_asyncgens()

        try:
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result()
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()

    async def __aenter__(self) -> TemporalBridge:
        await anyio.to_thread.run_sync(self.start)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self.close)


async def run_in_asyncio_thread(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run one asyncio-only coroutine function from any anyio backend.

    It runs on a fresh asyncio loop in a thread of its own, closed afterwards.

    Args:
        fn: An asyncio coroutine function.
        *args: Its positional arguments.

    Returns:
        What the coroutine returned.
    """
    async with TemporalBridge() as bridge:
        return await bridge.call(fn, *args)


def _trace_context() -> Any:
    """The caller's OpenTelemetry context while tracing is on, else ``None``."""
    if STATE.tracer is None:
        return None
    from opentelemetry import context as otel_context

    return otel_context.get_current()
