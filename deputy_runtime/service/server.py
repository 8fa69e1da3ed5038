"""Serving the app with Hypercorn on the running anyio backend, and shutting down cleanly.

Hypercorn is the ASGI server because it runs natively on both asyncio and trio (uvicorn
is asyncio-only), so the runtime's runs are driven on whichever backend ``--backend``
chose. SIGTERM or SIGINT: the listener closes (no new connection is accepted), the run
manager interrupts every run, cancels those still active after the grace period and
waits until every one has settled and cleaned its owned resources; event streams then
end with their runs' final events, Hypercorn finishes the open responses, and
:func:`serve_forever` returns normally (the command exits 0).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any, cast

import anyio
import sniffio
from hypercorn.config import Config
from starlette.types import ASGIApp

from ..runtime import LeadAgent
from .config import Resolved, ServiceConfig
from .runs import RunManager

__all__ = ["hypercorn_serve", "serve_forever"]

# Beyond the grace period: time for owned cleanups (at most 10 s each, in parallel) and
# for streams to send their final events before Hypercorn drops what is left.
_DRAIN_SECONDS = 15.0


async def serve_forever(
    config: ServiceConfig,
    *,
    agents: tuple[str, ...],
    make_lead: Callable[[Resolved], LeadAgent],
    make_app: Callable[[RunManager], ASGIApp],
    host: str,
    port: int,
) -> None:
    """Serve until SIGTERM or SIGINT, then shut down as the module docstring says."""
    hyper = Config()
    hyper.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    hyper.graceful_timeout = config.shutdown_grace + _DRAIN_SECONDS
    hyper.accesslog = None
    hyper.errorlog = "-"
    stopping = anyio.Event()
    async with anyio.create_task_group() as runs:
        manager = RunManager(config, agents=agents, make_lead=make_lead, task_group=runs)
        app = make_app(manager)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_watch_signals, stopping)
            server_done = anyio.Event()

            async def server() -> None:
                try:
                    await hypercorn_serve(app, hyper, stopping.wait)
                finally:
                    server_done.set()

            tg.start_soon(server)
            await stopping.wait()
            print("deputy-runtime serve: shutting down", file=sys.stderr, flush=True)
            await manager.shutdown()
            await server_done.wait()
            tg.cancel_scope.cancel()
    print("deputy-runtime serve: stopped", file=sys.stderr, flush=True)


async def _watch_signals(stopping: anyio.Event) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            stopping.set()


async def hypercorn_serve(
    app: ASGIApp, hyper: Config, trigger: Callable[[], Awaitable[None]]
) -> None:
    """Serve ``app`` with Hypercorn on the running backend until ``trigger`` returns."""
    # Starlette's and Hypercorn's ASGI type aliases describe the same protocol differently.
    framework = cast(Any, app)
    if sniffio.current_async_library() == "trio":
        from hypercorn.trio import serve as trio_serve

        await trio_serve(framework, hyper, shutdown_trigger=trigger)
    else:
        from hypercorn.asyncio import serve as asyncio_serve

        await asyncio_serve(framework, hyper, shutdown_trigger=trigger)
