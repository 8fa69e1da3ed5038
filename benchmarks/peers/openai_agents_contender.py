"""OpenAI Agents SDK (openai-agents) reproducing the benchmark workload.

Delegation the way the SDK documents it: the subagent becomes a tool with
``Agent.as_tool`` and the lead calls it, in parallel tool calls for the fan-out. Tracing
is disabled globally and per run. Both agents are built once and reused. Models are
``Model`` subclasses returning canned responses that report token usage.
"""

from __future__ import annotations

import json
from typing import Any

import anyio.lowlevel
from agents import Agent, ModelSettings, RunConfig, Runner, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from deputy_runtime._bench._shape import (
    CHILD_ANSWER,
    CHILD_DESCRIPTION,
    CHILD_NAME,
    CHILD_PROMPT,
    LEAD_PROMPT,
    TOKENS_IN,
    TOKENS_OUT,
    distribution_version,
    done,
    task_text,
)

set_tracing_disabled(True)
_RUN_CONFIG = RunConfig(tracing_disabled=True)


def assistant_message(text: str) -> ResponseOutputMessage:
    """An assistant text output item, as the Responses API returns it."""
    content = ResponseOutputText(text=text, type="output_text", annotations=[])
    return ResponseOutputMessage(
        id="msg", type="message", role="assistant", status="completed", content=[content]
    )


def function_call(name: str, arguments: str, call_id: str) -> ResponseFunctionToolCall:
    """A function-tool call output item."""
    return ResponseFunctionToolCall(
        id=call_id, call_id=call_id, type="function_call", name=name, arguments=arguments
    )


def _usage() -> Usage:
    return Usage(
        requests=1,
        input_tokens=TOKENS_IN,
        output_tokens=TOKENS_OUT,
        total_tokens=TOKENS_IN + TOKENS_OUT,
    )


class _CannedModel(Model):
    """A zero-cost model: ``answer(input)`` builds the canned response."""

    def __init__(self, answer: Any) -> None:
        self._answer = answer

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        return ModelResponse(output=await self._answer(input), usage=_usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the benchmark never streams")


class OpenAIAgentsContender:
    name = "openai-agents"
    version = distribution_version("openai-agents")

    def __init__(self, child_yields: bool = False) -> None:
        self.n = 1
        self._child_yields = child_yields
        child = Agent(name=CHILD_NAME, instructions=CHILD_PROMPT, model=_CannedModel(self._child))
        tool = child.as_tool("delegate_to_agent", CHILD_DESCRIPTION, run_config=_RUN_CONFIG)
        self.lead = Agent(
            name="lead",
            instructions=LEAD_PROMPT,
            model=_CannedModel(self._lead),
            tools=[tool],
            model_settings=ModelSettings(parallel_tool_calls=True),
        )

    async def _child(self, input: Any) -> list[Any]:
        if self._child_yields:
            await anyio.lowlevel.checkpoint()
        return [assistant_message(CHILD_ANSWER)]

    async def _lead(self, input: Any) -> list[Any]:
        outputs = [
            item.get("output")
            for item in input
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        ]
        if not outputs:
            return [
                function_call("delegate_to_agent", json.dumps({"input": task_text(i)}), f"call_{i}")
                for i in range(self.n)
            ]
        return [assistant_message(done(outputs))]

    async def _run(self, n: int) -> str:
        self.n = n
        result = await Runner.run(self.lead, task_text(-1), max_turns=10, run_config=_RUN_CONFIG)
        return str(result.final_output)

    async def sequential(self) -> str:
        return await self._run(1)

    async def fanout(self, n: int) -> str:
        return await self._run(n)


def create(child_yields: bool = False) -> OpenAIAgentsContender:
    return OpenAIAgentsContender(child_yields)
