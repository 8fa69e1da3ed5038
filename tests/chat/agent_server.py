"""A loopback model server that plays a lead delegating to every agent, for both APIs.

Built on :class:`loopback.LoopbackServer` (real sockets on 127.0.0.1). The lead (the
request whose system prompt carries the routing section) first asks for one
``delegate_to_agent`` call per agent it is offered (or ``fanout`` calls over them), then
answers once the results are back; any other request (a subagent) answers at once.
Streaming and non-streaming requests are both served, in the OpenAI Chat Completions or
Anthropic Messages shape.
Every request's ``model`` field is recorded, so a test can say exactly which model ids a
provider was asked for.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Literal

from tests.chat.loopback import LoopbackServer, Reply, Seen, anthropic_sse, openai_sse

Api = Literal["openai", "anthropic"]
ROUTING_MARKER = "deputy-lead-routing"


class AgentServer(LoopbackServer):
    """Serves a lead and its subagents; ``models`` lists each request's ``model`` field."""

    def __init__(
        self, api: Api, *, tasks: dict[str, str] | None = None, fanout: int | None = None
    ) -> None:
        self.api = api
        self.tasks = tasks or {}
        self.fanout = fanout  # delegate calls the lead asks for (default: one per agent)
        self.models: list[str] = []
        self.lead_models: list[str] = []
        self.count_lock = threading.Lock()
        super().__init__(self._answer)

    def _answer(self, seen: Seen) -> Reply:
        body = seen.json
        raw = seen.body.decode()
        lead = ROUTING_MARKER in raw
        with self.count_lock:
            self.models.append(body.get("model", ""))
            if lead:
                self.lead_models.append(body.get("model", ""))
        if lead and not _has_tool_results(self.api, body):
            agents = _delegate_enum(self.api, body)
            if self.fanout is not None:
                agents = [agents[i % len(agents)] for i in range(self.fanout)]
            calls = [
                (f"call_{i}", {"agent_name": a, "task": self.tasks.get(a, f"{a} task")})
                for i, a in enumerate(agents)
            ]
            return _reply(self.api, body, calls=calls)
        return _reply(self.api, body, text="lead answer" if lead else "subagent answer")


def _has_tool_results(api: Api, body: dict[str, Any]) -> bool:
    if api == "openai":
        return any(m.get("role") == "tool" for m in body["messages"])
    return any(
        isinstance(m.get("content"), list)
        and any(c.get("type") == "tool_result" for c in m["content"])
        for m in body["messages"]
    )


def _delegate_enum(api: Api, body: dict[str, Any]) -> list[str]:
    for tool in body.get("tools", []):
        spec = tool["function"] if api == "openai" else tool
        if spec["name"] == "delegate_to_agent":
            schema = spec["parameters"] if api == "openai" else spec["input_schema"]
            return list(schema["properties"]["agent_name"]["enum"])
    raise AssertionError("the lead was not offered delegate_to_agent")


def _reply(
    api: Api,
    body: dict[str, Any],
    *,
    text: str = "",
    calls: list[tuple[str, dict[str, Any]]] = (),  # type: ignore[assignment]
) -> Reply:
    model = body.get("model", "")
    if api == "openai":
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "delegate_to_agent", "arguments": json.dumps(args)},
                }
                for call_id, args in calls
            ]
        response = {
            "id": "chatcmpl-agent",
            "object": "chat.completion",
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
        }
        return Reply.sse(openai_sse(response)) if body.get("stream") else Reply.json(response)
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [
        {"type": "tool_use", "id": call_id, "name": "delegate_to_agent", "input": args}
        for call_id, args in calls
    ]
    result = {
        "id": "msg_agent",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 3},
    }
    return Reply.sse(anthropic_sse(result)) if body.get("stream") else Reply.json(result)
