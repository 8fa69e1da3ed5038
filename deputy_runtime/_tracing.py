"""Tracing state and the span primitives the runtime uses (OpenTelemetry, optional).

:data:`STATE` holds the configured tracer, or ``None`` when tracing is off. The runtime
reads ``STATE.tracer`` once per operation and takes its untraced path when it is
``None``: no span, no attribute dict, no OpenTelemetry import. Everything else here runs
only once tracing is configured, so ``opentelemetry`` is imported only inside functions.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from opentelemetry.trace import Span

__all__ = [
    "SCOPE",
    "STATE",
    "Active",
    "AttributeValue",
    "SpanScope",
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


class _Api:
    """The OpenTelemetry functions the span primitives call, looked up once.

    Bound on first use (tracing is on by then), so no call pays for an import statement
    or a module attribute lookup.
    """

    __slots__ = ("attach", "client", "detach", "in_context", "internal")

    def __init__(self) -> None:
        from opentelemetry import context, trace

        self.attach = context.attach
        self.detach = context.detach
        self.in_context = trace.set_span_in_context
        self.internal = trace.SpanKind.INTERNAL
        self.client = trace.SpanKind.CLIENT


_API: _Api | None = None


def _api() -> _Api:
    global _API
    if _API is None:
        _API = _Api()
    return _API


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
    api = _API or _api()
    started = STATE.tracer.start_span(
        name, kind=api.client if client else api.internal, attributes=attributes
    )
    return Active(started, api.attach(api.in_context(started)))


def finish(active: Active) -> None:
    """Detach ``active`` from the task's context and end it."""
    (_API or _api()).detach(active.token)
    active.span.end()


class SpanScope:
    """:func:`start` on entering a ``with`` block, :func:`finish` on leaving it.

    An exception leaving the block sets the span's status to ERROR and ``error.type``
    to the exception's type, and is re-raised; a cancellation is not an error. A class
    rather than a generator context manager: it is entered for every model request and
    tool call, and a generator's frame and ``StopIteration`` cost more than the block.
    """

    __slots__ = ("_active", "_attributes", "_client", "_name")

    def __init__(
        self, name: str, attributes: Mapping[str, AttributeValue], *, client: bool = False
    ) -> None:
        self._name = name
        self._attributes = attributes
        self._client = client
        self._active: Active | None = None

    def __enter__(self) -> Span:
        active = self._active = start(self._name, self._attributes, client=self._client)
        return active.span

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: Any
    ) -> None:
        active = self._active
        if active is None:
            return
        self._active = None
        try:
            if isinstance(error, Exception):
                mark_error(active.span, error)
        finally:
            finish(active)


def span(name: str, attributes: Mapping[str, AttributeValue], *, client: bool = False) -> SpanScope:
    """A span for a ``with`` block (see :class:`SpanScope`).

    Args:
        name: The span name.
        attributes: Its attributes at start.
        client: Whether it is a CLIENT span.

    Returns:
        A context manager yielding the started span.
    """
    return SpanScope(name, attributes, client=client)


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
