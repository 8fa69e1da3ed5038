"""The HTTP routes of ``deputy-runtime serve`` (Starlette), and the guard in front of them.

Every route but ``/healthz`` and the web page's own files (``/``, ``/app.js``,
``/app.css``, ``/favicon.ico``, which hold no data and no secret) needs
``Authorization: Bearer TOKEN``;
without a valid token the answer is 401. Each authenticated request counts against its
token's rate (429 with ``Retry-After`` when over it). Bodies over ``max_body_bytes`` are
refused with 413 before they are read in full; a body that is not JSON is 400, and one
that does not fit :class:`~.config.RunRequest` or the server's ceilings is 422, the
message naming the field. Every error, an unknown route or method and an unexpected
failure included, is ``{"error": message}`` as JSON.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import anyio
import msgspec
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..definitions import AgentDefinition
from ..tracing import continue_trace
from .auth import bearer_token, match_token
from .config import RunRequest, RunRequestError, resolve_request
from .page import PAGE_FILES, PAGE_HEADERS
from .ratelimit import RateLimiter
from .runs import (
    Run,
    RunManager,
    RunSetupError,
    RunStatus,
    ServiceBusyError,
    ServiceClosingError,
)

__all__ = ["KEEPALIVE_SECONDS", "PUBLIC_PATHS", "build_app"]

#: Served without a token: they carry no data (the page asks the user for the token).
PUBLIC_PATHS = frozenset({"/healthz", *PAGE_FILES})
#: An SSE comment is sent when a stream has been quiet this long, so proxies keep it open
#: and a client that went away is noticed.
KEEPALIVE_SECONDS = 15.0
_JSON = "application/json"


def _json(body: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    return Response(msgspec.json.encode(body), status, headers=headers, media_type=_JSON)


def _error(status: int, message: str, headers: Mapping[str, str] | None = None) -> Response:
    return _json({"error": message}, status, headers)


class Guard:
    """ASGI middleware: bearer token (constant-time compare) and per-token rate limit.

    ``tokens`` is ``None`` only under ``--insecure-no-auth`` (loopback only): every
    request is then client 0.
    """

    def __init__(self, app: ASGIApp, tokens: Sequence[str] | None, limiter: RateLimiter) -> None:
        self.app = app
        self.tokens = tokens
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in PUBLIC_PATHS:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if self.tokens is None:
            owner: int | None = 0
        else:
            owner = match_token(bearer_token(headers.get("authorization")), self.tokens)
        if owner is None:
            response = _error(
                401, "missing or invalid bearer token", {"WWW-Authenticate": "Bearer"}
            )
            await response(scope, receive, send)
            return
        wait = self.limiter.take(owner)
        if wait is not None:
            response = _error(429, "too many requests for this token", {"Retry-After": str(wait)})
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})["owner"] = owner
        await self.app(scope, receive, send)


class _BodyTooLarge(Exception):
    pass


#: How much of an oversize body of unknown length is read and dropped before the 413.
_DRAIN_BYTES = 1 << 20


async def _read_body(request: Request, limit: int) -> bytes:
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise _BodyTooLarge
    body = bytearray()
    seen = 0
    async for chunk in request.stream():
        seen += len(chunk)
        if seen <= limit:
            body += chunk
        elif seen > limit + _DRAIN_BYTES:
            break
    # An oversize body of unknown length is read (and dropped) up to a bound before the
    # 413 goes out: a client still sending when the server answers and closes would see a
    # reset connection instead of the answer.
    if seen > limit:
        raise _BodyTooLarge
    return bytes(body)


class AgentView(msgspec.Struct, frozen=True):
    """One entry of ``GET /agents``."""

    name: str
    description: str
    tools: tuple[str, ...]
    model: str
    max_requests: int | None
    permission_mode: str | None
    color: str | None


def _agent_view(definition: AgentDefinition) -> AgentView:
    return AgentView(
        definition.name,
        definition.description,
        tuple(t.name for t in definition.tools),
        definition.model,
        definition.max_requests,
        definition.permission_mode,
        definition.color,
    )


def build_app(
    manager: RunManager,
    definitions: Mapping[str, AgentDefinition],
    tokens: Sequence[str] | None,
) -> ASGIApp:
    """The service as an ASGI app: routes behind the :class:`Guard`."""
    config = manager.config
    agents = [_agent_view(d) for d in definitions.values()]

    def owned_run(request: Request) -> Run | None:
        return manager.get(request.state.owner, request.path_params["run_id"])

    async def healthz(request: Request) -> Response:
        if manager.closing:
            return _json({"status": "closing"}, 503)
        return _json({"status": "ok"})

    async def list_agents(request: Request) -> Response:
        return _json({"agents": agents})

    async def start_run(request: Request) -> Response:
        try:
            body = await _read_body(request, config.max_body_bytes)
        except _BodyTooLarge:
            return _error(413, f"request body is over {config.max_body_bytes} bytes")
        try:
            wanted = msgspec.json.decode(body, type=RunRequest)
        except msgspec.ValidationError as exc:
            return _error(422, f"invalid run request: {exc}")
        except msgspec.DecodeError as exc:
            return _error(400, f"request body is not valid JSON: {exc}")
        try:
            resolved = resolve_request(wanted, config, manager.agents)
        except RunRequestError as exc:
            return _error(422, f"invalid run request: {exc}")
        try:
            # A caller's W3C traceparent header: the run's spans continue its trace (the
            # run's task copies this context when it is spawned).
            with continue_trace(request.headers):
                run = manager.start(request.state.owner, resolved)
        except ServiceBusyError as exc:
            return _error(429, str(exc), {"Retry-After": "1"})
        except ServiceClosingError as exc:
            return _error(503, str(exc))
        except RunSetupError as exc:
            return _error(500, str(exc))
        return _json(
            {"id": run.id, "status": run.status.value, "events": f"/runs/{run.id}/events"},
            201,
            {"Location": f"/runs/{run.id}"},
        )

    async def list_runs(request: Request) -> Response:
        runs = manager.runs_of(request.state.owner)
        return _json({"runs": [run.summary() for run in runs]})

    async def get_run(request: Request) -> Response:
        run = owned_run(request)
        if run is None:
            return _error(404, "no such run")
        return _json(run.view())

    async def interrupt_run(request: Request) -> Response:
        run = owned_run(request)
        if run is None:
            return _error(404, "no such run")
        if run.status is not RunStatus.RUNNING:
            return _error(409, f"the run has already ended ({run.status.value})")
        run.interrupt()
        return _json({"id": run.id, "interrupting": True}, 202)

    async def interrupt_delegation(request: Request) -> Response:
        run = owned_run(request)
        if run is None:
            return _error(404, "no such run")
        delegation_id = request.path_params["delegation_id"]
        if run.lead.interrupt_subagent(delegation_id):
            return _json({"id": run.id, "delegation_id": delegation_id, "interrupting": True}, 202)
        if any(r.delegation_id == delegation_id for r in run.lead.list_subagents()):
            return _error(409, "the delegation has already ended")
        return _error(404, "no such delegation in this run")

    async def events(request: Request) -> Response:
        run = owned_run(request)
        if run is None:
            return _error(404, "no such run")
        last = request.headers.get("last-event-id", "").strip() or "0"
        if not last.isdigit():
            return _error(400, f"Last-Event-ID must be a whole number, got {last[:40]!r}")
        return StreamingResponse(
            _sse(run, int(last)),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def page_file(request: Request) -> Response:
        body, media_type = PAGE_FILES[request.url.path]
        return Response(body, media_type=media_type, headers=PAGE_HEADERS)

    routes = [
        *(Route(path, page_file, methods=["GET"]) for path in PAGE_FILES),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/agents", list_agents, methods=["GET"]),
        Route("/runs", start_run, methods=["POST"]),
        Route("/runs", list_runs, methods=["GET"]),
        Route("/runs/{run_id}", get_run, methods=["GET"]),
        Route("/runs/{run_id}/events", events, methods=["GET"]),
        Route("/runs/{run_id}/interrupt", interrupt_run, methods=["POST"]),
        Route(
            "/runs/{run_id}/delegations/{delegation_id}/interrupt",
            interrupt_delegation,
            methods=["POST"],
        ),
    ]
    limiter = RateLimiter(config.rate, config.burst)
    handlers = {HTTPException: _http_error, Exception: _server_error}
    return Guard(Starlette(routes=routes, exception_handlers=handlers), tokens, limiter)


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no such route, wrong method) in the JSON error shape."""
    if not isinstance(exc, HTTPException):
        return await _server_error(request, exc)
    if exc.status_code == 404:
        message = f"no route {request.method} {request.url.path}"
    elif exc.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    else:
        message = exc.detail
    return _error(exc.status_code, message, exc.headers)


async def _server_error(request: Request, exc: Exception) -> Response:
    """An unexpected failure: a JSON 500 naming the exception's type, not its text."""
    return _error(500, f"internal server error ({type(exc).__name__})")


async def _sse(run: Run, after: int) -> AsyncIterator[bytes]:
    """The run's events after ``after`` as server-sent events, then ``event: end``."""
    log = run.log
    while True:
        dropped, items = log.since(after)
        if dropped:
            yield b'event: truncated\ndata: {"dropped": %d}\n\n' % dropped
        if items:
            yield b"".join(b"id: %d\ndata: %s\n\n" % (seq, data) for seq, data in items)
            after = items[-1][0]
        if log.closed and after >= log.last_seq:
            await run.done.wait()  # the status is final once the log is closed
            end = msgspec.json.encode({"status": run.status.value, "events": log.last_seq})
            yield b"event: end\ndata: %s\n\n" % end
            return
        with anyio.move_on_after(KEEPALIVE_SECONDS) as waited:
            await log.wait_beyond(after)
        if waited.cancelled_caught:
            yield b": keepalive\n\n"
