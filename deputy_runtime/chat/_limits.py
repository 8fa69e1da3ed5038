"""Size caps and deadlines for provider responses, and a body reader that honours them.

A provider's server is not trusted to end its response: a body may never end, a 3 MB gzip
body may inflate to gigabytes, a stream may trickle bytes or keep-alive comments forever.
:class:`ResponseLimits` holds the caps and deadlines; :class:`BodyDecoder` undoes the
content encoding in pieces of at most 64 KiB, so the decoded size can be checked before a
bomb is inflated rather than after.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = [
    "ACCEPT_ENCODING",
    "BodyDecoder",
    "ResponseLimits",
    "UnsupportedEncoding",
]

MiB = 1024 * 1024
# The encodings BodyDecoder can inflate piecewise; requests ask for exactly these.
ACCEPT_ENCODING = "gzip, deflate"
_PIECE = 64 * 1024  # most decoded bytes produced at once


@dataclass(frozen=True)
class ResponseLimits:
    """Caps and deadlines that end a hostile or runaway response with a typed error.

    - ``max_body_bytes``: decoded size of a non-streamed response body (default 32 MiB).
    - ``max_event_bytes``: size of one server-sent event, data and partial lines included
      (default 8 MiB).
    - ``max_stream_bytes``: decoded size of one whole streamed response (default 128 MiB).
    - ``total_timeout``: seconds one call (``complete`` or a whole ``stream``, retries and
      their waits included) may take (default 1800).
    - ``idle_timeout``: seconds a stream may go without an event; comments (keep-alives)
      and ``ping`` events are not progress (default 600).

    Exceeding a size raises :class:`~deputy_runtime.errors.ResponseTooLargeError`, a
    deadline :class:`~deputy_runtime.errors.ProviderTimeoutError`.
    """

    max_body_bytes: int = 32 * MiB
    max_event_bytes: int = 8 * MiB
    max_stream_bytes: int = 128 * MiB
    total_timeout: float = 1800.0
    idle_timeout: float = 600.0

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_event_bytes", "max_stream_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"ResponseLimits.{name} must be an int >= 1 (bytes), got {value!r}"
                )
        for name in ("total_timeout", "idle_timeout"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value <= 0
            ):
                raise ValueError(
                    f"ResponseLimits.{name} must be a finite number > 0 (seconds), got {value!r}"
                )


class UnsupportedEncoding(ValueError):
    """The response used a content encoding the decoder cannot undo, or a corrupt one."""


class _Identity:
    __slots__ = ()

    def decode(self, data: bytes) -> Iterator[bytes]:
        for start in range(0, len(data), _PIECE):
            yield data[start : start + _PIECE]

    def end(self) -> None:
        return None


class _Inflate:
    """gzip (possibly several members) or deflate (zlib-wrapped or raw), inflated piecewise."""

    __slots__ = ("_d", "_started", "_wbits")

    def __init__(self, wbits: int) -> None:
        self._wbits = wbits
        self._d = zlib.decompressobj(wbits)
        self._started = False

    def decode(self, data: bytes) -> Iterator[bytes]:
        while data:
            if self._d.eof:
                if self._wbits != 16 + zlib.MAX_WBITS or not data.strip(b"\0"):
                    return  # trailing bytes after a deflate stream, or gzip padding
                # Another gzip member follows: concatenated members are one body.
                self._d = zlib.decompressobj(self._wbits)
            try:
                out = self._d.decompress(data, _PIECE)
            except zlib.error as exc:
                if self._wbits == zlib.MAX_WBITS and not self._started:
                    # "deflate" bodies are often raw deflate despite the standard.
                    self._wbits = -zlib.MAX_WBITS
                    self._d = zlib.decompressobj(self._wbits)
                    self._started = True
                    continue
                raise UnsupportedEncoding(f"corrupt compressed body ({exc})") from exc
            self._started = True
            data = self._d.unconsumed_tail or (self._d.unused_data if self._d.eof else b"")
            if out:
                yield out
            if not data and len(out) == _PIECE:
                data = b""
                # Output may still be pending inside zlib with no input left: drain it.
                while not self._d.eof:
                    more = self._d.decompress(b"", _PIECE)
                    if not more:
                        break
                    yield more

    def end(self) -> None:
        if not self._d.eof:
            raise UnsupportedEncoding("compressed body ended before its end marker")


class BodyDecoder:
    """Undoes one response's ``content-encoding`` in pieces of at most 64 KiB."""

    __slots__ = ("_impl",)

    def __init__(self, content_encoding: str | None) -> None:
        codings = [
            c.strip().lower()
            for c in (content_encoding or "").split(",")
            if c.strip() and c.strip().lower() != "identity"
        ]
        if not codings:
            self._impl: _Identity | _Inflate = _Identity()
        elif codings in (["gzip"], ["x-gzip"]):
            self._impl = _Inflate(16 + zlib.MAX_WBITS)
        elif codings == ["deflate"]:
            self._impl = _Inflate(zlib.MAX_WBITS)
        else:
            raise UnsupportedEncoding(f"unsupported content-encoding {content_encoding!r}")

    @property
    def identity(self) -> bool:
        """Whether the body is not encoded (its declared length is its decoded length)."""
        return isinstance(self._impl, _Identity)

    def decode(self, data: bytes) -> Iterator[bytes]:
        """The decoded pieces ``data`` completes (raises UnsupportedEncoding if corrupt)."""
        return self._impl.decode(data)

    def end(self) -> None:
        """Check the encoded body ended properly (raises UnsupportedEncoding if not)."""
        self._impl.end()
