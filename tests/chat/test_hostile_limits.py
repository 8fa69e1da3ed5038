"""Size caps and deadlines against a hostile server: endless bodies, gzip bombs, endless,
trickling and keep-alive-only streams, oversized events. Each attack ends in a typed error
naming the cap or deadline; memory is measured with tracemalloc inside the test, and time
as a ratio to a baseline run (a plain stall ended by the idle deadline) in the same test.
"""

from __future__ import annotations

import gc
import itertools
import json
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import anyio
import pytest

from deputy_runtime.chat import AssistantTurn
from deputy_runtime.chat._limits import MiB, ResponseLimits
from deputy_runtime.chat._openai import _ChatStream
from deputy_runtime.chat._sse import ServerSentEvent, SSEDecoder
from deputy_runtime.errors import ProviderError, ProviderTimeoutError, ResponseTooLargeError
from tests.chat.hostile import (
    JSON_HEADERS,
    SSE_HEADERS,
    Behaviour,
    HostileServer,
    chunked,
    forever,
    gzip_bomb,
    make,
    once,
    outcome,
    respond,
    stream_head,
    text_event,
    trickle,
)

pytestmark = pytest.mark.anyio

T = TypeVar("T")
# Traced allocations that do not depend on the response: imports and connection set-up on
# first use, read buffers, the provider's objects.
OVERHEAD = 3 * MiB
# A read timeout far beyond every deadline here: only the new limits can end these calls.
SLOW_READ = 60.0
# The deadline the time-bound tests use; the stall baseline is ended by the same value.
DEADLINE = 0.4


@pytest.fixture(params=["openai", "anthropic"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def peak_memory(call: Callable[[], Awaitable[T]]) -> tuple[T, int]:
    """Run ``call``; return its result and the peak bytes traced above the start."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        result = await call()
        return result, tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


async def timed(
    kind: str, behaviour: Behaviour, limits: ResponseLimits, stream: bool
) -> tuple[AssistantTurn | ProviderError, float, HostileServer]:
    with HostileServer(behaviour) as server, anyio.fail_after(60):
        start = time.perf_counter()
        result = await outcome(make(kind, server.url, limits, timeout=SLOW_READ), stream)
        return result, time.perf_counter() - start, server


async def stall_baseline(kind: str) -> float:
    """Seconds a stream that goes silent after its headers takes to end (idle deadline)."""
    limits = ResponseLimits(idle_timeout=DEADLINE)
    stall = chunked(once(stream_head(kind)), headers=SSE_HEADERS, end="hang")
    result, elapsed, _ = await timed(kind, stall, limits, stream=True)
    assert isinstance(result, ProviderTimeoutError)
    assert "idle_timeout" in str(result)
    return elapsed


def endless_events(kind: str) -> Callable[[], Iterator[bytes]]:
    event = text_event(kind, "tick " * 50)
    return lambda: itertools.chain([stream_head(kind)], itertools.repeat(event))


# -- 1. response size ---------------------------------------------------------------------


async def test_endless_body_is_cut_at_max_body_bytes(kind: str) -> None:
    cap = 256 * 1024
    endless = chunked(forever(b'{"choices": "' + b"a" * 4096), headers=JSON_HEADERS)
    with HostileServer(endless) as server, anyio.fail_after(60):
        provider = make(kind, server.url, ResponseLimits(max_body_bytes=cap), timeout=SLOW_READ)
        result, peak = await peak_memory(lambda: outcome(provider, stream=False))
    assert isinstance(result, ResponseTooLargeError)
    assert (result.limit, result.what, result.status) == (cap, "max_body_bytes", 200)
    assert f"max_body_bytes={cap}" in str(result)
    assert server.requests == 1  # too large is not retried
    # The body buffer is at most the cap; everything else is a few 64 KiB read buffers.
    assert peak < 4 * cap + OVERHEAD


async def test_gzip_bomb_is_cut_at_the_default_max_body_bytes(kind: str) -> None:
    """About 3 MB on the wire inflating to 3 GiB stops at the default 32 MiB cap."""
    default = ResponseLimits().max_body_bytes
    assert default == 32 * MiB
    bomb = gzip_bomb(3 * 1024)
    with HostileServer(bomb) as server, anyio.fail_after(60):
        provider = make(kind, server.url, timeout=SLOW_READ)
        result, peak = await peak_memory(lambda: outcome(provider, stream=False))
    assert isinstance(result, ResponseTooLargeError)
    assert result.limit == default
    assert "max_body_bytes=33554432" in str(result)
    assert peak < 1.5 * default  # inflated piecewise: never much beyond the cap


async def test_gzip_bomb_in_a_stream_is_cut_at_max_event_bytes(kind: str) -> None:
    """A compressed stream of zeros (one endless line) stops at the event cap."""
    cap = 64 * 1024
    bomb = gzip_bomb(1024, content_type="text/event-stream")
    limits = ResponseLimits(max_event_bytes=cap)
    with HostileServer(bomb) as server, anyio.fail_after(60):
        provider = make(kind, server.url, limits, timeout=SLOW_READ)
        result, peak = await peak_memory(lambda: outcome(provider, stream=True))
    assert isinstance(result, ResponseTooLargeError)
    assert (result.limit, result.what) == (cap, "max_event_bytes")
    assert peak < 4 * cap + OVERHEAD


# -- 2. streamed responses -----------------------------------------------------------------


async def test_endless_sse_event_is_cut_at_max_event_bytes(kind: str) -> None:
    cap = 64 * 1024
    one_endless_event = chunked(
        lambda: itertools.chain([b"data: "], itertools.repeat(b"x" * 1024)), headers=SSE_HEADERS
    )
    with HostileServer(one_endless_event) as server, anyio.fail_after(60):
        provider = make(kind, server.url, ResponseLimits(max_event_bytes=cap), timeout=SLOW_READ)
        result, peak = await peak_memory(lambda: outcome(provider, stream=True))
    assert isinstance(result, ResponseTooLargeError)
    assert (result.limit, result.what) == (cap, "max_event_bytes")
    assert "max_event_bytes=65536" in str(result)
    assert peak < 4 * cap + OVERHEAD


async def test_endless_stream_is_cut_at_max_stream_bytes(kind: str) -> None:
    cap = 256 * 1024
    limits = ResponseLimits(max_stream_bytes=cap)
    with HostileServer(chunked(endless_events(kind), headers=SSE_HEADERS)) as server:
        with anyio.fail_after(60):
            provider = make(kind, server.url, limits, timeout=SLOW_READ)
            result, peak = await peak_memory(lambda: outcome(provider, stream=True))
    assert isinstance(result, ResponseTooLargeError)
    assert (result.limit, result.what) == (cap, "max_stream_bytes")
    # What is kept is the text of the deltas, a fraction of the stream's bytes.
    assert peak < 4 * cap + OVERHEAD


async def test_stream_without_final_event_ends_at_the_total_deadline(kind: str) -> None:
    baseline = await stall_baseline(kind)
    limits = ResponseLimits(total_timeout=DEADLINE, idle_timeout=SLOW_READ)
    endless = chunked(endless_events(kind), headers=SSE_HEADERS, interval=0.005)
    result, elapsed, server = await timed(kind, endless, limits, stream=True)
    assert isinstance(result, ProviderTimeoutError)
    assert "total deadline of 0.4s (ResponseLimits.total_timeout)" in str(result)
    # The request reached the server; on a loaded machine the deadline may pass before its
    # thread writes the first chunk, which ends the same way (the deadline counts from the
    # start of the call), so the bytes it sent are not asserted.
    assert server.requests == 1
    assert elapsed >= DEADLINE
    assert elapsed < 4 * baseline


async def test_keepalive_comments_only_end_at_the_idle_deadline(kind: str) -> None:
    baseline = await stall_baseline(kind)
    limits = ResponseLimits(idle_timeout=DEADLINE)
    keepalives = chunked(
        lambda: itertools.chain([stream_head(kind)], itertools.repeat(b": keep-alive\n\n")),
        headers=SSE_HEADERS,
        interval=0.01,
    )
    # The comments must arrive inside the idle window for the test to say anything: on a
    # loaded machine the server thread may not write before the deadline, so the attack
    # is repeated until one attempt had comments arriving (each attempt ends the same way).
    for _attempt in range(5):
        result, elapsed, server = await timed(kind, keepalives, limits, stream=True)
        assert isinstance(result, ProviderTimeoutError)
        assert "no event for 0.4s (ResponseLimits.idle_timeout" in str(result)
        assert elapsed >= DEADLINE
        assert elapsed < 4 * baseline
        if server.bytes_sent > len(stream_head(kind)):
            break
    assert server.bytes_sent > len(stream_head(kind))  # comments kept arriving


async def test_anthropic_pings_only_end_at_the_idle_deadline() -> None:
    baseline = await stall_baseline("anthropic")
    ping = b'event: ping\ndata: {"type": "ping"}\n\n'
    pings = chunked(
        lambda: itertools.chain([stream_head("anthropic")], itertools.repeat(ping)),
        headers=SSE_HEADERS,
        interval=0.01,
    )
    limits = ResponseLimits(idle_timeout=DEADLINE)
    result, elapsed, _ = await timed("anthropic", pings, limits, stream=True)
    assert isinstance(result, ProviderTimeoutError)
    assert "idle_timeout" in str(result)
    assert elapsed < 4 * baseline


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "complete"])
async def test_trickle_one_byte_at_a_time_ends_at_the_total_deadline(
    kind: str, stream: bool
) -> None:
    """Every byte arrives well within the read timeout and events keep completing."""
    baseline = await stall_baseline(kind)
    limits = ResponseLimits(total_timeout=DEADLINE, idle_timeout=SLOW_READ)
    if stream:
        body = stream_head(kind) + text_event(kind, "x")
        behaviour = chunked(trickle(body, repeat=True), headers=SSE_HEADERS, interval=0.001)
    else:
        behaviour = chunked(
            trickle(b'{"choices": [' + b" " * 10_000), headers=JSON_HEADERS, interval=0.001
        )
    result, elapsed, server = await timed(kind, behaviour, limits, stream)
    assert isinstance(result, ProviderTimeoutError)
    assert "ResponseLimits.total_timeout" in str(result)
    assert server.requests == 1
    assert elapsed >= DEADLINE
    assert elapsed < 4 * baseline


async def test_the_total_deadline_covers_retries(kind: str) -> None:
    """Truncated bodies are retried, but not past the total deadline."""
    baseline = await stall_baseline(kind)
    truncated = respond(200, JSON_HEADERS, b'{"choices": []}' * 100, cut=10)
    # About 0.1 s per attempt: several attempts fit before the deadline, not all of them.
    slow_truncated = chunked(
        trickle(b'{"choices":'), headers=JSON_HEADERS, interval=0.01, end="close"
    )
    limits = ResponseLimits(total_timeout=DEADLINE)
    for behaviour in (truncated, slow_truncated):
        with HostileServer(behaviour) as server, anyio.fail_after(60):
            provider = make(kind, server.url, limits, timeout=SLOW_READ, max_retries=10_000)
            start = time.perf_counter()
            result = await outcome(provider, stream=False)
            elapsed = time.perf_counter() - start
        assert isinstance(result, ProviderError)
        assert server.requests > 1
        assert elapsed < 4 * baseline


def test_response_limits_validation() -> None:
    bad: list[tuple[str, object]] = [
        ("max_body_bytes", 0),
        ("max_event_bytes", True),
        ("max_stream_bytes", 1.5),
        ("total_timeout", float("nan")),
        ("idle_timeout", -1),
        ("total_timeout", float("inf")),
    ]
    for field, value in bad:
        with pytest.raises(ValueError, match=f"ResponseLimits.{field} must be"):
            ResponseLimits(**{field: value})  # type: ignore[arg-type]  # bad values under test
    with pytest.raises(TypeError, match="limits must be a ResponseLimits or a mapping"):
        make("openai", "http://127.0.0.1:9", limits=[1])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"unknown limits \['max_bytes'\]"):
        make("openai", "http://127.0.0.1:9", limits={"max_bytes": 1})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"ResponseLimits\.idle_timeout must be"):
        make("anthropic", "http://127.0.0.1:9", limits={"idle_timeout": 0})  # type: ignore[arg-type]


def test_limits_from_a_mapping() -> None:
    """A definition file's ``model_args`` can only hold plain values."""
    provider = make("anthropic", "http://127.0.0.1:9", limits={"total_timeout": 30})  # type: ignore[arg-type]
    assert provider.limits == ResponseLimits(total_timeout=30)


# -- decoding cost stays linear in what the server sends -------------------------------------


def best_of(runs: int, work: Callable[[], object]) -> float:
    """The least CPU time of ``runs`` runs of ``work``, with the collector paused.

    Thread CPU time, not wall time: on a loaded machine other processes stretch the wall
    clock of one run but not the CPU this thread spends, so the ratio below stays a
    statement about the algorithm.
    """
    times = []
    collecting = gc.isenabled()
    gc.disable()
    try:
        for _ in range(runs):
            start = time.thread_time()
            work()
            times.append(time.thread_time() - start)
    finally:
        if collecting:
            gc.enable()
    return min(times)


def linear_ratio(work: Callable[[int], object], n: int) -> float:
    """Time for 8n over time for n: about 8 when linear, about 64 when quadratic.

    Callers assert it is under 24, a factor of about three from either answer.
    """
    small = best_of(5, lambda: work(n))
    large = best_of(3, lambda: work(8 * n))
    return large / small


def test_a_chunk_of_cr_only_lines_decodes_in_linear_time() -> None:
    def work(n: int) -> None:
        SSEDecoder().feed(b"data: x\r\r" * n)

    assert linear_ratio(work, 8_000) < 24


def test_one_long_line_in_many_chunks_decodes_in_linear_time() -> None:
    def work(n: int) -> None:
        decoder = SSEDecoder()
        decoder.feed(b"data: ")
        for _ in range(n):
            decoder.feed(b"y" * 64)

    assert linear_ratio(work, 10_000) < 24


def test_tool_call_fragments_that_never_complete_cost_linear_time() -> None:
    """Each fragment names the function again, which asks whether the call is complete."""

    def work(n: int) -> None:
        stream = _ChatStream("openai_compatible", require_done=False)
        stream.feed(ServerSentEvent(tool_delta("[")))
        for _ in range(n):
            stream.feed(ServerSentEvent(tool_delta('"x}",')))

    assert linear_ratio(work, 1250) < 24


def tool_delta(arguments: str) -> str:
    call = {"index": 0, "function": {"name": "f", "arguments": arguments}}
    return json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})
