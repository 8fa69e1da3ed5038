"""What an MCP value may show a model: binary summarised, size capped.

Rules:

* Binary data is never pasted. Image and audio blocks, blob resources and base64
  strings inside ``structuredContent`` become one bracketed line with the mime type and
  the decoded size: ``[binary image/png, 270,519 bytes, not shown]``.
* A string counts as base64 when it is at least :data:`BASE64_MIN_CHARS` long, uses only
  the base64 alphabet (standard or URL-safe, with ``=`` padding at the end), has a
  length base64 can have, and mixes upper-case letters, lower-case letters and digits
  (encoded binary always does; a run of one letter or a hex digest does not); a
  ``data:<mime>;base64,...`` URL counts when its payload is that long. Ordinary text has
  spaces or punctuation well before that length.
* The mime type is the one the value declares (a ``data:`` URL's, or a sibling
  ``mimeType`` / ``mime_type`` / ``contentType`` key), else sniffed from the first
  decoded bytes, else ``application/octet-stream``.
* Every result is at most :data:`RESULT_BYTES` UTF-8 bytes, the read cap of the file
  tools (``FileToolLimits.read_bytes``), so an MCP tool can show a model no more than
  ``read_file`` can. A longer one is cut at a character boundary and ends with a notice
  saying how much was shown. A structured value whose JSON is longer becomes that JSON
  as text, cut the same way.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any

import msgspec

from ..tools import FileToolLimits

__all__ = [
    "BASE64_MIN_CHARS",
    "RESULT_BYTES",
    "binary_line",
    "bounded_text",
    "bounded_value",
    "cut_chars",
    "decoded_size",
    "summarised",
]

#: The most UTF-8 bytes of one MCP result a model sees: the file tools' read cap.
RESULT_BYTES = FileToolLimits().read_bytes
#: Strings at least this long made only of base64 characters are summarised.
BASE64_MIN_CHARS = 256

_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}\Z|[A-Za-z0-9_-]+={0,2}\Z")
_DATA_URL = re.compile(r"data:([\w.+-]+/[\w.+-]+)?(?:;[\w.+-]+=[\w.+-]+)*;base64,", re.ASCII)
_MIXED_UPPER = re.compile("[A-Z]")
_MIXED_LOWER = re.compile("[a-z]")
_MIXED_DIGIT = re.compile("[0-9]")
_MIME_KEYS = ("mimeType", "mime_type", "contentType", "content_type")
# Leading bytes of common binary formats, for values that do not say what they are.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
    (b"PK\x03\x04", "application/zip"),
    (b"\x1f\x8b", "application/gzip"),
    (b"OggS", "audio/ogg"),
    (b"ID3", "audio/mpeg"),
    (b"fLaC", "audio/flac"),
)
_encoder = msgspec.json.Encoder()


def decoded_size(data: str) -> int:
    """The number of bytes the base64 text ``data`` decodes to (without decoding it)."""
    stripped = data.rstrip("=")
    return len(stripped) * 3 // 4


def binary_line(kind: str, mime: str | None, size: int, where: str = "") -> str:
    """The one line that stands for binary data: ``[<kind> <mime>, <size> bytes, ...]``."""
    at = f" {where}" if where else ""
    return f"[{kind}{at} {mime or 'application/octet-stream'}, {size:,} bytes, not shown]"


def _sniff(data: str) -> str | None:
    head = data[:24]
    head += "=" * (-len(head) % 4)
    try:
        raw = base64.b64decode(head.replace("-", "+").replace("_", "/"), validate=False)
    except (binascii.Error, ValueError):
        return None
    for magic, mime in _MAGIC:
        if raw.startswith(magic):
            return mime
    if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
        return "image/webp"
    if raw[:4] == b"RIFF" and raw[8:12] == b"WAVE":
        return "audio/wav"
    return None


def _looks_base64(text: str) -> bool:
    return (
        len(text) >= BASE64_MIN_CHARS
        and len(text.rstrip("=")) % 4 != 1
        and _BASE64.match(text) is not None
        and _MIXED_UPPER.search(text) is not None
        and _MIXED_LOWER.search(text) is not None
        and _MIXED_DIGIT.search(text) is not None
    )


def _summary(text: str, mime: str | None) -> str | None:
    """The line for ``text`` when it is binary data, else ``None``."""
    if text.startswith("data:"):
        found = _DATA_URL.match(text)
        if found is not None:
            payload = text[found.end() :]
            if len(payload) >= BASE64_MIN_CHARS:
                return binary_line("binary", found.group(1) or mime, decoded_size(payload))
    if _looks_base64(text):
        return binary_line("binary", mime or _sniff(text), decoded_size(text))
    return None


def summarised(value: Any, mime: str | None = None) -> Any:
    """``value`` (a JSON value) with every base64 string replaced by its summary line.

    Args:
        value: A decoded JSON value: dicts, lists, strings, numbers, booleans, ``None``.
        mime: The mime type a containing object declared, if any.

    Returns:
        A new value of the same shape; the input is not changed.
    """
    if isinstance(value, str):
        line = _summary(value, mime)
        return value if line is None else line
    if isinstance(value, Mapping):
        declared = next((value[k] for k in _MIME_KEYS if isinstance(value.get(k), str)), mime)
        return {str(k): summarised(v, declared) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [summarised(item, mime) for item in value]
    return value


def bounded_text(text: str, limit: int = RESULT_BYTES) -> str:
    """``text`` if it fits in ``limit`` UTF-8 bytes, else its start and a notice."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    shown = data[:limit].decode("utf-8", "ignore")
    used = len(shown.encode("utf-8", "surrogatepass"))
    return (
        f"{shown}\n[result cut: {used:,} of {len(data):,} bytes shown; an MCP result shows "
        f"at most {limit:,} bytes]"
    )


def bounded_value(value: Any, limit: int = RESULT_BYTES) -> Any:
    """A structured value with binary summarised; its JSON text, cut, when over ``limit``."""
    out = summarised(value)
    encoded = _encoder.encode(out)
    if len(encoded) <= limit:
        return out
    return bounded_text(encoded.decode("utf-8", "surrogatepass"), limit)


def cut_chars(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, ending in ``...`` when cut."""
    return text if len(text) <= limit else text[: max(limit - 3, 0)] + "..."
