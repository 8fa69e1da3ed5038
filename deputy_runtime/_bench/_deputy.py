"""The deputy_runtime contender: a LeadAgent with the full feature set on.

Full feature set: standard permissions, a PreToolUse hook registered (it runs for the
lead's delegate calls), request and tool-call budgets large enough never to stop the run
(every delegation still reserves and settles its share), and every event consumed through
``run_stream``. The definition sets ``max_requests=1`` (its model answers in one
response): a child reserves min(definition, lead's remaining budget), so without it the
first of N concurrent children would reserve the whole remaining budget and its siblings
would start with none. Token and cost budgets are not set for the same reason: the
budget arithmetic hands a child all the remaining tokens and cost, which leaves nothing to
a concurrent sibling. The subagent is built fresh on every delegation from a small definition,
as the runtime always does. One zero-cost provider answers both the lead and the children
(a subagent with model ``inherit`` gets a copy of the lead's chat): the lead's requests
carry tools (``delegate_to_agent``), the children's carry none.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import anyio.lowlevel
import msgspec

from ..chat import (
    AssistantTurn,
    ContentText,
    ContentToolRequest,
    ContentToolResult,
    ModelRequest,
    StreamDelta,
    Usage,
)
from ._shape import (
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

__all__ = ["CannedProvider", "DeputyContender", "create"]

_USAGE = Usage(requests=1, input_tokens=TOKENS_IN, output_tokens=TOKENS_OUT)
#: Large enough never to stop a 10,000-delegation fan-out, small enough to be real limits.
_BIG = 10**9


class _Outcome(msgspec.Struct):
    """The one field of a delegation outcome the lead's model reads."""

    answer: str | None = None


_decode_outcome = msgspec.json.Decoder(_Outcome).decode


def _answer(result: ContentToolResult) -> str | None:
    if result.error is not None:
        return None
    value = result.value
    if isinstance(value, (str, bytes)):
        return _decode_outcome(value).answer
    if isinstance(value, dict):
        answer = value.get("answer")
        return answer if isinstance(answer, str) else None
    return None


class CannedProvider:
    """A zero-cost Provider: canned replies built per request in microseconds.

    Lead requests (they offer tools) get ``n`` delegate calls first, then ``done:K``;
    subagent requests (no tools) get :data:`CHILD_ANSWER`. ``stream`` yields only the
    final turn, so event-consuming runs pay for the streaming path but no delta building.
    """

    name = "bench"

    def __init__(self, child_yields: bool = False, model: str = "canned") -> None:
        self.model = model
        self.n = 1
        self._child_yields = child_yields

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        """One canned reply; see the class docstring."""
        if not request.tools:
            if self._child_yields:
                await anyio.lowlevel.checkpoint()
            return AssistantTurn((ContentText(CHILD_ANSWER),), _USAGE, "stop")
        last = request.turns[-1] if request.turns else None
        results = (
            [c for c in last.contents if isinstance(c, ContentToolResult)]
            if last is not None and last.role == "user"
            else []
        )
        if not results:
            calls = tuple(
                ContentToolRequest(
                    f"call_{i}",
                    "delegate_to_agent",
                    {"agent_name": CHILD_NAME, "task": task_text(i)},
                )
                for i in range(self.n)
            )
            return AssistantTurn(calls, _USAGE, "tool_calls")
        return AssistantTurn((ContentText(done(_answer(r) for r in results)),), _USAGE, "stop")

    async def stream(
        self, request: ModelRequest
    ) -> AsyncGenerator[StreamDelta | AssistantTurn, None]:
        """The canned reply as a stream: just the final turn (no deltas to build)."""
        yield await self.complete(request)

    def with_model(self, model: str) -> CannedProvider:
        """The same canned replies under another model name."""
        other = CannedProvider(self._child_yields, model)
        other.n = self.n
        return other


class DeputyContender:
    """A LeadAgent with permissions, a PreToolUse hook, budgets and consumed events."""

    name = "deputy_runtime"
    version = distribution_version("deputy-runtime")

    def __init__(self, child_yields: bool = False) -> None:
        # The public API, exactly as a user writes it.
        from .. import (
            HookEvent,
            Hooks,
            LeadAgent,
            PermissionMode,
            Permissions,
            UsageLimits,
            __version__,
            agent_definition,
        )
        from ..chat import Chat

        self.version = f"deputy_runtime {__version__}"
        self.provider = CannedProvider(child_yields)
        self.hook_calls = 0
        self.events = 0
        hooks = Hooks()
        hooks.add(HookEvent.PreToolUse, self._pre_tool_use)
        self.lead = LeadAgent(
            Chat(self.provider, system_prompt=LEAD_PROMPT),
            sub_agents=[
                agent_definition(CHILD_NAME, CHILD_DESCRIPTION, CHILD_PROMPT, max_requests=1)
            ],
            permissions=Permissions(mode=PermissionMode.STANDARD),
            usage_limits=UsageLimits(max_requests=_BIG, max_tool_calls=_BIG),
            hooks=hooks,
        )

    def _pre_tool_use(self, hook_input: Any) -> None:
        self.hook_calls += 1

    async def _run(self, n: int) -> str:
        self.provider.n = n
        # The lead's chat keeps its conversation between runs; every benchmark run is a
        # fresh task, as a host serving independent requests would run it.
        self.lead.chat.set_turns(())
        async for _event in self.lead.run_stream(task_text(-1)):
            self.events += 1
        result = self.lead.last_result
        return "" if result is None else result.response

    async def sequential(self) -> str:
        """One lead run with one delegation."""
        return await self._run(1)

    async def fanout(self, n: int) -> str:
        """One lead run whose first response asks for ``n`` delegations."""
        return await self._run(n)


def create(child_yields: bool = False) -> DeputyContender:
    """The deputy_runtime contender (worker factory)."""
    return DeputyContender(child_yields)
