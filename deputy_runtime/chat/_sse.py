"""Server-sent events decoding that survives arbitrary chunk boundaries.

The network hands us bytes in whatever pieces TCP and the HTTP chunking produce: a record,
a line, a line ending (``\\r`` in one chunk, ``\\n`` in the next) or a multi-byte UTF-8
character can be split anywhere. The decoder buffers bytes until a full line is available,
splits lines on ``\\r\\n``, ``\\n`` or ``\\r`` as the SSE specification says, and decodes
UTF-8 per complete line, so no split can corrupt text.

A record's size is bounded (``max_event_bytes``): the fields gathered so far plus the
partial line still buffered. A server that sends one endless line or one endless record
gets :class:`EventTooLarge` instead of all the memory it wants.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator

__all__ = ["EventTooLarge", "SSEDecoder", "ServerSentEvent", "aiter_sse"]


class EventTooLarge(ValueError):
    """One server-sent event (or one line of it) exceeded the decoder's ``max_event_bytes``."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"a server-sent event exceeded {limit} bytes")
        self.limit = limit


class ServerSentEvent:
    """One dispatched SSE record: ``event`` name (``"message"`` by default) and ``data``."""

    __slots__ = ("data", "event", "id", "retry")

    def __init__(
        self, data: str, event: str = "message", id: str | None = None, retry: int | None = None
    ) -> None:
        self.data = data
        self.event = event
        self.id = id
        self.retry = retry

    def __repr__(self) -> str:
        return f"ServerSentEvent(event={self.event!r}, data={self.data!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ServerSentEvent):
            return NotImplemented
        return (self.data, self.event, self.id, self.retry) == (
            other.data,
            other.event,
            other.id,
            other.retry,
        )

    __hash__ = None  # type: ignore[assignment]


class SSEDecoder:
    """Incremental SSE decoder: ``feed`` bytes, get the records completed by them.

    ``pending`` tells whether a record was started but not terminated by a blank line; a
    stream that ends in that state was cut off (the specification says to drop the record).
    ``max_event_bytes`` (``None``: unbounded) caps one record, partial line included;
    ``feed`` raises :class:`EventTooLarge` past it.
    """

    __slots__ = (
        "_buf",
        "_cr_pending",
        "_data",
        "_event",
        "_id",
        "_limit",
        "_retry",
        "_scanned",
        "_size",
        "_started",
    )

    def __init__(self, max_event_bytes: int | None = None) -> None:
        self._limit = max_event_bytes
        self._size = 0  # bytes of the lines of the record being gathered
        self._scanned = 0  # leading bytes of _buf known to hold no line ending
        self._buf = bytearray()
        self._cr_pending = False  # last chunk ended in \r: a following \n belongs to it
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None
        self._started = False

    @property
    def pending(self) -> bool:
        """True when unterminated record bytes (a partial line or fields) are buffered."""
        return self._started or bool(self._buf)

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Add bytes; return every record they complete, in order."""
        if not chunk:
            return []
        if self._cr_pending:
            self._cr_pending = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        buf = self._buf
        buf += chunk
        out: list[ServerSentEvent] = []
        start = 0
        n = len(buf)
        # Each byte is searched once: the held-back partial line is known to have no line
        # ending, and a found ending is only searched again once it has been passed. (A
        # rescan per line or per chunk would let a server make decoding quadratic.)
        lf = buf.find(b"\n", self._scanned)
        cr = buf.find(b"\r", self._scanned)
        while lf >= 0 or cr >= 0:
            if cr >= 0 and (lf < 0 or cr < lf):
                end = cr
                if cr + 1 < n:
                    nxt = cr + 2 if buf[cr + 1] == 0x0A else cr + 1
                else:
                    # A trailing \r: the line is complete, but a \n may follow in the next
                    # chunk and must not count as a second (empty) line.
                    nxt = n
                    self._cr_pending = True
            else:
                end, nxt = lf, lf + 1
            event = self._line(bytes(buf[start:end]))
            if event is not None:
                out.append(event)
            elif self._limit is not None and self._size > self._limit:
                raise EventTooLarge(self._limit)
            start = nxt
            if 0 <= lf < start:
                lf = buf.find(b"\n", start)
            if 0 <= cr < start:
                cr = buf.find(b"\r", start)
        del buf[:start]
        self._scanned = len(buf)
        if self._limit is not None and len(buf) + self._size > self._limit:
            raise EventTooLarge(self._limit)
        return out

    def _line(self, raw: bytes) -> ServerSentEvent | None:
        if not raw:
            return self._dispatch()
        line = raw.decode("utf-8", errors="replace")
        if line[0] == ":":
            return None  # comment / keep-alive
        self._started = True
        self._size += len(raw)
        name, sep, value = line.partition(":")
        if sep and value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry" and value.isdigit():
            self._retry = int(value)
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        if not self._started:
            return None
        self._started = False
        self._size = 0
        event_name, self._event = self._event or "message", ""
        retry, self._retry = self._retry, None
        if not self._data:
            return None
        data = "\n".join(self._data)
        self._data = []
        return ServerSentEvent(data, event_name, self._id, retry)


async def aiter_sse(chunks: AsyncIterable[bytes]) -> AsyncIterator[ServerSentEvent]:
    """Decode an async stream of byte chunks into SSE records."""
    decoder = SSEDecoder()
    async for chunk in chunks:
        for event in decoder.feed(chunk):
            yield event
