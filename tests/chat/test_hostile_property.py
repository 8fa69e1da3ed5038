"""Whatever a hostile server does, a provider call ends, in time, in bounded memory, with a
completed turn or a typed ProviderError.

Hypothesis draws the attack (truncation, stall, trickle, gzip bomb, garbage, endless
bodies and streams, mutated bodies, error statuses with hostile retry hints) for both wire
formats, streaming and not, against a raw-socket server. The limits are small so the test
stays fast; each example's traced memory peak is checked against them.
"""

from __future__ import annotations

import gzip
import itertools
import json
import time
import tracemalloc
from typing import Any

import anyio
import pytest
import sniffio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deputy_runtime.chat import AssistantTurn
from deputy_runtime.chat._limits import MiB, ResponseLimits
from deputy_runtime.errors import ProviderError
from tests.chat.hostile import (
    JSON_HEADERS,
    OK,
    SSE_HEADERS,
    Behaviour,
    HostileServer,
    bomb_bytes,
    chunked,
    drip,
    forever,
    make,
    once,
    outcome,
    raw,
    respond,
    stream_head,
    text_event,
    trickle,
)
from tests.chat.loopback import anthropic_sse, openai_sse

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

LIMITS = ResponseLimits(
    max_body_bytes=64 * 1024,
    max_event_bytes=16 * 1024,
    max_stream_bytes=128 * 1024,
    total_timeout=1.0,
    idle_timeout=0.3,
)
# Traced allocations that do not depend on the response (imports on first use, read
# buffers, hypothesis's own bookkeeping).
OVERHEAD = 3 * MiB


def valid_body(kind: str, stream: bool) -> bytes:
    if not stream:
        return json.dumps(OK[kind]).encode()
    return (openai_sse(OK[kind]) if kind == "openai" else anthropic_sse(OK[kind])).encode()


def content_type(stream: bool) -> dict[str, str]:
    return SSE_HEADERS if stream else JSON_HEADERS


@st.composite
def attacks(draw: st.DrawFn, kind: str, stream: bool) -> tuple[str, Behaviour]:
    """One hostile (or, as a control, honest) server behaviour."""
    body = valid_body(kind, stream)
    headers = content_type(stream)
    name = draw(
        st.sampled_from(
            [
                "valid",
                "valid-gzip",
                "truncate",
                "stall",
                "trickle",
                "inflate",
                "garbage-raw",
                "garbage-body",
                "endless-body",
                "endless-events",
                "keepalive",
                "mutated",
                "deep-json",
                "header-flood",
                "slow-headers",
                "error-status",
            ]
        )
    )
    if name == "valid":
        # Not much smaller: a thousand one-byte reads under tracemalloc on a loaded
        # machine can take longer than the small total deadline (then a trickle case).
        size = draw(st.integers(16, 256))
        pieces = [body[i : i + size] for i in range(0, len(body), size)]
        return name, chunked(once(*pieces), headers=headers)
    if name == "valid-gzip":
        return name, respond(200, {**headers, "content-encoding": "gzip"}, gzip.compress(body))
    if name == "truncate":
        cut = draw(st.integers(0, len(body) - 1))
        return name, respond(200, headers, body, cut=cut)
    if name == "stall":
        cut = draw(st.integers(0, len(body) - 1))
        return name, chunked(once(body[:cut]), headers=headers, end="hang")
    if name == "trickle":
        repeat = draw(st.booleans())
        return name, chunked(trickle(body, repeat=repeat), headers=headers, interval=0.002)
    if name == "inflate":
        encoded = bomb_bytes(draw(st.integers(1, 64)))
        return name, respond(200, {**headers, "content-encoding": "gzip"}, encoded)
    if name == "garbage-raw":
        return name, raw(
            draw(st.binary(max_size=300)), then=draw(st.sampled_from(["close", "hang"]))
        )
    if name == "garbage-body":
        junk = draw(st.binary(min_size=1, max_size=2000))
        encoding = draw(
            st.sampled_from([{}, {"content-encoding": "gzip"}, {"content-encoding": "br"}])
        )
        return name, respond(200, {**headers, **encoding}, junk)
    if name == "endless-body":
        piece = draw(st.sampled_from([b"a" * 1024, b"\n" * 512, b"data: x\n", b"\0" * 4096]))
        return name, chunked(forever(piece), headers=headers)
    if name == "endless-events":
        event = text_event(kind, draw(st.text(min_size=1, max_size=50)))
        return name, chunked(
            lambda: itertools.chain([stream_head(kind)], itertools.repeat(event)),
            headers=headers,
            interval=draw(st.sampled_from([0.0, 0.003])),
        )
    if name == "keepalive":
        return name, chunked(forever(b": keep-alive\n\n"), headers=headers, interval=0.01)
    if name == "mutated":
        mutated = bytearray(body)
        for _ in range(draw(st.integers(1, 5))):
            at = draw(st.integers(0, len(mutated) - 1))
            mutated[at] = draw(st.integers(0, 255))
        return name, respond(200, headers, bytes(mutated))
    if name == "header-flood":
        line = b"x-filler: " + b"f" * draw(st.integers(1, 200)) + b"\r\n"
        status_line = [b"HTTP/1.1 200 OK\r\n"]
        return name, drip(lambda: itertools.chain(status_line, itertools.repeat(line)), interval=0)
    if name == "slow-headers":
        head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-a: b\r\n"
        return name, drip(trickle(head, repeat=True), interval=0.005)
    if name == "deep-json":
        depth = draw(st.integers(500, 20_000))
        opener = draw(st.sampled_from([b"[", b'{"a":']))
        closer = b"]" if opener == b"[" else b"}"
        nested = opener * depth + b"1" + closer * depth
        if stream:
            nested = b"data: " + nested + b"\n\n"
        status = draw(st.sampled_from([200, 400, 500]))
        return name, respond(status, headers, nested)
    status = draw(st.sampled_from([400, 401, 404, 408, 429, 500, 503, 529, 302, 101]))
    hint = draw(st.sampled_from(["nan", "inf", "-1", "0", "1e309", "0.001", "soon", ""]))
    junk = draw(st.binary(max_size=200))
    return name, respond(status, {"retry-after": hint, "retry-after-ms": hint}, junk)


_warm: set[str] = set()


async def warm_up() -> None:
    """One honest call per backend first: its one-off imports and set-up are not measured."""
    backend = sniffio.current_async_library()
    if backend in _warm:
        return
    for kind in ("openai", "anthropic"):
        for stream in (False, True):
            honest = respond(200, content_type(stream), valid_body(kind, stream))
            with HostileServer(honest) as server:
                result = await outcome(make(kind, server.url), stream)
            assert isinstance(result, AssistantTurn), result
    _warm.add(backend)


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[str, bool, str, Behaviour]:
    kind = draw(st.sampled_from(["openai", "anthropic"]))
    stream = draw(st.booleans())
    name, behaviour = draw(attacks(kind, stream))
    return kind, stream, name, behaviour


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(scenario=scenarios())
async def test_any_hostile_server_ends_in_a_turn_or_a_typed_error(
    scenario: tuple[str, bool, str, Behaviour],
) -> None:
    kind, stream, name, behaviour = scenario
    await warm_up()
    with HostileServer(behaviour) as server:
        provider = make(kind, server.url, LIMITS, timeout=5.0, max_retries=1)
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            start = time.perf_counter()
            # A guard against a hang: the deadlines under test end every call long before.
            with anyio.fail_after(20 * LIMITS.total_timeout):
                result: Any = await outcome(provider, stream)
            elapsed = time.perf_counter() - start
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
    assert isinstance(result, AssistantTurn | ProviderError), (name, result)
    if name.startswith("valid"):
        assert isinstance(result, AssistantTurn), (name, result)
        assert result.text == "Hi there!"
    if name in ("truncate", "stall", "inflate", "endless-body", "endless-events", "keepalive"):
        assert isinstance(result, ProviderError), (name, result)
    assert peak < 4 * LIMITS.max_stream_bytes + OVERHEAD, (name, peak)
    assert elapsed < 20 * LIMITS.total_timeout
