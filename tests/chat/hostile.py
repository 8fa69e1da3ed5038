"""A hostile HTTP server on a real socket (127.0.0.1, ephemeral port) for provider tests.

Unlike ``loopback.py`` (a well-behaved ``http.server`` that follows a script), this server
speaks raw bytes over the socket, so a test controls every byte and every pause: it can
truncate a body, stall, trickle one byte at a time, send a gzip bomb, send bytes that are
not HTTP at all, or stream forever. It runs in a background thread (one thread per
connection), so it serves the asyncio and trio test backends alike. Every behaviour stops
as soon as the client goes away or the server is closed, so no test leaves a thread
spinning.
"""

from __future__ import annotations

import gzip
import itertools
import json
import select
import socket
import socketserver
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import aclosing, suppress
from dataclasses import dataclass, field
from typing import Any

from deputy_runtime.chat import AssistantTurn, ContentText, ModelRequest, Turn
from deputy_runtime.chat._anthropic import AnthropicProvider
from deputy_runtime.chat._http import HTTPProvider, ResponseLimits, RetryPolicy
from deputy_runtime.chat._openai import OpenAIProvider
from deputy_runtime.errors import ProviderError

__all__ = [
    "Conn",
    "HostileServer",
    "chunked",
    "drip",
    "gzip_bomb",
    "raw",
    "respond",
]


class ClientLeft(Exception):
    """The client closed the connection (or the server is shutting down)."""


@dataclass
class Conn:
    """One accepted connection, with helpers that stop when the client leaves."""

    sock: socket.socket
    stop: threading.Event
    sent: int = 0

    def send(self, data: bytes) -> None:
        if self.stop.is_set():
            raise ClientLeft
        try:
            self.sock.sendall(data)
        except OSError as exc:
            raise ClientLeft from exc
        self.sent += len(data)

    def pause(self, seconds: float) -> None:
        """Wait ``seconds`` (forever when negative), ending early when the client leaves."""
        end = None if seconds < 0 else time.monotonic() + seconds
        while True:
            if self.stop.is_set():
                raise ClientLeft
            left = 0.02 if end is None else min(0.02, end - time.monotonic())
            if left <= 0:
                return
            readable, _, _ = select.select([self.sock], [], [], left)
            if readable:
                try:
                    if self.sock.recv(4096) == b"":
                        raise ClientLeft
                except OSError as exc:
                    raise ClientLeft from exc


Behaviour = Callable[[Conn], None]


def _head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} X"] + [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def respond(
    status: int = 200,
    headers: dict[str, str] | None = None,
    body: bytes = b"",
    *,
    cut: int | None = None,
) -> Behaviour:
    """A content-length response; ``cut`` sends only that many body bytes, then closes."""

    def run(conn: Conn) -> None:
        all_headers = {"content-length": str(len(body)), **(headers or {})}
        conn.send(_head(status, all_headers) + (body if cut is None else body[:cut]))

    return run


def chunked(
    pieces: Callable[[], Iterable[bytes]],
    *,
    status: int = 200,
    headers: dict[str, str] | None = None,
    interval: float = 0.0,
    end: str = "complete",
) -> Behaviour:
    """A chunked response from a fresh (possibly endless) iterable of pieces.

    ``interval`` pauses between pieces (a trickle); ``end`` is ``"complete"`` (the last
    chunk), ``"hang"`` (stay silent until the client leaves) or ``"close"`` (mid-body).
    """

    def run(conn: Conn) -> None:
        conn.send(_head(status, {"transfer-encoding": "chunked", **(headers or {})}))
        for piece in pieces():
            if piece:
                conn.send(b"%x\r\n%s\r\n" % (len(piece), piece))
            if interval:
                conn.pause(interval)
        if end == "complete":
            conn.send(b"0\r\n\r\n")
        elif end == "hang":
            conn.pause(-1)

    return run


def raw(data: bytes, *, then: str = "close") -> Behaviour:
    """Bytes straight onto the socket (not necessarily HTTP); then close or hang."""

    def run(conn: Conn) -> None:
        conn.send(data)
        if then == "hang":
            conn.pause(-1)

    return run


def drip(data: Callable[[], Iterable[bytes]], *, interval: float) -> Behaviour:
    """Raw bytes (the status line and headers too), one piece every ``interval`` seconds."""

    def run(conn: Conn) -> None:
        for piece in data():
            conn.send(piece)
            conn.pause(interval)

    return run


def gzip_bomb(decoded_mib: int, *, content_type: str = "application/json") -> Behaviour:
    """A gzip body of about ``decoded_mib`` KiB compressed that inflates to that many MiB.

    Built from one compressed MiB of zeros repeated (each block ends in a full flush, so
    the copies are identical), the way real bombs are: its size is ~1/1000 of what it
    inflates to. The trailer's checksum is not valid; a client that inflates it all
    would only find out at the end.
    """
    body = bomb_bytes(decoded_mib)
    return respond(200, {"content-type": content_type, "content-encoding": "gzip"}, body)


def bomb_bytes(decoded_mib: int) -> bytes:
    zeros = bytes(1024 * 1024)
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    first = comp.compress(zeros) + comp.flush(zlib.Z_FULL_FLUSH)
    block = comp.compress(zeros) + comp.flush(zlib.Z_FULL_FLUSH)
    return first + block * (decoded_mib - 1) + comp.flush()


def gzipped(body: bytes) -> bytes:
    return gzip.compress(body)


def forever(*pieces: bytes) -> Callable[[], Iterator[bytes]]:
    """An endless repetition of ``pieces`` (a fresh iterator per request)."""
    return lambda: itertools.cycle(pieces)


def once(*pieces: bytes) -> Callable[[], Iterable[bytes]]:
    return lambda: pieces


def trickle(data: bytes, *, repeat: bool = False) -> Callable[[], Iterator[bytes]]:
    """``data`` one byte at a time (endlessly when ``repeat``)."""

    def gen() -> Iterator[bytes]:
        source = itertools.cycle(data) if repeat else iter(data)
        for byte in source:
            yield bytes((byte,))

    return gen


@dataclass
class HostileServer:
    """Serves every request with ``behaviour``; use as a context manager.

    ``requests`` counts the requests read; ``bytes_sent`` the response bytes written.
    """

    behaviour: Behaviour
    requests: int = 0
    bytes_sent: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        server = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                sock: socket.socket = self.request
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.settimeout(10)  # a send the client never drains cannot block forever
                if not _read_request(sock):
                    return
                with server._lock:
                    server.requests += 1
                conn = Conn(sock, server._stop)
                try:
                    server.behaviour(conn)
                except ClientLeft:
                    pass
                finally:
                    with server._lock:
                        server.bytes_sent += conn.sent
                    with suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.01,))
        self._thread.daemon = True

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


class _Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True  # a connection thread never keeps the test process alive


def _read_request(sock: socket.socket) -> bool:
    """Read one request (head and content-length body); False if the client went away."""
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            more = sock.recv(65536)
        except OSError:
            return False
        if not more:
            return False
        data += more
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        try:
            more = sock.recv(65536)
        except OSError:
            return False
        if not more:
            return False
        body += more
    return True


# -- what the providers under test are given ---------------------------------------------

KEY = "sk-hostile-secret-0123456789"

OK = {
    "openai": {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hi there!"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    },
    "anthropic": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "content": [{"type": "text", "text": "Hi there!"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 5, "output_tokens": 2},
    },
}

SSE_HEADERS = {"content-type": "text/event-stream"}
JSON_HEADERS = {"content-type": "application/json"}


def text_event(kind: str, text: str = "tick ") -> bytes:
    """One SSE record carrying a text delta, as each wire format sends it."""
    if kind == "openai":
        chunk = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
        return f"data: {json.dumps(chunk)}\n\n".encode()
    delta = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": text},
    }
    return f"event: content_block_delta\ndata: {json.dumps(delta)}\n\n".encode()


def stream_head(kind: str) -> bytes:
    """The records that open a stream (none for Chat Completions)."""
    if kind == "openai":
        return b""
    start = {"type": "message_start", "message": {**OK["anthropic"], "content": []}}
    block = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": ""},
    }
    return (
        f"event: message_start\ndata: {json.dumps(start)}\n\n"
        f"event: content_block_start\ndata: {json.dumps(block)}\n\n"
    ).encode()


REQUEST = ModelRequest(None, (Turn("user", (ContentText("hello"),)),))


def make(kind: str, url: str, limits: ResponseLimits | None = None, **kw: Any) -> HTTPProvider:
    """A provider of ``kind`` against ``url`` with tiny retry waits."""
    kw.setdefault("retry", RetryPolicy(initial_delay=0.001, max_delay=0.004))
    kw.setdefault("api_key", KEY)
    cls = OpenAIProvider if kind == "openai" else AnthropicProvider
    return cls("m", base_url=url + "/v1", limits=limits, **kw)


async def outcome(provider: HTTPProvider, stream: bool) -> AssistantTurn | ProviderError:
    """The call's final turn or the ProviderError it raised (anything else propagates)."""
    try:
        if stream:
            last: Any = None
            async with aclosing(provider.stream(REQUEST)) as items:  # type: ignore[type-var]
                async for item in items:
                    last = item
            assert isinstance(last, AssistantTurn)
            return last
        return await provider.complete(REQUEST)
    except ProviderError as exc:
        return exc
    finally:
        await provider.aclose()
