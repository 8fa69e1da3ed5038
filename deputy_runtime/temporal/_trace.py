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

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from temporalio.client import Client

from .._tracing import STATE, AttributeValue, span
from ..chat import AssistantTurn, Provider

__all__ = ["chat_span", "record_reply", "tool_span", "traced_client", "tracing_interceptors"]


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


@contextmanager
def chat_span(agent_name: str | None, provider: Provider) -> Iterator[Any]:
    """The ``chat <model>`` span of one model request made by an activity (CLIENT).

    Args:
        agent_name: The requesting agent's name.
        provider: The provider the request goes to.

    Returns:
        A context manager yielding the span; an exception marks it ERROR.
    """
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider.name,
        "gen_ai.request.model": provider.model,
    }
    if agent_name:
        attributes["gen_ai.agent.name"] = agent_name
    with span(f"chat {provider.model}", attributes, client=True) as current:
        yield current


def record_reply(target: Any, reply: AssistantTurn) -> None:
    """Record a reply's usage and finish reason on its ``chat`` span.

    Args:
        target: The request's span.
        reply: The reply.
    """
    usage = reply.usage
    attributes: dict[str, AttributeValue] = {
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "gen_ai.response.finish_reasons": (reply.finish_reason or "unknown",),
    }
    if usage.cached_input_tokens:
        attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cached_input_tokens
    if usage.cost_usd is not None:
        attributes["deputy.usage.cost_usd"] = usage.cost_usd
    target.set_attributes(attributes)


@contextmanager
def tool_span(name: str, call_id: str) -> Iterator[Any]:
    """The ``execute_tool <name>`` span of one tool call made by an activity.

    Args:
        name: The tool's name.
        call_id: The model's id for the call.

    Returns:
        A context manager yielding the span; an exception marks it ERROR.
    """
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
    }
    with span(f"execute_tool {name}", attributes) as current:
        yield current
