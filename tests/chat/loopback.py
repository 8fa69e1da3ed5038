"""A loopback HTTP/1.1 server on a real socket (127.0.0.1, ephemeral port) for provider tests.

It runs in a background thread with its own socket server, so it works the same under the
asyncio and trio test backends. Each request pops the next scripted :class:`Reply`;
every request is recorded (method, path, headers, body) so tests can assert on exactly
what the client sent and how many requests the server saw. Replies can be delayed, sent
as HTTP chunks of chosen sizes (one HTTP chunk reaches the client as one read), and can
end cleanly, with a TCP reset, truncated mid-body, or by hanging until the client leaves;
a reply can also reset the connection before sending anything ("drop").
"""

from __future__ import annotations

import json
import random
import select
import socket
import struct
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal, Self

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "recorded"

End = Literal["complete", "reset", "truncate", "hang", "drop"]


def load_exchanges(name: str) -> list[dict[str, Any]]:
    """The recorded exchanges of one fixture file (one JSON object per line)."""
    with (FIXTURES / name).open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@dataclass
class Reply:
    """One scripted HTTP response."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    chunks: Sequence[bytes] | None = None  # send with chunked encoding, one HTTP chunk each
    delay: float = 0.0  # seconds before the status line (interrupted if the client leaves)
    end: End = "complete"

    @classmethod
    def json(
        cls, obj: Any, status: int = 200, headers: dict[str, str] | None = None, delay: float = 0.0
    ) -> Reply:
        body = json.dumps(obj).encode()
        headers = {"content-type": "application/json", **(headers or {})}
        return cls(status, headers, body, delay=delay)

    @classmethod
    def sse(
        cls,
        text: str | bytes,
        *,
        sizes: int | Literal["random"] | None = "random",
        seed: int = 0,
        end: End = "complete",
        delay: float = 0.0,
    ) -> Reply:
        """An SSE body cut into chunks of ``sizes`` bytes (or random sizes 1..64)."""
        data = text.encode() if isinstance(text, str) else text
        return cls(
            200,
            {"content-type": "text/event-stream", "cache-control": "no-cache"},
            chunks=split(data, sizes, seed),
            delay=delay,
            end=end,
        )


def split(data: bytes, sizes: int | Literal["random"] | None, seed: int = 0) -> list[bytes]:
    """``data`` cut into pieces: fixed size, random sizes (seeded) or one piece."""
    if sizes is None:
        return [data]
    rng = random.Random(seed)
    out, pos = [], 0
    while pos < len(data):
        size = rng.randint(1, 64) if sizes == "random" else sizes
        out.append(data[pos : pos + size])
        pos += size
    return out


@dataclass
class Seen:
    """A request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class LoopbackServer:
    """Scripted HTTP server; use as a context manager. ``url`` is ``http://127.0.0.1:PORT``."""

    def __init__(self, replies: Iterable[Reply] | Callable[[Seen], Reply] = ()) -> None:
        self._handler: Callable[[Seen], Reply] | None = None
        self._queue: deque[Reply] = deque()
        if callable(replies):
            self._handler = replies
        else:
            self._queue.extend(replies)
        self.requests: list[Seen] = []
        self.disconnects = 0  # requests abandoned by the client while the server waited
        self.disconnected = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.005,))
        self._thread.daemon = True

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def add(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    def _next(self, seen: Seen) -> Reply:
        with self._lock:
            self.requests.append(seen)
            if self._handler is not None:
                return self._handler(seen)
            if not self._queue:
                return Reply.json({"error": {"message": "loopback: no scripted reply"}}, 599)
            return self._queue.popleft()

    def _client_left(self) -> None:
        with self._lock:
            self.disconnects += 1
        self.disconnected.set()

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def _wait_or_leave(sock: socket.socket, seconds: float, stop: threading.Event) -> bool:
    """Wait up to ``seconds`` (forever if negative); True if the client closed meanwhile."""
    waited = 0.0
    while not stop.is_set() and (seconds < 0 or waited < seconds):
        step = 0.02 if seconds < 0 else min(0.02, seconds - waited)
        readable, _, _ = select.select([sock], [], [], step)
        waited += step
        if readable:
            try:
                if sock.recv(1, socket.MSG_PEEK) == b"":
                    return True
            except OSError:
                return True
            if seconds < 0:
                return False  # the client sent more bytes; not a disconnect
    return False


def _make_handler(server: LoopbackServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def _serve(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            reply = server._next(Seen(self.command, self.path, headers, body))
            sock = self.connection
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if reply.delay and _wait_or_leave(sock, reply.delay, server._stop):
                server._client_left()
                self.close_connection = True
                return
            if reply.end == "drop":  # reset the connection before any response byte
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.close()
                self.close_connection = True
                return
            try:
                self._write(reply)
            except (BrokenPipeError, ConnectionResetError):
                server._client_left()
                self.close_connection = True

        def _write(self, reply: Reply) -> None:
            sock = self.connection
            self.send_response_only(reply.status)
            for key, value in reply.headers.items():
                self.send_header(key, value)
            if reply.chunks is None:
                self.send_header("content-length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)
                return
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            for piece in reply.chunks:
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            if reply.end == "complete":
                sock.sendall(b"0\r\n\r\n")
                return
            self.close_connection = True
            if reply.end == "reset":
                # SO_LINGER with a zero timeout turns close() into a TCP RST.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.close()
            elif reply.end == "truncate":
                sock.sendall(b"1f\r\npartial")  # a chunk that never completes
                sock.shutdown(socket.SHUT_RDWR)
            elif reply.end == "hang" and _wait_or_leave(sock, -1, server._stop):
                server._client_left()

    return Handler


# -- SSE bodies built from recorded (non-streamed) responses --------------------------------
#
# The recordings contain no streamed bodies (every recorded request used "stream": false),
# so the streaming tests re-encode each recorded response as the SSE stream the same API
# sends for it, following the documented wire format: text split into several deltas, tool
# arguments split into argument deltas, a usage-only chunk, the terminator. The official
# SDKs parse these streams back to the recorded content (tests/chat/test_*_sdk.py), which
# checks that the encoding is faithful.


def _pieces(text: str, n: int = 3) -> list[str]:
    if len(text) <= 1:
        return [text]
    step = max(1, len(text) // n)
    return [text[i : i + step] for i in range(0, len(text), step)]


def sse_record(data: Any, event: str | None = None) -> str:
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return (f"event: {event}\n" if event else "") + f"data: {payload}\n\n"


def openai_sse(response: dict[str, Any], *, usage: bool = True, done: bool = True) -> str:
    """A Chat Completions response as its stream of ``chat.completion.chunk`` records."""
    head: dict[str, Any] = {k: response[k] for k in ("id", "created", "model") if k in response}
    head["object"] = "chat.completion.chunk"
    choice = response["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        body = {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return sse_record({**body, "usage": None})

    out = [chunk({"role": "assistant", "content": "", "refusal": None})]
    for piece in _pieces(message.get("content") or ""):
        if piece:
            out.append(chunk({"content": piece}))
    for index, call in enumerate(message.get("tool_calls") or []):
        fn = call["function"]
        first = {"index": index, "id": call["id"], "type": "function"}
        out.append(
            chunk({"tool_calls": [{**first, "function": {"name": fn["name"], "arguments": ""}}]})
        )
        for piece in _pieces(fn["arguments"]):
            out.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    out.append(chunk({}, choice["finish_reason"]))
    if usage and "usage" in response:
        out.append(sse_record({**head, "choices": [], "usage": response["usage"]}))
    if done:
        out.append(sse_record("[DONE]"))
    return "".join(out)


def anthropic_sse(message: dict[str, Any], *, stop: bool = True) -> str:
    """A Messages response as its stream of named events."""
    usage = dict(message["usage"])
    start_usage = {k: v for k, v in usage.items() if k != "output_tokens"}
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    start["usage"] = {**start_usage, "output_tokens": 1}
    out = [sse_record({"type": "message_start", "message": start}, "message_start")]
    for index, block in enumerate(message["content"]):
        kind = block["type"]
        if kind == "text":
            first: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
        elif kind == "thinking":
            first = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": p} for p in _pieces(block["thinking"]) if p
            ]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "tool_use":
            first = {k: v for k, v in block.items() if k != "input"} | {"input": {}}
            raw = json.dumps(block["input"])
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(raw)]
        else:
            first, deltas = block, []
        out.append(
            sse_record(
                {"type": "content_block_start", "index": index, "content_block": first},
                "content_block_start",
            )
        )
        out.append(sse_record({"type": "ping"}, "ping"))
        for delta in deltas:
            out.append(
                sse_record(
                    {"type": "content_block_delta", "index": index, "delta": delta},
                    "content_block_delta",
                )
            )
        out.append(sse_record({"type": "content_block_stop", "index": index}, "content_block_stop"))
    end_delta = {
        "stop_reason": message["stop_reason"],
        "stop_sequence": message.get("stop_sequence"),
    }
    out.append(
        sse_record(
            {
                "type": "message_delta",
                "delta": end_delta,
                "usage": {"output_tokens": usage["output_tokens"]},
            },
            "message_delta",
        )
    )
    if stop:
        out.append(sse_record({"type": "message_stop"}, "message_stop"))
    return "".join(out)


# -- recorded requests as ModelRequests, recorded responses as expected turns ---------------
#
# These converters are written independently of the providers' serialisers, so a test can
# build the ModelRequest a recorded request came from, let the provider serialise it, and
# compare the result with what ellmer actually sent.

_FAILED = "Tool calling failed with error "


def _tool_result(request_id: str, text: str, is_error: bool = False) -> Any:
    from deputy_runtime.chat import ContentToolResult

    if text.startswith(_FAILED):
        return ContentToolResult(request_id, error=text[len(_FAILED) :])
    if is_error:
        return ContentToolResult(request_id, error=text)
    return ContentToolResult(request_id, value=text)


def openai_request(body: dict[str, Any]) -> Any:
    """The ModelRequest a recorded Chat Completions request body expresses."""
    from deputy_runtime.chat import (
        ContentText,
        ContentToolRequest,
        ModelRequest,
        ToolSpec,
        Turn,
    )

    system: str | None = None
    turns: list[Turn] = []
    for m in body["messages"]:
        role, content = m["role"], m.get("content")
        if role == "system" and system is None and not turns:
            system = content
        elif role == "system":
            turns.append(Turn("system", (ContentText(content),)))
        elif role == "tool":
            result = _tool_result(m["tool_call_id"], content)
            if (
                turns
                and turns[-1].role == "user"
                and turns[-1].contents[-1].__class__ is result.__class__
            ):
                turns[-1] = Turn("user", (*turns[-1].contents, result))
            else:
                turns.append(Turn("user", (result,)))
        else:
            parts = [content] if isinstance(content, str) else (content or [])
            items: list[Any] = [ContentText(p if isinstance(p, str) else p["text"]) for p in parts]
            for call in m.get("tool_calls") or []:
                fn = call["function"]
                items.append(
                    ContentToolRequest(call["id"], fn["name"], json.loads(fn["arguments"] or "{}"))
                )
            turns.append(Turn(role, tuple(items)))
    tools = tuple(
        ToolSpec(t["function"]["name"], t["function"]["description"], t["function"]["parameters"])
        for t in body.get("tools", ())
    )
    params = {k: v for k, v in body.items() if k not in ("model", "messages", "tools", "stream")}
    return ModelRequest(system, tuple(turns), tools, params)


def openai_replayable(body: dict[str, Any]) -> bool:
    text = json.dumps(body["messages"])
    return '"image_url"' not in text and '"type": "file"' not in text


def normalise_openai(body: dict[str, Any]) -> dict[str, Any]:
    """Body with tool-call argument strings parsed (their JSON spelling is noise)."""
    out: dict[str, Any] = json.loads(json.dumps(body))
    for m in out["messages"]:
        for call in m.get("tool_calls") or []:
            call["function"]["arguments"] = json.loads(call["function"]["arguments"] or "{}")
    return out


def openai_expected(response: dict[str, Any]) -> dict[str, Any]:
    """What a parsed turn must contain, read straight from a recorded response."""
    choice = response["choices"][0]
    message = choice["message"]
    usage = response["usage"]
    return {
        "text": message.get("content") or "",
        "calls": [
            (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"] or "{}"))
            for c in message.get("tool_calls") or []
        ],
        "usage": (
            usage["prompt_tokens"],
            usage["completion_tokens"],
            (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0),
        ),
        "finish_reason": choice["finish_reason"],
    }


_ANTHROPIC_BLOCKS = {"text", "tool_use", "tool_result", "thinking"}


def anthropic_replayable(body: dict[str, Any]) -> bool:
    if any("type" in t for t in body.get("tools", ())):
        return False  # server tools (web_fetch) have no ToolSpec form
    for m in body["messages"]:
        for block in m["content"]:
            if block["type"] not in _ANTHROPIC_BLOCKS:
                return False
            if block["type"] == "tool_result" and not isinstance(block["content"], str):
                return False
    return True


def anthropic_request(body: dict[str, Any]) -> Any:
    """The ModelRequest a recorded Messages request body expresses."""
    from deputy_runtime.chat import (
        ContentText,
        ContentThinking,
        ContentToolRequest,
        ModelRequest,
        ToolSpec,
        Turn,
    )

    system = body.get("system")
    if isinstance(system, list):
        system = "\n\n".join(b["text"] for b in system)
    turns = []
    for m in body["messages"]:
        items: list[Any] = []
        for b in m["content"]:
            if b["type"] == "text":
                items.append(ContentText(b["text"]))
            elif b["type"] == "thinking":
                items.append(ContentThinking(b["thinking"], signature=b["signature"]))
            elif b["type"] == "tool_use":
                items.append(ContentToolRequest(b["id"], b["name"], b["input"]))
            else:
                items.append(_tool_result(b["tool_use_id"], b["content"], b.get("is_error", False)))
        turns.append(Turn(m["role"], tuple(items)))
    tools = tuple(
        ToolSpec(t["name"], t["description"], t["input_schema"]) for t in body.get("tools", ())
    )
    skip = ("model", "messages", "tools", "stream", "system", "max_tokens")
    params = {k: v for k, v in body.items() if k not in skip}
    if body.get("max_tokens") != 4096:
        params["max_tokens"] = body["max_tokens"]
    return ModelRequest(system, tuple(turns), tools, params)


def anthropic_expected(message: dict[str, Any]) -> dict[str, Any]:
    usage = message["usage"]
    read = usage.get("cache_read_input_tokens") or 0
    blocks = message["content"]
    return {
        "text": "".join(b["text"] for b in blocks if b["type"] == "text"),
        "calls": [(b["id"], b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"],
        "thinking": [(b["thinking"], b["signature"]) for b in blocks if b["type"] == "thinking"],
        "usage": (
            usage["input_tokens"] + (usage.get("cache_creation_input_tokens") or 0) + read,
            usage["output_tokens"],
            read,
        ),
        "finish_reason": message["stop_reason"],
    }


def turn_summary(turn: Any) -> dict[str, Any]:
    """The same summary, read from a parsed AssistantTurn."""
    from deputy_runtime.chat import ContentThinking

    return {
        "text": turn.text,
        "calls": [(c.id, c.name, c.arguments) for c in turn.tool_requests],
        "thinking": [
            (c.thinking, c.signature) for c in turn.contents if isinstance(c, ContentThinking)
        ],
        "usage": (
            turn.usage.input_tokens,
            turn.usage.output_tokens,
            turn.usage.cached_input_tokens,
        ),
        "finish_reason": turn.finish_reason,
    }
