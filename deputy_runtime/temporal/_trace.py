"""Trace context across the Temporal boundary, and the activities' spans.

With tracing configured, Temporal's own OpenTelemetry interceptor
(``temporalio.contrib.opentelemetry.TracingInterceptor``, which needs only the
OpenTelemetry API) carries the caller's context in Temporal headers: from the process
that starts a lead into the lead workflow, from a workflow into its activities and child
workflows, and from an activity's worker into the activity. The activities then start
their ``chat <model>`` and ``execute_tool <name>`` spans as children of the interceptor's
``RunActivity`` span, so they land in the caller's trace.

Everything here reads the tracing state at call time: with tracing off no interceptor is
added, no span is started and no OpenTelemetry module is imported.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from temporalio.client import Client

from .._tracing import STATE

__all__ = ["traced_client", "tracing_interceptors"]


def _is_tracing(interceptor: object) -> bool:
    from temporalio.contrib.opentelemetry import TracingInterceptor

    return isinstance(interceptor, TracingInterceptor)


def tracing_interceptors(existing: Sequence[object] = ()) -> list[Any]:
    """The tracing interceptor to add next to ``existing``, if one is needed.

    Args:
        existing: The interceptors already in place (a client's, a worker's).

    Returns:
        ``[TracingInterceptor]`` on the configured tracer when tracing is on and
        ``existing`` holds none; otherwise ``[]``.
    """
    if STATE.tracer is None or any(_is_tracing(i) for i in existing):
        return []
    from temporalio.contrib.opentelemetry import TracingInterceptor

    return [TracingInterceptor(STATE.tracer)]


def traced_client(client: Client) -> Client:
    """``client``, or a client sharing its connection with the tracing interceptor added.

    Args:
        client: The caller's client.

    Returns:
        ``client`` itself when tracing is off or it already traces; otherwise a new
        client on the same connection and options, plus the tracing interceptor.
    """
    config = client.config()
    extra = tracing_interceptors(config["interceptors"])
    if not extra:
        return client
    config["interceptors"] = [*config["interceptors"], *extra]
    return Client(**config)
