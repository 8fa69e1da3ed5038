"""A test-only ``--plugin`` for ``mcp-serve``: a model that leaves a command running.

Provider ``shellish`` answers like the offline ``test`` provider, except for the agent
named ``sleeper``: its first request starts ``sleep $SHELL_PLUGIN_SECONDS`` in the
background with the ``bash`` tool, and its next request never returns, so the call is
mid-flight, with a background command of its own, until the client cancels it. The
offline model cannot be told to do that; the sleep's unusual length is how the test finds
its process.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import anyio

from deputy_runtime import register_provider
from deputy_runtime.chat import (
    AssistantTurn,
    ContentToolResult,
    ModelRequest,
    StreamDelta,
    TestProvider,
    current_agent_name,
    tool_call,
)


class ShellishProvider:
    """The test provider, with a background command for the ``sleeper`` agent."""

    def __init__(self, model: str = "v1") -> None:
        self.name = "shellish"
        self.model = model
        self._inner = TestProvider(model=model, name="shellish")

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        if current_agent_name() != "sleeper":
            return await self._inner.complete(request)
        if not any(isinstance(c, ContentToolResult) for c in request.turns[-1].contents):
            seconds = os.environ["SHELL_PLUGIN_SECONDS"]
            return tool_call("bash", {"command": f"sleep {seconds}", "run_in_background": True})
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta | AssistantTurn]:
        yield await self.complete(request)

    def with_model(self, model: str) -> ShellishProvider:
        return ShellishProvider(model)


register_provider(
    "shellish", lambda model, **_: ShellishProvider(model), default_model="v1", replace=True
)
