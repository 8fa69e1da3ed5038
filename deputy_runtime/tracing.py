"""OpenTelemetry traces of runs, delegations, model requests and tool calls.

Tracing is off until :func:`configure` is called; while it is off the runtime imports no
OpenTelemetry module and starts no span. It needs the ``otel`` extra
(the ``otel`` extra, which installs ``opentelemetry-api``); the host
brings the SDK and its exporter. The spans follow the OpenTelemetry GenAI semantic
conventions (``invoke_agent``, ``chat``, ``execute_tool``); see docs/tracing.md for the
span tree and every attribute.

Prompts, completions, tool arguments and tool results are not recorded unless
``capture_content=True``: they may hold personal or secret data.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import Any

from ._extras import install_hint
from ._tracing import SCOPE, STATE

__all__ = [
    "configure",
    "continue_trace",
    "disable",
    "extract_traceparent",
    "inject_traceparent",
    "is_enabled",
]

_MISSING = "tracing needs the opentelemetry-api package: install it with " + install_hint("otel")


def configure(tracer_provider: Any = None, *, capture_content: bool = False) -> None:
    """Turn tracing on for the whole process (every agent, lead and subagent).

    Calling it again replaces the configuration.

    Args:
        tracer_provider: An OpenTelemetry ``TracerProvider`` (for example the SDK's,
            with an exporter); ``None``: the globally registered one.
        capture_content: Record prompts, completions, tool arguments and tool results
            on the spans (default ``False``: they may hold personal or secret data).

    Raises:
        ImportError: ``opentelemetry-api`` is not installed (the ``otel`` extra).
        TypeError: ``tracer_provider`` has no ``get_tracer`` method, or
            ``capture_content`` is not a bool.
    """
    if not isinstance(capture_content, bool):
        raise TypeError(f"capture_content must be a bool, got {type(capture_content).__name__}")
    if tracer_provider is not None and not callable(getattr(tracer_provider, "get_tracer", None)):
        raise TypeError(
            "tracer_provider must be an OpenTelemetry TracerProvider, "
            f"got {type(tracer_provider).__name__}"
        )
    try:
        from opentelemetry import trace
    except ImportError as exc:
        raise ImportError(_MISSING) from exc
    from importlib.metadata import PackageNotFoundError, version

    try:
        own_version: str | None = version("deputy-runtime")
    except PackageNotFoundError:
        own_version = None
    provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    STATE.tracer = provider.get_tracer(SCOPE, own_version)
    STATE.capture_content = capture_content


def disable() -> None:
    """Turn tracing off: runs started from now on record no spans."""
    STATE.tracer = None
    STATE.capture_content = False


def is_enabled() -> bool:
    """Whether :func:`configure` turned tracing on.

    Returns:
        ``True`` while runs record spans.
    """
    return STATE.tracer is not None


def inject_traceparent(carrier: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """The W3C ``traceparent`` (and ``tracestate``) of the current span, for a request.

    Use it where work crosses a process boundary (an HTTP request to
    ``deputy-runtime serve``, a job handed to a worker) so the other side's spans join
    this trace. With tracing off, or no current span, nothing is added.

    Args:
        carrier: Headers to add the fields to (default: a new dict).

    Returns:
        The headers: ``carrier`` with the fields added, as a new dict.
    """
    headers = dict(carrier) if carrier is not None else {}
    if STATE.tracer is None:
        return headers
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    TraceContextTextMapPropagator().inject(headers)
    if carrier is not None:
        carrier.update(headers)
    return headers


def extract_traceparent(carrier: Mapping[str, str]) -> Any:
    """The OpenTelemetry context a W3C ``traceparent`` in ``carrier`` continues.

    Args:
        carrier: Incoming headers (case-insensitive keys such as Starlette's work; a
            plain dict needs the lowercase ``traceparent`` key).

    Returns:
        An OpenTelemetry ``Context`` whose remote parent is the caller's span, or
        ``None`` when tracing is off or the carrier has no valid ``traceparent``.
    """
    if STATE.tracer is None:
        return None
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    context = TraceContextTextMapPropagator().extract(carrier)
    if not trace.get_current_span(context).get_span_context().is_valid:
        return None
    return context


@contextmanager
def continue_trace(carrier: Mapping[str, str]) -> Iterator[None]:
    """Within the block, spans started (and tasks spawned) continue the caller's trace.

    Does nothing when tracing is off or ``carrier`` has no valid ``traceparent``.

    Args:
        carrier: Incoming headers carrying a W3C ``traceparent``.

    Returns:
        A context manager.
    """
    context = extract_traceparent(carrier)
    if context is None:
        yield
        return
    from opentelemetry import context as otel_context

    token = otel_context.attach(context)
    try:
        yield
    finally:
        otel_context.detach(token)
