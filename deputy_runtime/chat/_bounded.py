"""Reading a provider's response under the size caps and deadlines of ResponseLimits.

One :class:`ResponseReader` per provider session reads whole bodies (bounded, inflated
piecewise) and hands out a :class:`StreamReader` per streamed response, which yields
decoded pieces until the stream ends, goes over ``max_stream_bytes``, or passes the total
or idle deadline. Both raise the typed errors that name the cap or deadline concerned.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import anyio
import httpx

from ..errors import ProviderError, ProviderTimeoutError, ResponseTooLargeError
from ._limits import BodyDecoder, ResponseLimits, UnsupportedEncoding

__all__ = ["ResponseReader", "StreamReader"]


def _preloaded(response: httpx.Response) -> bytes | None:
    """The body of a response that was built already read, else ``None``.

    A transport that answers with a complete in-memory response (``httpx.MockTransport``,
    a test double, a caching layer) hands over a body that can no longer be streamed and
    is already decoded; it is taken as it is, under the same caps.
    """
    try:
        return response.content
    except httpx.ResponseNotRead:
        return None


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


class ResponseReader:
    """Bounded reads of one provider's responses, and the errors for going past a bound."""

    __slots__ = ("limits", "provider")

    def __init__(self, provider: str, limits: ResponseLimits) -> None:
        self.provider = provider
        self.limits = limits

    def stream(self, response: httpx.Response, deadline: float) -> StreamReader:
        """A reader of ``response``'s streamed body, ending by ``deadline`` at the latest."""
        return StreamReader(self, response, deadline)

    async def read_body(
        self, response: httpx.Response, limit: int | None = None, *, truncate: bool = False
    ) -> bytes:
        """The decoded body, at most ``limit`` bytes (``max_body_bytes`` by default).

        Past the limit the body is cut there when ``truncate`` (error bodies, read only for
        their message), else :class:`ResponseTooLargeError` is raised. The body is
        inflated piecewise, so a compression bomb is stopped at the limit.
        """
        cap = self.limits.max_body_bytes if limit is None else limit
        status = response.status_code
        preloaded = _preloaded(response)
        if preloaded is not None:
            if len(preloaded) <= cap:
                return preloaded
            if truncate:
                return preloaded[:cap]
            raise self.too_large("max_body_bytes", cap, status)
        try:
            decoder = BodyDecoder(response.headers.get("content-encoding"))
        except UnsupportedEncoding as exc:
            if truncate:
                return b""
            raise self.undecodable(exc, status) from exc
        declared = response.headers.get("content-length", "")
        if not truncate and declared.isdigit() and decoder.identity and int(declared) > cap:
            raise self.too_large("max_body_bytes", cap, status)
        out = bytearray()
        try:
            async for raw in response.aiter_raw():
                for piece in decoder.decode(raw):
                    if len(out) + len(piece) > cap:
                        if truncate:
                            out += piece[: cap - len(out)]
                            return bytes(out)
                        raise self.too_large("max_body_bytes", cap, status)
                    out += piece
            decoder.end()
        except UnsupportedEncoding as exc:
            if truncate:
                return bytes(out)
            raise self.undecodable(exc, status) from exc
        return bytes(out)

    def too_large(self, what: str, limit: int, status: int | None = None) -> ResponseTooLargeError:
        """The error for a response that went over the ``what`` cap of ``limit`` bytes."""
        return ResponseTooLargeError(
            f"{self.provider}: the response exceeded ResponseLimits.{what}={limit} bytes "
            "(decoded) and was abandoned",
            provider=self.provider,
            status=status,
            limit=limit,
            what=what,
        )

    def total_timeout_error(self) -> ProviderTimeoutError:
        """The error for a call that ran past its total deadline."""
        return ProviderTimeoutError(
            f"{self.provider}: no complete response within the total deadline of "
            f"{self.limits.total_timeout:g}s (ResponseLimits.total_timeout)",
            provider=self.provider,
        )

    def idle_timeout_error(self) -> ProviderTimeoutError:
        """The error for a stream that sent no event for the idle deadline."""
        return ProviderTimeoutError(
            f"{self.provider}: the stream sent no event for {self.limits.idle_timeout:g}s "
            "(ResponseLimits.idle_timeout; keep-alive comments and pings do not count)",
            provider=self.provider,
        )

    def undecodable(self, exc: UnsupportedEncoding, status: int | None) -> ProviderError:
        """The error for a body in an encoding that cannot be undone (or a corrupt one)."""
        return ProviderError(
            f"{self.provider}: the response body could not be decoded ({exc})",
            provider=self.provider,
            status=status,
        )


class StreamReader:
    """Decoded pieces of a streamed body, under the size cap and both deadlines."""

    __slots__ = ("_deadline", "_decoder", "_idle_at", "_pieces", "_raw", "_reader", "_seen")

    def __init__(self, reader: ResponseReader, response: httpx.Response, deadline: float) -> None:
        self._reader = reader
        self._deadline = deadline
        self._idle_at = anyio.current_time() + reader.limits.idle_timeout
        preloaded = _preloaded(response)
        encoding = None if preloaded is not None else response.headers.get("content-encoding")
        try:
            self._decoder = BodyDecoder(encoding)
        except UnsupportedEncoding as exc:
            raise reader.undecodable(exc, response.status_code) from exc
        self._raw = response.aiter_raw() if preloaded is None else _once(preloaded)
        self._pieces: Iterator[bytes] = iter(())
        self._seen = 0

    def progress(self) -> None:
        """An event arrived: the idle deadline starts again."""
        self._idle_at = anyio.current_time() + self._reader.limits.idle_timeout

    async def next(self) -> bytes | None:
        """The next decoded piece, or ``None`` at the end of the body."""
        reader = self._reader
        while True:
            try:
                piece = next(self._pieces, None)
            except UnsupportedEncoding as exc:
                raise reader.undecodable(exc, None) from exc
            if piece is not None:
                self._seen += len(piece)
                cap = reader.limits.max_stream_bytes
                if self._seen > cap:
                    raise reader.too_large("max_stream_bytes", cap)
                return piece
            idle = self._idle_at <= self._deadline
            wait = min(self._idle_at, self._deadline) - anyio.current_time()
            raw: bytes | None = None
            if wait > 0:
                with anyio.move_on_after(wait):
                    raw = await self._read_raw()
                    if raw is None:
                        return None
            if raw is None:
                raise reader.idle_timeout_error() if idle else reader.total_timeout_error()
            self._pieces = self._decoder.decode(raw)

    async def _read_raw(self) -> bytes | None:
        reader = self._reader
        try:
            raw = await self._raw.__anext__()
        except StopAsyncIteration:
            try:
                self._decoder.end()
            except UnsupportedEncoding as exc:
                raise reader.undecodable(exc, None) from exc
            return None
        except httpx.TimeoutException as exc:
            raise ProviderTimeoutError(
                f"{reader.provider}: stream stalled (read timeout) before it was complete",
                provider=reader.provider,
            ) from exc
        except httpx.RequestError as exc:
            raise ProviderError(
                f"{reader.provider}: stream interrupted "
                f"({type(exc).__name__}: {exc or 'no detail'})",
                provider=reader.provider,
            ) from exc
        return raw
