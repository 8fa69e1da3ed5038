"""PydanticAI's Temporal integration reproducing the Temporal benchmark's delegation.

A lead agent whose ``delegate_to_agent`` tool runs a subagent agent, both durable, the way
``pydantic_ai.durable_exec.temporal`` (2.68) documents it: each agent carries the
``TemporalDurability`` capability (``TemporalAgent`` is its deprecated predecessor), the
workflow lists both in ``__pydantic_ai_agents__`` (``PydanticAIWorkflow``), and the worker
and client use ``PydanticAIPlugin``. The tool's Temporal metadata selects where a
delegation runs:

* ``child``: ``{"child_workflow": ChildWorkflowConfig()}``, so every delegation is a child
  workflow running the subagent (its model request an activity there): the shape of
  deputy_runtime's ``SubagentWorkflow``;
* ``inline``: ``False``, so the tool body runs in the lead's workflow code and the
  subagent's model request is an activity of the lead's workflow.

Models are ``FunctionModel``s answering at once: the lead reads ``"<seq|par> <n>"`` from its
prompt and asks for n delegations one per turn (``seq``) or all in its first turn
(``par``), then answers ``done:K`` (K = tool results equal to the subagent's answer).

This module is imported by name (``pydantic_ai_temporal``) so Temporal's workflow sandbox
can re-import it; the agents are built at import time, outside any workflow, as the
integration requires.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.durable_exec.temporal import (
    PydanticAIPlugin,
    PydanticAIWorkflow,
    TemporalDurability,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage, UsageLimits
from temporalio import workflow
from temporalio.workflow import ChildWorkflowConfig

CHILD_ANSWER = "subagent-done"
_LIMITS = UsageLimits(request_limit=None, tool_calls_limit=None)

__all__ = ["CHILD_ANSWER", "LeadChild", "LeadInline", "PydanticAIPlugin", "parse_prompt"]


def parse_prompt(prompt: str) -> tuple[str, int]:
    """``"seq 5"`` -> ``("seq", 5)``."""
    mode, _, n = prompt.partition(" ")
    if mode not in ("seq", "par") or not n.isdigit():
        raise ValueError(f"prompt must be '<seq|par> <n>', got {prompt!r}")
    return mode, int(n)


def _usage() -> RequestUsage:
    return RequestUsage(input_tokens=12, output_tokens=4)


def _prompt(messages: list[ModelMessage]) -> str:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content
    raise ValueError("no user prompt in the conversation")


async def _lead_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    mode, n = parse_prompt(_prompt(messages))
    results = [
        p.content
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    ]
    want = (1 if len(results) < n else 0) if mode == "seq" else (n if not results else 0)
    if want:
        calls: list[Any] = [
            ToolCallPart(
                "delegate_to_agent",
                {"agent_name": "worker", "task": f"task {len(results) + i}"},
                tool_call_id=f"call_{len(results) + i}",
            )
            for i in range(want)
        ]
        return ModelResponse(parts=calls, usage=_usage())
    answer = f"done:{sum(1 for r in results if r == CHILD_ANSWER)}"
    return ModelResponse(parts=[TextPart(answer)], usage=_usage())


async def _child_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart(CHILD_ANSWER)], usage=_usage())


def _lead(name: str, child: Agent[None, str], where: Any) -> Agent[None, str]:
    lead: Agent[None, str] = Agent(
        FunctionModel(_lead_model),
        name=name,
        instructions="You lead.",
        capabilities=[TemporalDurability()],
    )

    @lead.tool(metadata={"temporal": where})
    async def delegate_to_agent(ctx: RunContext[None], agent_name: str, task: str) -> str:
        """Delegate a task to a subagent."""
        if agent_name != "worker":
            raise ValueError(f"unknown agent {agent_name!r}")
        result = await child.run(task, usage_limits=_LIMITS)
        return result.output

    return lead


def _child(name: str) -> Agent[None, str]:
    return Agent(
        FunctionModel(_child_model),
        name=name,
        instructions="You work.",
        capabilities=[TemporalDurability()],
    )


CHILD_FOR_CHILD = _child("pai_worker_child")
LEAD_CHILD = _lead("pai_lead_child", CHILD_FOR_CHILD, {"child_workflow": ChildWorkflowConfig()})
CHILD_INLINE = _child("pai_worker_inline")
LEAD_INLINE = _lead("pai_lead_inline", CHILD_INLINE, False)


@workflow.defn(name="PaiLeadChild")
class LeadChild(PydanticAIWorkflow):
    """The lead; every delegation is a child workflow running the subagent."""

    __pydantic_ai_agents__ = (LEAD_CHILD, CHILD_FOR_CHILD)

    @workflow.run
    async def run(self, prompt: str) -> str:
        """Run the lead on ``prompt`` and return its answer."""
        result = await LEAD_CHILD.run(prompt, usage_limits=_LIMITS)
        return result.output


@workflow.defn(name="PaiLeadInline")
class LeadInline(PydanticAIWorkflow):
    """The lead; every delegation runs in the lead's workflow code."""

    __pydantic_ai_agents__ = (LEAD_INLINE, CHILD_INLINE)

    @workflow.run
    async def run(self, prompt: str) -> str:
        """Run the lead on ``prompt`` and return its answer."""
        result = await LEAD_INLINE.run(prompt, usage_limits=_LIMITS)
        return result.output
