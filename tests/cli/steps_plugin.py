"""A test-only ``deputy-runtime run --plugin``: a model that delegates one step per turn.

Registers the provider ``steps``. The lead's model delegates to its sub-agents one at a
time, in the order the ``delegate_to_agent`` schema lists them, one per turn: the n-th
request (n tool results in the conversation so far) delegates to the n-th agent, and once
every agent has answered it says ``done``. It decides from the conversation alone, so a
run resumed in another process continues exactly where the saved one was. A sub-agent
answers at once, except one whose name starts with ``hang`` while ``STEPS_PLUGIN_HANG``
names a file: it creates that file and waits for ever (the test kills the process then).
Every reply reports :data:`STEP_USAGE`.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio

from deputy_runtime import register_provider
from deputy_runtime.chat import (
    AssistantTurn,
    ContentToolResult,
    ModelRequest,
    StreamDelta,
    Usage,
    current_agent_name,
    reply,
    tool_call,
)

STEP_USAGE = Usage(requests=1, input_tokens=10, output_tokens=5)
_DELEGATE = "delegate_to_agent"


class StepsProvider:
    """See the module docstring."""

    def __init__(self, model: str = "v1") -> None:
        self.name = "steps"
        self.model = model

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        agent = current_agent_name() or ""
        delegate = next((t for t in request.tools if t.name == _DELEGATE), None)
        if delegate is None:  # a sub-agent
            marker = os.environ.get("STEPS_PLUGIN_HANG")
            if agent.startswith("hang") and marker:
                Path(marker).touch()
                await anyio.sleep_forever()
            return reply(f"{agent} did its step", usage=STEP_USAGE)
        names = delegate.parameters["properties"]["agent_name"]["enum"]
        done = sum(
            1 for turn in request.turns for c in turn.contents if isinstance(c, ContentToolResult)
        )
        if done < len(names):
            arguments = {"agent_name": names[done], "task": f"step {done + 1}"}
            return tool_call(_DELEGATE, arguments, id=f"step_{done + 1}", usage=STEP_USAGE)
        return reply(f"done after {done} steps", usage=STEP_USAGE)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta | AssistantTurn]:
        yield await self.complete(request)

    def with_model(self, model: str) -> StepsProvider:
        return StepsProvider(model)


register_provider(
    "steps", lambda model, **_: StepsProvider(model), default_model="v1", replace=True
)
