"""``mcp-serve --http HOST:PORT``: the MCP server over streamable HTTP, on Hypercorn.

The SDK's streamable HTTP app serves ``/mcp``; with tokens configured every request must
carry ``Authorization: Bearer TOKEN`` (compared in constant time by
:mod:`deputy_runtime.service.auth`), else it is answered 401 before the SDK sees it.
Without a token the command only listens on loopback, where the SDK's DNS-rebinding
protection (Host and Origin must be loopback) is on. SIGTERM or Ctrl-C stops the
listener; running calls are cancelled and settle (their owned resources and MCP servers
are cleaned up) before the server returns.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Sequence
from typing import Any

import anyio
from hypercorn.config import Config
from starlette.types import ASGIApp, Receive, Scope, Send

from ..service.auth import bearer_token, match_token
from ..service.server import hypercorn_serve

__all__ = ["BearerGate", "serve_http"]

#: Where the SDK's app answers MCP requests.
MCP_PATH = "/mcp"
# After SIGTERM: time for cancelled calls to settle and their answers to be sent.
_GRACE_SECONDS = 15.0


class BearerGate:
    """ASGI middleware: an HTTP request without one of ``tokens`` is answered 401."""

    __slots__ = ("app", "tokens")

    def __init__(self, app: ASGIApp, tokens: Sequence[str]) -> None:
        self.app = app
        self.tokens = tuple(tokens)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)  # lifespan: the SDK's session manager
            return
        header: str | None = None
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                header = value.decode("latin-1")
        if match_token(bearer_token(header), self.tokens) is None:
            body = json.dumps({"error": "unauthorized: send Authorization: Bearer TOKEN"})
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b'Bearer realm="deputy-runtime"'),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body.encode()})
            return
        await self.app(scope, receive, send)


async def serve_http(server: Any, host: str, port: int, tokens: Sequence[str] | None) -> None:
    """Serve ``server`` (the SDK's low-level server) until SIGTERM or SIGINT."""
    app: ASGIApp = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    if tokens:
        app = BearerGate(app, tokens)
    hyper = Config()
    hyper.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    hyper.graceful_timeout = _GRACE_SECONDS
    hyper.accesslog = None
    hyper.errorlog = "-"
    stopping = anyio.Event()

    async def watch() -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                stopping.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        done = anyio.Event()

        async def listen() -> None:
            # In a task of its own, as serve's server does: Hypercorn's shutdown cancels
            # its own tasks, which must end this task, not the command's.
            try:
                await hypercorn_serve(app, hyper, stopping.wait)
            finally:
                done.set()

        tg.start_soon(listen)
        shown = f"[{host}]" if ":" in host else host
        print(
            f"deputy-runtime mcp-serve: listening on http://{shown}:{port}{MCP_PATH}",
            file=sys.stderr,
            flush=True,
        )
        await done.wait()
        tg.cancel_scope.cancel()
    print("deputy-runtime mcp-serve: stopped", file=sys.stderr, flush=True)
