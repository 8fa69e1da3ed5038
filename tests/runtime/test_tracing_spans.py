"""The span primitives the runtime enters for every model request and tool call.

:class:`SpanScope` replaced generator context managers (for speed); these tests pin what
the generators did: the span is current inside the block and detached after it, an
exception marks it ERROR and propagates, a cancellation is not an error, and every span
ends however the block is left. A real SDK ``TracerProvider`` and in-memory exporter.
"""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from deputy_runtime import tracing
from deputy_runtime._tracing import span


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.configure(provider)
    try:
        yield exporter
    finally:
        tracing.disable()
        provider.shutdown()


def test_the_span_is_current_inside_and_detached_after(spans: InMemorySpanExporter) -> None:
    before = trace.get_current_span()
    with span("outer", {"a": 1}) as outer:
        assert trace.get_current_span() is outer
        with span("inner", {"b": "x"}, client=True) as inner:
            assert trace.get_current_span() is inner
        assert trace.get_current_span() is outer
    assert trace.get_current_span() is before
    finished = {s.name: s for s in spans.get_finished_spans()}
    assert set(finished) == {"outer", "inner"}
    assert finished["inner"].parent is not None
    assert finished["inner"].parent.span_id == finished["outer"].context.span_id
    assert finished["inner"].kind is trace.SpanKind.CLIENT
    assert finished["outer"].kind is trace.SpanKind.INTERNAL
    assert dict(finished["outer"].attributes or {}) == {"a": 1}
    assert finished["outer"].status.status_code is trace.StatusCode.UNSET


def test_an_exception_marks_the_span_and_propagates(spans: InMemorySpanExporter) -> None:
    before = trace.get_current_span()
    with pytest.raises(KeyError), span("failing", {}):
        raise KeyError("missing")
    assert trace.get_current_span() is before
    (failed,) = spans.get_finished_spans()
    assert failed.status.status_code is trace.StatusCode.ERROR
    assert failed.status.description == "KeyError"
    assert dict(failed.attributes or {}) == {"error.type": "KeyError"}


class _Stop(BaseException):
    """A BaseException that is not an Exception, as a cancellation is."""


def test_a_base_exception_ends_the_span_without_marking_it(spans: InMemorySpanExporter) -> None:
    with pytest.raises(_Stop), span("stopped", {}):
        raise _Stop
    (stopped,) = spans.get_finished_spans()
    assert stopped.status.status_code is trace.StatusCode.UNSET
    assert "error.type" not in (stopped.attributes or {})


@pytest.mark.anyio
async def test_a_cancelled_block_ends_its_span_unmarked(spans: InMemorySpanExporter) -> None:
    with anyio.move_on_after(0) as scope, span("cancelled", {}):
        await anyio.sleep_forever()
    assert scope.cancelled_caught
    (cancelled,) = spans.get_finished_spans()
    assert cancelled.status.status_code is trace.StatusCode.UNSET
