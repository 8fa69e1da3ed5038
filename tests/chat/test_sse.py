"""The SSE decoder: specification cases and arbitrary chunk boundaries."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deputy_runtime.chat._sse import ServerSentEvent, SSEDecoder, aiter_sse

pytestmark = pytest.mark.anyio


def decode(*chunks: bytes) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    return [event for chunk in chunks for event in decoder.feed(chunk)]


def test_fields_comments_and_multiline_data() -> None:
    body = (
        b": keep-alive\n"
        b'event: message_start\ndata: {"a": 1}\n\n'
        b"data: line one\ndata: line two\nid: 7\nretry: 1500\n\n"
        b"data:no-space\n\n"
        b"data\n\n"  # a field with no colon: empty data
        b"event: ping\n\n"  # no data: not dispatched
        b"unknown: x\ndata: [DONE]\n\n"
    )
    assert decode(body) == [
        ServerSentEvent('{"a": 1}', "message_start"),
        ServerSentEvent("line one\nline two", id="7", retry=1500),
        ServerSentEvent("no-space", id="7"),
        ServerSentEvent("", id="7"),
        ServerSentEvent("[DONE]", id="7"),
    ]


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending(newline: bytes) -> None:
    body = b"event: e" + newline + b"data: x" + newline + newline + b"data: y" + newline + newline
    expected = [ServerSentEvent("x", "e"), ServerSentEvent("y")]
    assert decode(body) == expected
    assert decode(*[bytes([b]) for b in body]) == expected  # one byte at a time


def test_crlf_split_across_chunks_is_one_line_break() -> None:
    # "\r" ends one chunk and "\n" starts the next: still a single line ending.
    assert decode(b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n") == [
        ServerSentEvent("a"),
        ServerSentEvent("b"),
    ]


def test_multibyte_utf8_split_anywhere() -> None:
    body = "data: h\u00e9llo \u2603 \U0001f600\n\n".encode()
    for cut in range(1, len(body)):
        assert decode(body[:cut], body[cut:]) == [ServerSentEvent("h\u00e9llo \u2603 \U0001f600")]


def test_pending_reports_an_unterminated_record() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: complete\n\ndata: cut") == [ServerSentEvent("complete")]
    assert decoder.pending
    decoder.feed(b" off\n")
    assert decoder.pending  # a line, but no blank line yet
    assert decoder.feed(b"\n") == [ServerSentEvent("cut off")]
    assert not decoder.pending


_SURROGATES: tuple[Literal["Cs"]] = ("Cs",)  # lone surrogates cannot be encoded
_text = st.text(
    alphabet=st.characters(exclude_categories=_SURROGATES, exclude_characters="\r\n"), max_size=20
)
_events = st.lists(
    st.tuples(
        st.sampled_from(["", "delta", "message_stop"]), st.lists(_text, min_size=1, max_size=3)
    ),
    max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(events=_events, newline=st.sampled_from(["\n", "\r\n", "\r"]), data=st.data())
def test_any_chunking_gives_the_same_events(
    events: list[tuple[str, list[str]]], newline: str, data: st.DataObject
) -> None:
    body = ""
    for name, lines in events:
        if name:
            body += f"event: {name}{newline}"
        body += "".join(f"data: {line}{newline}" for line in lines) + newline
    raw = body.encode()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=20)))
    chunks = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    expected = [ServerSentEvent("\n".join(lines), name or "message") for name, lines in events]
    assert decode(raw) == expected
    assert decode(*chunks) == expected


async def test_aiter_sse_over_an_async_byte_stream() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for piece in (b"da", b"ta: 1\n", b"\nda", b"ta: 2\n\n"):
            yield piece

    assert [e.data async for e in aiter_sse(chunks())] == ["1", "2"]
