"""Chat: a conversation with one provider, plus a tool loop.

Your input enters the history together with the assistant turn that answered it, so a
first request that is cancelled or fails rolls your input back (send it again to retry).
Tool results are different: tools may have side effects, so each round's results turn is
committed as soon as its tools finish, before the next request. A later request that
fails or is cancelled leaves the history ending with that results turn, and the next
input is merged into it (one user turn, never two in a row), so the model sees what the
tools really returned instead of being told they never ran. Only tool requests left
without any result (a round cancelled before a call finished, or hand-edited turns) are
answered with "not answered (cancelled)" error results before the next request, because
providers reject histories with unanswered tool calls.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Literal

import anyio

from ..errors import ToolLoopLimitError
from ..tools import Tool
from ._stream import stream_request
from ._toolloop import (
    CANCELLED_TOOL_CALL_ERROR,
    run_tools,
    user_turn_after,
)
from ._types import (
    AssistantTurn,
    Content,
    ContentText,
    ContentThinking,
    ContentToolRequest,
    ContentToolResult,
    ModelRequest,
    Provider,
    Turn,
    Usage,
)

__all__ = ["DEFAULT_MAX_TOOL_ROUNDS", "Chat"]

#: Tool rounds one ``chat_async`` call may run before :class:`ToolLoopLimitError`.
DEFAULT_MAX_TOOL_ROUNDS = 25

_EMPTY_PARAMS: Mapping[str, Any] = {}
_CONTENT_TYPES = (ContentText, ContentThinking, ContentToolRequest, ContentToolResult)


class Chat:
    """A conversation with one model provider: send input, run tools, keep the turns.

    ``chat_async``/``stream_async``/``chat`` send your input, run the tool loop
    (concurrent tool calls, errors returned to the model) and record the turns. The
    system prompt is kept apart from the turns. Construction and :meth:`clone` are
    cheap: turns and content are immutable and shared, only the lists are copied.
    One ``Chat`` runs one exchange at a time; use :meth:`clone` for parallel ones.
    """

    __slots__ = (
        "_busy",
        "_params",
        "_system_prompt",
        "_tools",
        "_turns",
        "_usage",
        "max_tool_rounds",
        "provider",
    )

    provider: Provider
    max_tool_rounds: int

    def __init__(
        self,
        provider: Provider,
        system_prompt: str | Sequence[str] | None = None,
        *,
        tools: Iterable[Tool] = (),
        turns: Sequence[Turn] = (),
        max_tool_rounds: int = DEFAULT_MAX_TOOL_ROUNDS,
        params: Mapping[str, Any] | None = None,
    ) -> None:
        if not callable(getattr(provider, "complete", None)):
            raise TypeError(
                f"provider must implement the Provider protocol (an async complete() method); "
                f"got {type(provider).__name__}"
            )
        if isinstance(max_tool_rounds, bool) or not isinstance(max_tool_rounds, int):
            raise TypeError("max_tool_rounds must be an int")
        if max_tool_rounds < 0:
            raise ValueError(f"max_tool_rounds must be >= 0, got {max_tool_rounds}")
        self.provider = provider
        self.max_tool_rounds = max_tool_rounds
        self._system_prompt = _join_prompt(system_prompt)
        self._params: Mapping[str, Any] = dict(params) if params else _EMPTY_PARAMS
        self._tools: dict[str, Tool] = {}
        self._turns: list[Turn] = []
        self._usage: list[Usage] = []
        self._busy = False
        self.set_tools(tools)
        if turns:
            self.set_turns(turns)

    def __repr__(self) -> str:
        return (
            f"Chat(provider={getattr(self.provider, 'name', '?')}/"
            f"{getattr(self.provider, 'model', '?')}, turns={len(self._turns)}, "
            f"tools={list(self._tools)})"
        )

    # -- copies --------------------------------------------------------------------------

    def clone(self, *, turns: bool = True, tools: bool = True) -> Chat:
        """A copy with its own turns, tools and token log; the provider is shared.

        Turn and tool objects are immutable and shared, so this is a shallow, cheap copy.

        Args:
            turns: Copy the conversation; false starts the copy with none.
            tools: Copy the registered tools; false starts the copy with none.

        Returns:
            The new chat.
        """
        new = Chat.__new__(Chat)
        new.provider = self.provider
        new.max_tool_rounds = self.max_tool_rounds
        new._system_prompt = self._system_prompt
        new._params = self._params
        new._tools = dict(self._tools) if tools else {}
        new._turns = list(self._turns) if turns else []
        new._usage = list(self._usage) if turns else []
        new._busy = False
        return new

    def fresh(self, system_prompt: str | Sequence[str] | None = None) -> Chat:
        """A new chat on the same provider and params with no turns, no tools, no usage.

        This is the ``model="inherit"`` copy for a subagent: the lead's own system prompt
        describes the lead, so it is not carried over; pass the child's instead.

        Args:
            system_prompt: The new chat's system prompt (a sequence is joined with blank lines).

        Returns:
            The new chat.
        """
        new = self.clone(turns=False, tools=False)
        new._system_prompt = _join_prompt(system_prompt)
        return new

    # -- accessors -----------------------------------------------------------------------

    @property
    def params(self) -> Mapping[str, Any]:
        """Model parameters sent with every request (``ModelRequest.params``)."""
        return self._params

    def set_params(self, params: Mapping[str, Any] | None) -> None:
        """Replace the model parameters.

        Args:
            params: Sent with every request (``temperature``, ...); ``None`` clears them.
        """
        self._params = dict(params) if params else _EMPTY_PARAMS

    def get_model(self) -> str:
        """The provider's model name.

        Returns:
            The model name, e.g. ``"gpt-4.1-mini"``.
        """
        return self.provider.model

    def get_system_prompt(self) -> str | None:
        """The system prompt.

        Returns:
            The system prompt, or ``None`` when there is none.
        """
        return self._system_prompt

    def set_system_prompt(self, value: str | Sequence[str] | None) -> None:
        """Set the system prompt.

        Args:
            value: The prompt; a sequence is joined with blank lines, ``None`` removes it.
        """
        self._system_prompt = _join_prompt(value)

    def get_tools(self) -> list[Tool]:
        """The registered tools.

        Returns:
            The tools, in registration order.
        """
        return list(self._tools.values())

    def register_tool(self, tool: Tool) -> None:
        """Offer ``tool`` to the model; a tool with the same name is replaced.

        Args:
            tool: The tool.

        Raises:
            TypeError: ``tool`` is not a Tool.
        """
        if not isinstance(tool, Tool):
            raise TypeError(f"register_tool() expects a Tool, got {type(tool).__name__}")
        self._tools[tool.name] = tool

    def register_tools(self, tools: Iterable[Tool]) -> None:
        """Register several tools, in order (a later tool replaces an earlier namesake).

        Args:
            tools: The tools.

        Raises:
            TypeError: One of them is not a Tool.
        """
        for tool in tools:
            self.register_tool(tool)

    def set_tools(self, tools: Iterable[Tool]) -> None:
        """Replace all registered tools.

        Args:
            tools: The new tools.

        Raises:
            TypeError: One of them is not a Tool.
            ValueError: Two tools have the same name.
        """
        registry: dict[str, Tool] = {}
        for tool in tools:
            if not isinstance(tool, Tool):
                raise TypeError(f"set_tools() expects Tool objects, got {type(tool).__name__}")
            if tool.name in registry:
                raise ValueError(f"set_tools(): two tools are named {tool.name!r}")
            registry[tool.name] = tool
        self._tools = registry

    def get_turns(self, include_system_prompt: bool = False) -> list[Turn]:
        """A copy of the conversation.

        Args:
            include_system_prompt: Put the system prompt first, as a system turn.

        Returns:
            The turns, oldest first.
        """
        if include_system_prompt and self._system_prompt is not None:
            return [Turn("system", (ContentText(self._system_prompt),)), *self._turns]
        return list(self._turns)

    def set_turns(self, turns: Sequence[Turn]) -> None:
        """Replace the conversation.

        A leading system turn becomes the system prompt (so ``get_turns(True)`` round trips).
        The token log is kept.

        Args:
            turns: The new conversation.

        Raises:
            TypeError: An item is not a Turn.
            ValueError: A system turn appears after the first turn.
            RuntimeError: The chat is running an exchange.
        """
        self._check_idle("set_turns")
        new = list(turns)
        for position, turn in enumerate(new):
            if not isinstance(turn, Turn):
                raise TypeError(f"turns[{position}] is a {type(turn).__name__}, expected a Turn")
            if turn.role == "system" and position > 0:
                raise ValueError(f"turns[{position}] is a system turn; only the first may be")
        if new and new[0].role == "system":
            self._system_prompt = new.pop(0).text
        self._turns = new

    def last_turn(self, role: Literal["assistant", "user", "system"] = "assistant") -> Turn | None:
        """The most recent turn with ``role``.

        Args:
            role: ``"assistant"``, ``"user"``, or ``"system"`` for the system prompt.

        Returns:
            The turn, or ``None`` when there is none.
        """
        if role == "system":
            if self._system_prompt is None:
                return None
            return Turn("system", (ContentText(self._system_prompt),))
        for turn in reversed(self._turns):
            if turn.role == role:
                return turn
        return None

    def get_tokens(self) -> list[Usage]:
        """The usage of each completed request this chat made, oldest first.

        Cancelled or failed requests are not included; neither are requests made directly
        through ``chat.provider``. Sum them with :meth:`get_usage`.

        Returns:
            One :class:`Usage` per completed request.
        """
        return list(self._usage)

    def get_usage(self) -> Usage:
        """The total usage of this chat's completed requests.

        Returns:
            The sum of :meth:`get_tokens`.
        """
        total = Usage()
        for usage in self._usage:
            total = total + usage
        return total

    def get_cost(self, include: Literal["all", "last"] = "all") -> float | None:
        """The cost the provider reported for this chat's requests.

        Args:
            include: ``"all"`` for every completed request, ``"last"`` for the latest one.

        Returns:
            The summed ``cost_usd``, or ``None`` when the provider reported no cost.
        """
        if include == "last":
            return self._usage[-1].cost_usd if self._usage else None
        if include != "all":
            raise ValueError(f"include must be 'all' or 'last', got {include!r}")
        return self.get_usage().cost_usd

    # -- talking -------------------------------------------------------------------------

    async def chat_async(self, *inputs: str | Content) -> str:
        """Send ``inputs`` as one user turn, run the tool loop, return the final text.

        Tool calls of one turn run concurrently; their results go back in request order,
        failures as ``Tool calling failed with error ...``. Each completed request is committed
        with the user turn it answered, and each round of tool results as soon as its tools
        finish. On cancellation or error your input is dropped if no reply to it arrived; tool
        results already recorded stay, and your next input is merged into their user turn.

        Args:
            *inputs: Text or content blocks, sent together as one user turn.

        Returns:
            The model's final text, after the last tool round.

        Raises:
            ToolLoopLimitError: The model kept calling tools for more than
                ``max_tool_rounds`` rounds.
            ProviderError: The provider failed.
            RuntimeError: The chat is already running an exchange (clone it for a parallel one).
        """
        async with aclosing(self._exchange(inputs, stream=False)) as exchange:
            async for _ in exchange:
                pass
        return self._turns[-1].text

    async def stream_async(self, *inputs: str | Content) -> AsyncGenerator[str, None]:
        """Like :meth:`chat_async` but yield text chunks as they arrive, across tool rounds.

        Close the generator (``contextlib.aclosing``) if you stop early: the request is
        abandoned and the turns stay as they were before it.

        Args:
            *inputs: Text or content blocks, sent together as one user turn.

        Returns:
            An async generator of text chunks.

        Raises:
            ToolLoopLimitError: The model kept calling tools for more than
                ``max_tool_rounds`` rounds.
            ProviderError: The provider failed.
        """
        async with aclosing(self._exchange(inputs, stream=True)) as exchange:
            async for chunk in exchange:
                yield chunk

    def chat(self, *inputs: str | Content) -> str:
        """Synchronous :meth:`chat_async` (on a new asyncio loop).

        Args:
            *inputs: Text or content blocks, sent together as one user turn.

        Returns:
            The model's final text.

        Raises:
            RuntimeError: Called inside a running asyncio or trio loop, where blocking would
                deadlock it: await :meth:`chat_async` there.
        """
        running = running_async_library()
        if running is not None:
            raise RuntimeError(
                f"Chat.chat() cannot run inside a running {running} event loop; "
                "use 'await chat.chat_async(...)' instead"
            )
        return anyio.run(self._chat_sync, inputs)

    async def _chat_sync(self, inputs: tuple[str | Content, ...]) -> str:
        return await self.chat_async(*inputs)

    def _check_idle(self, what: str) -> None:
        if self._busy:
            raise RuntimeError(
                f"{what}(): this Chat is running an exchange; wait for it, or clone() the "
                "chat for a parallel conversation"
            )

    async def _exchange(
        self, inputs: tuple[str | Content, ...], *, stream: bool
    ) -> AsyncGenerator[str, None]:
        contents = _input_contents(inputs)
        self._check_idle("chat_async")
        self._busy = True
        try:
            # Tool results kept after a failed or cancelled request, or the error results
            # of max_tool_rounds, are merged with the input: never two user turns.
            base, pending = user_turn_after(self._turns, contents)
            tools = dict(self._tools)
            specs = tuple(tool.spec() for tool in tools.values())
            rounds = 0
            while True:
                request = ModelRequest(self._system_prompt, (*base, pending), specs, self._params)
                if stream:
                    reply: AssistantTurn | None = None
                    async with aclosing(self._stream_reply(request)) as chunks:
                        async for chunk in chunks:
                            if isinstance(chunk, AssistantTurn):
                                reply = chunk
                            else:
                                yield chunk
                    assert reply is not None  # _stream_reply always ends with the turn
                else:
                    reply = await self.provider.complete(request)
                assistant = reply.turn()
                base = [*base, pending, assistant]
                self._turns = base  # the exchange is committed only here
                self._usage.append(reply.usage)
                requests = assistant.tool_requests
                if not requests:
                    return
                if rounds >= self.max_tool_rounds:
                    self._turns = [*base, _limit_results(requests, self.max_tool_rounds)]
                    raise ToolLoopLimitError(
                        f"the model still requested tools after max_tool_rounds="
                        f"{self.max_tool_rounds} rounds; its requests were answered with "
                        "errors and not run",
                        max_tool_rounds=self.max_tool_rounds,
                    )
                rounds += 1
                pending = await self._run_round(tools, base, requests)
        finally:
            self._busy = False

    async def _run_round(
        self,
        tools: Mapping[str, Tool],
        base: list[Turn],
        requests: Sequence[ContentToolRequest],
    ) -> Turn:
        """Run one round of tool calls concurrently and commit their results turn.

        The turn is committed here, before the next request, because the tools may have
        had side effects: if that request fails or is cancelled, the model must still see
        the real results, not be told the calls never ran (and maybe run them again). If
        the round itself is interrupted, the calls that already finished keep their
        results and only the others get the "not answered" error.
        """
        results: list[ContentToolResult | None] = [None] * len(requests)
        try:
            await run_tools(tools, requests, results)
        finally:
            # Also on cancellation; a round in which no call finished commits nothing
            # (its requests are repaired with the next input, see trailing_repairs).
            if any(result is not None for result in results):
                self._turns = [*base, _results_turn(requests, results)]
        return self._turns[-1]

    async def _stream_reply(
        self, request: ModelRequest
    ) -> AsyncGenerator[str | AssistantTurn, None]:
        emitted = False
        async with aclosing(stream_request(self.provider, request)) as events:
            async for event in events:
                if isinstance(event, AssistantTurn):
                    if not emitted and event.text:
                        yield event.text  # a complete()-only provider: one chunk
                    yield event
                    return
                if event.text:
                    emitted = True
                    yield event.text


def _results_turn(
    requests: Sequence[ContentToolRequest], results: Sequence[ContentToolResult | None]
) -> Turn:
    """The user turn answering ``requests``, in request order; missing results are errors."""
    return Turn(
        "user",
        tuple(
            result
            if result is not None
            else ContentToolResult(request.id, error=CANCELLED_TOOL_CALL_ERROR)
            for request, result in zip(requests, results, strict=True)
        ),
    )


def _limit_results(requests: Sequence[ContentToolRequest], limit: int) -> Turn:
    error = (
        f"Tool call not run: the tool loop reached its limit of {limit} rounds (max_tool_rounds)"
    )
    return Turn("user", tuple(ContentToolResult(r.id, error=error) for r in requests))


def running_async_library() -> str | None:
    """``"asyncio"`` or ``"trio"`` when called inside that event loop, else ``None``."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        return "asyncio"
    trio = sys.modules.get("trio")
    if trio is not None:
        try:
            trio.lowlevel.current_trio_token()
        except RuntimeError:
            pass
        else:
            return "trio"
    return None


def _join_prompt(value: str | Sequence[str] | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    parts = list(value)
    if not all(isinstance(p, str) for p in parts):
        raise TypeError("system_prompt must be a string, a sequence of strings, or None")
    return "\n\n".join(parts)


def _input_contents(inputs: tuple[str | Content, ...]) -> tuple[Content, ...]:
    if not inputs:
        raise ValueError("expected at least one input (a string or a Content value)")
    contents: list[Content] = []
    for position, item in enumerate(inputs):
        if isinstance(item, str):
            contents.append(ContentText(item))
        elif isinstance(item, _CONTENT_TYPES):
            contents.append(item)
        else:
            raise TypeError(
                f"input {position} is a {type(item).__name__}; expected a string or a Content value"
            )
    return tuple(contents)
