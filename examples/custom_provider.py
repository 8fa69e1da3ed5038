"""Register your own model provider: a tiny keyword router that needs no network.

A provider is any object with ``name``, ``model``, ``async complete(request)``,
``stream(request)`` and ``with_model(model)`` (see ``deputy_runtime.chat.Provider``).
``register_provider("keyword", factory)`` makes ``chat("keyword/v1")`` build it - in your
code, in definitions (``model: keyword/v1``) and in the CLI.

This one routes like a (very small) lead model: it reads the generated "available
sub-agents" section of the lead's system prompt, delegates the task to the sub-agent
whose description shares the most words with it, and then reports the outcome.
Sub-agents answer with one sentence.

    python examples/custom_provider.py [asyncio|trio]
    python -m deputy_runtime run --plugin examples/custom_provider.py --model keyword/v1 \\
        --agents examples/agents "Summarize the README decisions"
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio

from deputy_runtime import LeadAgent, agent_definitions, chat, register_provider, tools_file
from deputy_runtime.chat import (
    AssistantTurn,
    ContentText,
    ContentToolRequest,
    ContentToolResult,
    ModelRequest,
    StreamDelta,
    Usage,
    current_agent_name,
)

_WORD = re.compile(r"[a-z]{4,}")


def _words(text: str) -> set[str]:
    return {w.rstrip("s") for w in _WORD.findall(text.lower())}


class KeywordProvider:
    """Deterministic, offline, and small enough to read in one go."""

    def __init__(self, model: str = "v1") -> None:
        self.name = "keyword"
        self.model = model

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        usage = Usage(requests=1, input_tokens=len(str(request.turns)) // 4, output_tokens=12)
        last = request.turns[-1]
        results = [c for c in last.contents if isinstance(c, ContentToolResult)]
        offered = {t.name for t in request.tools}
        if "delegate_to_agent" in offered and not results:
            agent = self._route(request.system_prompt or "", last.text)
            call = ContentToolRequest(
                "kw_1", "delegate_to_agent", {"agent_name": agent, "task": last.text}
            )
            return AssistantTurn((call,), usage, finish_reason="tool_use")
        if results:
            outcome = results[0]
            if outcome.error is not None:
                text = f"The delegation failed: {outcome.error.splitlines()[0]}"
            else:
                answer = json.loads(outcome.value)
                text = f"{answer['agent_name']} says: {answer['answer']}"
        else:
            brief = json.loads(last.text)["brief"]["task"]
            text = f"{current_agent_name() or 'I'} would handle: {brief}"
        return AssistantTurn((ContentText(text),), usage, finish_reason="stop")

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta | AssistantTurn]:
        turn = await self.complete(request)
        if turn.text:
            yield StreamDelta(text=turn.text)
        yield turn

    def with_model(self, model: str) -> KeywordProvider:
        return KeywordProvider(model)

    @staticmethod
    def _route(system_prompt: str, task: str) -> str:
        """The sub-agent whose description shares the most words with the task."""
        agents = re.findall(r"^## (\S+)\n(.+)$", system_prompt, re.M)
        wanted = _words(task)
        best = max(agents, key=lambda a: len(wanted & _words(f"{a[0]} {a[1]}")))
        return str(best[0])


register_provider(
    "keyword", lambda model, **_: KeywordProvider(model), default_model="v1", replace=True
)


ROOT = Path(__file__).resolve().parent.parent


async def main() -> int:
    root = ROOT
    registry = {t.name: t for t in tools_file(root)}
    definitions = agent_definitions(root / "examples" / "agents", tools=registry, markdown=True)
    lead = LeadAgent(chat("keyword/v1"), definitions, working_dir=root)
    for task in ("Summarize the design decisions", "Review this source code for bugs"):
        result = await lead.run(task)
        print(f"{task!r} -> {result.response}")
    return 0


if __name__ == "__main__":
    backend = sys.argv[1] if len(sys.argv) > 1 else "asyncio"
    sys.exit(anyio.run(main, backend=backend))
