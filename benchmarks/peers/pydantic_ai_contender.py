"""PydanticAI (pydantic-ai-slim) reproducing the benchmark workload.

Agent delegation the way PydanticAI documents it: the lead has a tool that runs the
subagent with ``usage=ctx.usage`` (so usage aggregates into the lead's run) and forwards
usage limits large enough never to stop a run. Both agents are built once and reused, as
PydanticAI users do. Models are ``FunctionModel``s answering canned responses that report
token usage.
"""

from __future__ import annotations

from typing import Any

import anyio.lowlevel
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage, UsageLimits

from deputy_runtime._bench._shape import (
    CHILD_ANSWER,
    CHILD_NAME,
    CHILD_PROMPT,
    LEAD_PROMPT,
    TOKENS_IN,
    TOKENS_OUT,
    distribution_version,
    done,
    task_text,
)

_LIMITS = UsageLimits(request_limit=10**9, tool_calls_limit=10**9)


def _usage() -> RequestUsage:
    return RequestUsage(input_tokens=TOKENS_IN, output_tokens=TOKENS_OUT)


class PydanticAIContender:
    name = "pydantic-ai"
    version = distribution_version("pydantic-ai-slim")

    def __init__(self, child_yields: bool = False) -> None:
        self.n = 1
        self._child_yields = child_yields
        self.child = Agent(FunctionModel(self._child_model), instructions=CHILD_PROMPT)
        self.lead = Agent(FunctionModel(self._lead_model), instructions=LEAD_PROMPT)
        child = self.child

        @self.lead.tool
        async def delegate_to_agent(ctx: RunContext[None], agent_name: str, task: str) -> str:
            """Delegate a task to a subagent."""
            assert agent_name == CHILD_NAME
            result = await child.run(task, usage=ctx.usage, usage_limits=_LIMITS)
            return result.output

    async def _child_model(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if self._child_yields:
            await anyio.lowlevel.checkpoint()
        return ModelResponse(parts=[TextPart(CHILD_ANSWER)], usage=_usage())

    async def _lead_model(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        results = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if not results:
            calls: list[Any] = [
                ToolCallPart(
                    "delegate_to_agent",
                    {"agent_name": CHILD_NAME, "task": task_text(i)},
                    tool_call_id=f"call_{i}",
                )
                for i in range(self.n)
            ]
            return ModelResponse(parts=calls, usage=_usage())
        return ModelResponse(parts=[TextPart(done(r.content for r in results))], usage=_usage())

    async def _run(self, n: int) -> str:
        self.n = n
        result = await self.lead.run(task_text(-1), usage_limits=_LIMITS)
        return str(result.output)

    async def sequential(self) -> str:
        return await self._run(1)

    async def fanout(self, n: int) -> str:
        return await self._run(n)


def create(child_yields: bool = False) -> PydanticAIContender:
    return PydanticAIContender(child_yields)
