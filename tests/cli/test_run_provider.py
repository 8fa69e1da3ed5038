"""With an API key in the environment the CLI picks that provider and says so.

The "provider" is a loopback HTTP server (a real socket on 127.0.0.1) that speaks the
OpenAI Chat Completions streaming protocol; ``OPENAI_BASE_URL`` points the CLI at it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from deputy_runtime._cli.run import DEFAULT_MODELS
from tests.cli._runhelp import offline_env, run_cli, tool_free_agents

pytestmark = pytest.mark.slow


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-loopback",
        "object": "chat.completion.chunk",
        "model": "gpt-4.1-mini",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _reply(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The lead delegates once, the subagent answers, then the lead answers."""
    tools = [t["function"]["name"] for t in body.get("tools", [])]
    usage = {
        "choices": [],
        "usage": {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15},
    }
    if "delegate_to_agent" in tools and body["messages"][-1]["role"] == "user":
        arguments = json.dumps({"agent_name": "alpha", "task": "say hello"})
        call = {
            "index": 0,
            "id": "call_1",
            "type": "function",
            "function": {"name": "delegate_to_agent", "arguments": arguments},
        }
        return [
            _chunk({"role": "assistant", "tool_calls": [call]}),
            _chunk({}, "tool_calls"),
            usage,
        ]
    text = "hello from the subagent" if "delegate_to_agent" not in tools else "final answer"
    return [_chunk({"role": "assistant", "content": text}), _chunk({}, "stop"), usage]


def _completion(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The streamed chunks of ``_reply`` folded into one non-streaming completion."""
    message: dict[str, Any] = {"role": "assistant", "content": None}
    finish, usage = None, None
    for event in events:
        usage = event.get("usage", usage)
        for choice in event["choices"]:
            message.update({k: v for k, v in choice["delta"].items() if k != "role"})
            finish = choice["finish_reason"] or finish
    for call in message.get("tool_calls", []):
        call.pop("index", None)
    return {
        "id": "chatcmpl-loopback",
        "object": "chat.completion",
        "model": "gpt-4.1-mini",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }


class _Handler(BaseHTTPRequestHandler):
    requests: list[tuple[str, dict[str, str], dict[str, Any]]]

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        events = _reply(body)
        if body.get("stream") is True:
            payload = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
            kind = "text/event-stream"
        else:  # a Temporal worker's request: the same reply as one JSON completion
            payload, kind = json.dumps(_completion(events)), "application/json"
        data = payload.encode()
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def openai_loopback() -> Iterator[tuple[str, list[Any]]]:
    recorded: list[Any] = []
    handler = type("Handler", (_Handler,), {"requests": recorded})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", recorded
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_openai_key_selects_openai_and_says_so(
    tmp_path: Path, openai_loopback: tuple[str, list[Any]]
) -> None:
    base_url, recorded = openai_loopback
    agents = tool_free_agents(tmp_path / "agents", "alpha")
    env = offline_env(OPENAI_API_KEY="sk-loopback-not-real", OPENAI_BASE_URL=base_url)
    done = run_cli("run", "--agents", str(agents), "Greet me", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    expected = dict(DEFAULT_MODELS)["OPENAI_API_KEY"]
    first = done.stdout.splitlines()[0]
    assert first == f"Model: {expected} (OPENAI_API_KEY is set; pass --model to choose another)"
    assert "alpha: delegation completed (complete)" in done.stdout
    assert done.stdout.rstrip().endswith("Answer:\nfinal answer")
    assert len(recorded) == 3  # lead, subagent, lead
    for path, headers, body in recorded:
        assert path == "/v1/chat/completions"
        assert headers["authorization"] == "Bearer sk-loopback-not-real"
        assert body["model"] == expected.split("/", 1)[1]
    assert "sk-loopback-not-real" not in done.stdout + done.stderr  # keys are never shown
