"""A test-only ``--plugin`` for ``mcp-serve``: a model that can answer in a schema.

The offline ``test`` model answers in prose, which no ``output_schema`` accepts, so the
structured-result tests need a model that writes JSON; a real model cannot run offline.
Provider ``verdict`` answers like the ``test`` provider, except that the agent named
``judge`` answers ``{"verdict": "holds", "reason": ...}`` naming the task it was given.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from deputy_runtime import register_provider
from deputy_runtime.chat import (
    AssistantTurn,
    ContentText,
    ModelRequest,
    StreamDelta,
    TestProvider,
    current_agent_name,
)


class VerdictProvider:
    """The test provider, with a JSON answer for the ``judge`` agent."""

    def __init__(self, model: str = "v1") -> None:
        self.name = "verdict"
        self.model = model
        self._inner = TestProvider(model=model, name="verdict")

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        turn = await self._inner.complete(request)
        if current_agent_name() != "judge":
            return turn
        task = next(
            (c.text for t in request.turns for c in t.contents if isinstance(c, ContentText)),
            "",
        )
        answer = json.dumps({"verdict": "holds", "reason": f"judged: {task[:60]}"})
        return AssistantTurn(contents=(ContentText(answer),), usage=turn.usage)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta | AssistantTurn]:
        yield await self.complete(request)

    def with_model(self, model: str) -> VerdictProvider:
        return VerdictProvider(model)


register_provider(
    "verdict", lambda model, **_: VerdictProvider(model), default_model="v1", replace=True
)
