"""What a running tool may ask of the run that called it: a model request, a person.

A tool call runs inside its run's task, so while it runs :func:`current_caller` returns a
:class:`CallerRun` for that run (the innermost one: a subagent's, inside its lead's
delegate call). A tool source that the other side can ask things of (an MCP server's
``sampling/createMessage`` and ``elicitation/create``) captures it when the call starts
and answers through it; nothing outside the runtime sees the run itself.

Rules:

* :meth:`CallerRun.sample` is a model request of the run: made with the run's own chat
  (its provider and parameters), checked against the run's limits first exactly like
  the loop's own requests (a delegation at its share tops up from its lead; a lead's
  shared budget is drawn from), counted in the run's usage (so in the delegation's
  settled usage and the lead's), and refused with
  :class:`~deputy_runtime.errors.SamplingError`
  once the budget is spent: no request is made then.
* It passes the PreToolUse hooks (the agent's own and its lead's, as every tool call
  does) as a call of the tool ``<source>/sampling`` whose input is the request: a deny
  or a stop refuses it, a stop also ends the run at its next boundary.
* Every request, answered or refused, is an :class:`McpSamplingEvent` in the stream.
* :meth:`CallerRun.ask_human` reaches the person behind the run the way ``ask_user``
  does (a delegation: ``DelegationPolicy.human_input`` with its context); a run without
  one refuses with :class:`~deputy_runtime.errors.HumanInputUnavailable`.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import anyio

from ..chat import (
    AssistantTurn,
    ContentToolRequest,
    ModelRequest,
    Turn,
    reset_current_agent,
    set_current_agent,
)
from ..errors import HumanInputUnavailable, ProviderError, SamplingError
from ._context import RunContext
from ._events import McpSamplingEvent
from ._gate import hook_refusal
from ._hooks import HookEvent
from ._states import StopReason

__all__ = ["CallerRun", "caller_scope", "current_caller", "sampling_tool_name"]

# The run, not a CallerRun: setting it costs nothing per tool call; the handle is built
# only when a tool asks for it.
_current: ContextVar[RunContext | None] = ContextVar("deputy_runtime_caller_run", default=None)


def sampling_tool_name(source: str) -> str:
    """The tool name PreToolUse hooks see for a sampling request of ``source``.

    ``/`` never occurs in a tool name, so it cannot be confused with a real tool.
    """
    return f"{source}/sampling"


class CallerRun:
    """The run that made the tool call in progress (see the module rules).

    Attributes:
        working_dir: The running agent's working directory (a subagent's is its lead's).
        agent_name: The running agent's name.
        run_id: The run's id.
    """

    __slots__ = ("_ctx", "_human", "agent_name", "run_id", "working_dir")

    def __init__(self, ctx: RunContext) -> None:
        self._ctx = ctx
        owner = ctx.owner
        self.working_dir: Path = owner.working_dir
        self.agent_name = owner.name
        #: Tells runs apart: the calls of one run share it, whichever call asks.
        self.run_id = ctx.run_id
        gov = owner.governance
        self._human = None if gov is None else gov.human_input

    @property
    def model(self) -> str:
        """The model that answers the run's requests (its chat's provider's)."""
        return str(self._ctx.owner.chat.provider.model)

    def event_ids(self) -> dict[str, Any]:
        """The id fields of the run's events (agent, run, delegation and parents)."""
        return self._ctx.event_ids()

    async def sample(
        self,
        *,
        source: str,
        system_prompt: str | None,
        turns: Sequence[Turn],
        params: Mapping[str, Any],
        hook_input: Mapping[str, Any],
    ) -> AssistantTurn:
        """One model request of the run on behalf of ``source`` (an MCP tool prefix).

        Args:
            source: Who asks (``mcp__<server>``): the event's ``server`` and the hooks'
                tool name prefix.
            system_prompt: The request's system prompt (the run's own is not sent).
            turns: The conversation to answer.
            params: Request parameters over the chat's (``max_tokens``, ...).
            hook_input: What the PreToolUse hooks see as the call's ``tool_input``.

        Returns:
            The model's reply (its usage is already counted).

        Raises:
            SamplingError: The run's budget is spent, a hook refused, the run is
                stopping, or the provider failed; the message says which.
        """
        ctx = self._ctx
        lock = ctx.sampling
        if lock is None:
            lock = ctx.sampling = anyio.Lock()
        # One at a time per run: concurrent tool calls of a turn could otherwise both
        # pass the limit check before either request is counted.
        async with lock:
            return await self._sample(source, system_prompt, turns, params, hook_input)

    async def _sample(
        self,
        source: str,
        system_prompt: str | None,
        turns: Sequence[Turn],
        params: Mapping[str, Any],
        hook_input: Mapping[str, Any],
    ) -> AssistantTurn:
        ctx = self._ctx
        server = source.removeprefix("mcp__")
        started = time.perf_counter()
        refusal = await self._admit(source, hook_input)
        if refusal is not None:
            self._emit(server, None, refusal, started)
            raise SamplingError(refusal)
        meter = ctx.meter
        spend = ctx.spend
        chat = ctx.owner.chat
        provider = chat.provider
        request = ModelRequest(system_prompt, tuple(turns), (), {**chat.params, **params})
        meter.start_request()
        reply: AssistantTurn | None = None
        token = set_current_agent(ctx.owner.name)
        try:
            reply = await provider.complete(request)
        except ProviderError as exc:
            message = f"the model request failed: {exc}"
            self._emit(server, None, message, started)
            raise SamplingError(message) from exc
        finally:
            reset_current_agent(token)
            if spend is not None:
                await spend.after_request(reply.usage if reply is not None else None)
        meter.add_response(reply.usage)
        self._emit(server, reply, None, started)
        return reply

    async def _admit(self, source: str, hook_input: Mapping[str, Any]) -> str | None:
        """Why the request may not be made (limits, interrupt, hooks), or ``None``."""
        ctx = self._ctx
        if ctx.stop_reason is not None or ctx.owner.interrupt_reason is not None:
            return "the run is stopping"
        limit = ctx.meter.before_request()
        if limit is None and ctx.spend is not None:
            limit = await ctx.spend.before_request()
        if limit is not None:
            return f"the run's budget is spent ({limit.value}): {ctx.meter.shortfall(limit)}"
        if ctx.wants(HookEvent.PreToolUse):
            call = ContentToolRequest("", sampling_tool_name(source), dict(hook_input))
            decision = await ctx.fire(ctx.hook_input(HookEvent.PreToolUse, call=call))
            refusal = hook_refusal(decision)
            if refusal is not None:
                if decision is not None and decision.decision == "stop":
                    ctx.stop(StopReason.HOOK_REQUESTED_STOP)
                return refusal
        return None

    def _emit(
        self, server: str, reply: AssistantTurn | None, error: str | None, started: float
    ) -> None:
        emit = self._ctx.emit
        if emit is None:
            return
        usage = None if reply is None else reply.usage
        emit(
            McpSamplingEvent(
                **self._ctx.event_ids(),
                server=server,
                model=None if reply is None else self._ctx.owner.chat.provider.model,
                input_tokens=0 if usage is None else usage.input_tokens,
                output_tokens=0 if usage is None else usage.output_tokens,
                cost_usd=None if usage is None else usage.cost_usd,
                duration=time.perf_counter() - started,
                error=error,
            )
        )

    async def ask_human(self, questions: list[dict[str, Any]]) -> Mapping[str, Any]:
        """Ask the person behind the run, as ``ask_user`` does.

        Args:
            questions: ``{"question": str, "options": list[str] | None}`` dicts.

        Returns:
            The handler's answers: question text -> answer.

        Raises:
            HumanInputUnavailable: The run has no human input (not a delegation of a lead
                with ``DelegationPolicy(human_input=...)``).
        """
        human = self._human
        if human is None:
            raise HumanInputUnavailable(
                "no human input is available to this run: a lead gives its delegations "
                "one with DelegationPolicy(human_input=...)"
            )
        answers = human(questions)
        if inspect.isawaitable(answers):
            answers = await answers
        if not isinstance(answers, Mapping):
            raise TypeError(
                "human_input must return a mapping of question -> answer, got "
                f"{type(answers).__name__}"
            )
        return answers


def current_caller() -> CallerRun | None:
    """The run whose tool call is in progress in this task, or ``None`` outside one."""
    ctx = _current.get()
    return None if ctx is None else CallerRun(ctx)


@contextmanager
def caller_scope(ctx: RunContext) -> Iterator[None]:
    """Make ``ctx``'s run the current caller while one of its tool calls runs."""
    token = _current.set(ctx)
    try:
        yield
    finally:
        _current.reset(token)
