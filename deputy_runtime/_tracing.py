"""Tracing state and the span primitives the runtime uses (OpenTelemetry, optional).

:data:`STATE` holds the configured tracer, or ``None`` when tracing is off. The runtime
reads ``STATE.tracer`` once per operation and takes its untraced path when it is
``None``: no span, no attribute dict, no OpenTelemetry import. Everything else here runs
only once tracing is configured, so ``opentelemetry`` is imported only inside functions.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from opentelemetry.trace import Span

__all__ = [
    "SCOPE",
    "STATE",
    "Active",
    "AttributeValue",
    "TracingState",
    "current_span",
    "failures_marked",
    "finish",
    "mark_error",
    "span",
    "start",
]

T = TypeVar("T")

#: The values an OpenTelemetry attribute may hold.
AttributeValue = str | bool | int | float | Sequence[str] | Sequence[int] | Sequence[float]

#: The instrumentation scope name of every span the runtime starts.
SCOPE = "deputy_runtime"


class TracingState:
    """The process-wide tracing configuration.

    Attributes:
        tracer: The OpenTelemetry tracer spans are started on; ``None``: tracing is off.
        capture_content: Whether prompts, completions, tool arguments and tool results are
            recorded on spans.
    """

    __slots__ = ("capture_content", "tracer")

    def __init__(self) -> None:
        self.tracer: Any = None
        self.capture_content = False


#: The one tracing state of the process (``deputy_runtime.tracing.configure`` sets it).
STATE = TracingState()


class Active:
    """A started span attached as current in the task that started it.

    Attributes:
        span: The OpenTelemetry span.
        token: The context token that :func:`finish` detaches.
    """

    __slots__ = ("span", "token")

    def __init__(self, span: Span, token: Any) -> None:
        self.span = span
        self.token = token


def start(name: str, attributes: Mapping[str, AttributeValue], *, client: bool = False) -> Active:
    """Start ``name`` and make it the current span of the running task.

    The span is attached to the context of the calling task; :func:`finish` must be
    called in the same task. Tasks started meanwhile (anyio copies the context into child
    tasks) see it as their parent.

    Args:
        name: The span name.
        attributes: Its attributes at start.
        client: Whether it is a CLIENT span (a request to a remote service).

    Returns:
        The started, attached span.
    """
    from opentelemetry import context, trace

    kind = trace.SpanKind.CLIENT if client else trace.SpanKind.INTERNAL
    started = STATE.tracer.start_span(name, kind=kind, attributes=attributes)
    return Active(started, context.attach(trace.set_span_in_context(started)))


def finish(active: Active) -> None:
    """Detach ``active`` from the task's context and end it."""
    from opentelemetry import context

    context.detach(active.token)
    active.span.end()


@contextmanager
def span(
    name: str, attributes: Mapping[str, AttributeValue], *, client: bool = False
) -> Iterator[Span]:
    """:func:`start` for the ``with`` block, then :func:`finish`.

    An exception leaving the block sets the span's status to ERROR and ``error.type``
    to the exception's type, and is re-raised; a cancellation is not an error.

    Args:
        name: The span name.
        attributes: Its attributes at start.
        client: Whether it is a CLIENT span.

    Returns:
        A context manager yielding the started span.
    """
    active = start(name, attributes, client=client)
    try:
        yield active.span
    except Exception as exc:
        mark_error(active.span, exc)
        raise
    finally:
        finish(active)


def mark_error(target: Span, error: BaseException | str, description: str | None = None) -> None:
    """Set ``target``'s status to ERROR with ``error.type``.

    Args:
        target: The span.
        error: The exception (its type name is recorded) or an error type string.
        description: The status description (default: the error type).
    """
    from opentelemetry.trace import Status, StatusCode

    kind = error if isinstance(error, str) else type(error).__qualname__
    target.set_attribute("error.type", kind)
    target.set_status(Status(StatusCode.ERROR, description or kind))


def current_span() -> Span:
    """The span current in this task's context.

    Returns:
        The current span (a non-recording one when there is none).
    """
    from opentelemetry import trace

    return trace.get_current_span()


async def failures_marked(awaitable: Awaitable[T]) -> T:
    """Await ``awaitable``; an exception it raises marks the current span ERROR first.

    Args:
        awaitable: The work (a tool invocation) whose failure the caller turns into a value.

    Returns:
        What ``awaitable`` returns.

    Raises:
        Exception: Whatever ``awaitable`` raised, after the current span was marked.
    """
    try:
        return await awaitable
    except Exception as exc:
        mark_error(current_span(), exc)
        raise
