"""The runtime's spans: what each one is called and which attributes it carries.

Called only when tracing is on (``STATE.tracer is not None``, checked by the caller):

* ``invoke_agent <name>``: a top-level run (a lead, or an agent without a lead);
* ``invoke_agent <subagent>``: one delegation, around admission, building, the
  subagent's run and settlement (the subagent's run has no span of its own);
* ``chat <model>``: one model request (CLIENT);
* ``execute_tool <tool>``: one tool call, the gate's decision included.

Attribute names follow the OpenTelemetry GenAI semantic conventions; what they do not
cover is under the ``deputy.`` prefix. Content (prompts, completions, tool arguments
and results) is recorded only with ``STATE.capture_content``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from .._tracing import STATE, Active, AttributeValue, SpanScope, finish, mark_error, span, start
from ..chat import (
    AssistantTurn,
    ContentText,
    ContentThinking,
    ContentToolRequest,
    ContentToolResult,
    ModelRequest,
    Provider,
    Turn,
)
from ..tools import Tool
from ._result import AgentResult
from ._usage import AgentUsage, UsageLimits

#: An OpenTelemetry span (typed loosely: the runtime never imports opentelemetry itself).
Span = Any

__all__ = [
    "begin_delegation",
    "begin_run",
    "chat_reply",
    "chat_span",
    "end_delegation",
    "end_run",
    "tool_decision",
    "tool_result",
    "tool_span",
]

_LIMIT_FIELDS = (
    "max_requests",
    "max_tool_calls",
    "max_input_tokens",
    "max_output_tokens",
    "max_total_tokens",
    "max_cost_usd",
    "max_seconds",
)


#: One encoder for every content attribute (built once: a per-call ``enc_hook`` costs a
#: fresh encoder each time); a value msgspec cannot encode is recorded as its ``repr``.
_ENCODER = msgspec.json.Encoder(enc_hook=repr)


def _json(value: Any) -> str:
    return _ENCODER.encode(value).decode()


def _parts(contents: Iterable[Any]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for c in contents:
        if isinstance(c, ContentText):
            parts.append({"type": "text", "content": c.text})
        elif isinstance(c, ContentToolRequest):
            parts.append(
                {"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments}
            )
        elif isinstance(c, ContentToolResult):
            parts.append(
                {
                    "type": "tool_call_response",
                    "id": c.request_id,
                    "response": c.value if c.error is None else {"error": c.error},
                }
            )
        elif isinstance(c, ContentThinking):
            parts.append({"type": "reasoning", "content": c.thinking})
    return parts


def _messages(turns: Iterable[Turn]) -> str:
    return _json([{"role": t.role, "parts": _parts(t.contents)} for t in turns])


def _usage(attributes: dict[str, AttributeValue], usage: AgentUsage) -> None:
    attributes["gen_ai.usage.input_tokens"] = usage.input_tokens
    attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
    attributes["deputy.usage.requests"] = usage.requests
    attributes["deputy.usage.tool_calls"] = usage.tool_calls
    if usage.cost_usd is not None:
        attributes["deputy.usage.cost_usd"] = usage.cost_usd


#: (limit field, attribute name) of a delegation's granted budget, built once.
_GRANTED = tuple((field, f"deputy.budget.granted.{field}") for field in _LIMIT_FIELDS)


def _granted(attributes: dict[str, AttributeValue], limits: UsageLimits) -> None:
    for field, key in _GRANTED:
        value = getattr(limits, field)
        if value is not None:
            attributes[key] = value


# -- runs ------------------------------------------------------------------------------------


def begin_run(
    agent_name: str | None, agent_id: str, provider: Provider, run_id: str, task: str
) -> Active:
    """Start the ``invoke_agent`` span of a top-level run.

    Args:
        agent_name: The agent's name (``agent`` when it has none).
        agent_id: The agent's id.
        provider: Its chat's provider.
        run_id: The run's id.
        task: The run's first user message (recorded only with content capture).

    Returns:
        The started span, current in the calling task.
    """
    name = agent_name or "agent"
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": name,
        "gen_ai.agent.id": agent_id,
        "gen_ai.provider.name": provider.name,
        "gen_ai.request.model": provider.model,
        "deputy.run.id": run_id,
    }
    if STATE.capture_content:
        attributes["gen_ai.input.messages"] = _json(
            [{"role": "user", "parts": [{"type": "text", "content": task}]}]
        )
    return start(f"invoke_agent {name}", attributes)


def end_run(active: Active, result: AgentResult, error: BaseException | None) -> None:
    """Record a run's outcome on its span and end it.

    Args:
        active: The run's span.
        result: The run's result.
        error: The exception the run ended with, if any (a provider failure, or one the
            run raises); a cancellation is not an error.
    """
    attributes: dict[str, AttributeValue] = {"deputy.stop_reason": str(result.stop_reason)}
    _usage(attributes, result.usage)
    if STATE.capture_content and result.response:
        attributes["gen_ai.output.messages"] = _json(
            [{"role": "assistant", "parts": [{"type": "text", "content": result.response}]}]
        )
    target = active.span
    target.set_attributes(attributes)
    if isinstance(error, Exception):
        mark_error(target, error.__cause__ or error)
    elif result.error is not None and error is None:
        mark_error(target, str(result.stop_reason))
    finish(active)


# -- delegations --------------------------------------------------------------------------------


def begin_delegation(d: Any, modes: tuple[str, ...]) -> Active:
    """Start the ``invoke_agent`` span of one delegation in the task that runs it.

    Args:
        d: The admitted ``Delegation``.
        modes: The names of the policy's resource modes.

    Returns:
        The started span, current in the calling task.
    """
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": d.agent_name,
        "gen_ai.agent.id": d.agent_id,
        "deputy.delegation.id": d.delegation_id,
        "deputy.run.id": d.run_id,
        "deputy.parent.agent_id": d.parent_agent_id,
        "deputy.resource_modes": modes or ("shared",),
    }
    if d.parent_run_id is not None:
        attributes["deputy.parent.run_id"] = d.parent_run_id
    if d.tool_call_id is not None:
        attributes["gen_ai.tool.call.id"] = d.tool_call_id
    if STATE.capture_content:
        attributes["gen_ai.input.messages"] = _json(
            [{"role": "user", "parts": [{"type": "text", "content": d.task}]}]
        )
    return start(f"invoke_agent {d.agent_name}", attributes)


def end_delegation(active: Active, d: Any, failed: BaseException | None) -> None:
    """Record a settled delegation on its span and end it.

    Args:
        active: The delegation's span.
        d: The settled ``Delegation``.
        failed: The exception its run ended with, if any.
    """
    attributes: dict[str, AttributeValue] = {"deputy.delegation.status": str(d.status)}
    if d.stop_reason is not None:
        attributes["deputy.stop_reason"] = str(d.stop_reason)
    if d.reservation is not None:
        _granted(attributes, d.reservation.limits)
    _usage(attributes, d.usage)
    if STATE.capture_content and d.result is not None and d.result.response:
        attributes["gen_ai.output.messages"] = _json(
            [{"role": "assistant", "parts": [{"type": "text", "content": d.result.response}]}]
        )
    target = active.span
    target.set_attributes(attributes)
    if d.status == "failed":
        if isinstance(failed, Exception):
            mark_error(target, failed)
        else:
            mark_error(target, str(d.stop_reason or "error"))
    finish(active)


# -- model requests and tool calls ------------------------------------------------------------


def chat_span(agent_name: str | None, provider: Provider, request: ModelRequest) -> SpanScope:
    """The ``chat <model>`` span of one model request (CLIENT).

    Args:
        agent_name: The requesting agent's name.
        provider: The provider the request goes to.
        request: The request.

    Returns:
        A context manager yielding the span; a provider error marks it ERROR.
    """
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider.name,
        "gen_ai.request.model": provider.model,
    }
    if agent_name:
        attributes["gen_ai.agent.name"] = agent_name
    if STATE.capture_content:
        if request.system_prompt:
            attributes["gen_ai.system_instructions"] = _json(
                [{"type": "text", "content": request.system_prompt}]
            )
        attributes["gen_ai.input.messages"] = _messages(request.turns)
    return span(f"chat {provider.model}", attributes, client=True)


def chat_reply(target: Span, reply: AssistantTurn) -> None:
    """Record a model's reply on its ``chat`` span.

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
    if STATE.capture_content:
        attributes["gen_ai.output.messages"] = _messages([reply.turn()])
    target.set_attributes(attributes)


def tool_span(call: ContentToolRequest, call_id: str) -> SpanScope:
    """The ``execute_tool <name>`` span of one tool call, gate included.

    Args:
        call: The model's tool request.
        call_id: The call's id.

    Returns:
        A context manager yielding the span.
    """
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
    }
    if STATE.capture_content:
        attributes["gen_ai.tool.call.arguments"] = _json(call.arguments)
    return span(f"execute_tool {call.name}", attributes)


def tool_decision(target: Span, gated: Tool | ContentToolResult) -> None:
    """Record the gate's decision: ``allow`` or ``deny``.

    A denial's message (it can quote the call's arguments, e.g. a path) is content: it
    is recorded only with content capture.

    Args:
        target: The call's span.
        gated: What the gate returned: the tool, or the result refusing the call.
    """
    if isinstance(gated, Tool):
        target.set_attribute("deputy.permission.decision", "allow")
        return
    target.set_attribute("deputy.permission.decision", "deny")
    if STATE.capture_content:
        target.set_attribute("deputy.tool.refusal", gated.error or "")


def tool_result(target: Span, result: ContentToolResult) -> None:
    """Record a tool's value (with content capture).

    A tool that raised has already marked the span ERROR with its exception's type.

    Args:
        target: The call's span.
        result: The result the model receives.
    """
    if result.error is None and STATE.capture_content:
        target.set_attribute("gen_ai.tool.call.result", _json(result.value))
