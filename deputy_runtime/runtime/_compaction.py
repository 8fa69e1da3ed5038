"""Compaction: keeping a conversation inside its model's context window.

Before every model request the loop asks the run's :class:`Compactor` whether the
request fits (:meth:`Compactor.fit`). The request's size is estimated (characters/4 of
its JSON, calibrated upwards by the provider's reported input tokens: see
``deputy_runtime.chat``'s window module). Under ``threshold`` of the window it goes out
as it is. At or over it the conversation is compacted by the agent's strategy: the
PreCompact hooks run (``deny`` skips this compaction, ``stop`` ends the run), a
``compaction_start`` event, the strategy, a ``compaction_end`` event, the PostCompact
hooks. A request still bigger than the window afterwards is never sent: the run stops
with ``context_window`` (with ``on_exceed="error"``, :class:`ContextWindowExceeded` is
raised).

A strategy (:class:`CompactionStrategy`) gets a :class:`CompactionJob`: the turns, the
sizes it should reach and :meth:`CompactionJob.ask`, the only way it talks to the model.
Every ``ask`` is a model request of the run: checked against the run's limits first,
counted in its meter (and a lead's shared budget), and itself never bigger than the
window. Two strategies are built in: :class:`SummarizeOldest` (the default) and
:class:`DropToolResults`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar, Final, Protocol, TypeGuard, runtime_checkable

import msgspec

from ..chat import (
    AssistantTurn,
    Chat,
    ContentText,
    ContentToolRequest,
    ContentToolResult,
    ModelRequest,
    ToolSpec,
    Turn,
    WindowMeter,
    context_window,
    estimate_tokens,
    reset_current_agent,
    set_current_agent,
    window_value,
)
from ..errors import ProviderError
from ._context import RunContext
from ._events import CompactionEnd, CompactionStart
from ._hooks import HookEvent
from ._result import ProviderFailure
from ._states import StopReason

__all__ = [
    "DROPPED_RESULT_TEXT",
    "SUMMARY_HEADER",
    "Compaction",
    "CompactionJob",
    "CompactionStrategy",
    "Compactor",
    "DropToolResults",
    "SummarizeOldest",
    "check_turns",
    "compactor_for",
]

#: Starts the text that holds the summary in the first user turn; a later compaction
#: finds the earlier summary by it and summarises it again with the newer turns.
SUMMARY_HEADER: Final = "[Summary of the earlier conversation, written when it was compacted]\n"
#: What a dropped tool result is replaced with.
DROPPED_RESULT_TEXT: Final = "[tool result removed to save context; run the tool again if needed]"

_SUMMARY_SYSTEM: Final = (
    "You compact the transcript of an agent's work so that the agent can continue it. "
    "Write a faithful summary: the facts found, the decisions made, what was done and "
    "what is left to do, and the exact names, paths, identifiers and numbers that are "
    "still needed. Do not add anything that is not in the transcript."
)
_SUMMARY_ASK: Final = (
    "Summarise the transcript below in at most {words} words. If an earlier summary is "
    "given, the new summary replaces it: keep what it says that still matters."
)
# The smallest transcript piece worth a summary request, in characters.
_MIN_CHUNK_CHARS = 200
# The smallest summary worth a compaction, in tokens.
_MIN_SUMMARY_TOKENS = 32
_encoder = msgspec.json.Encoder()


def _fraction(
    where: str, value: object, low: float, high: float, *, low_open: bool = False
) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TypeError(f"{where} must be a number, got {value!r}")
    if (value <= low if low_open else value < low) or value > high:
        bound = f"above {low}" if low_open else f"at least {low}"
        raise ValueError(f"{where} must be {bound} and at most {high}, got {value!r}")


class CompactionHalted(Exception):
    """A compaction request was not sent: the run's stop reason says why."""


class CompactionJob:
    """What a strategy works on, and its one way to the model.

    Attributes:
        turns: The conversation (the first turn is the task, the first user message).
        system_prompt: The agent's system prompt (always sent; never compacted).
        tools: The tool schemas sent with every request.
        params: The chat's model parameters (used for the compaction requests too).
        window: The context window, in tokens.
        threshold: The size at which the conversation is compacted, in tokens.
        target: The size a compaction aims for, in tokens (below ``threshold``).
        tokens: The size of the request as it is now, in tokens.
    """

    __slots__ = (
        "_compactor",
        "_ctx",
        "params",
        "system_prompt",
        "target",
        "threshold",
        "tokens",
        "tools",
        "turns",
        "window",
    )

    def __init__(
        self,
        compactor: Compactor,
        ctx: RunContext,
        turns: tuple[Turn, ...],
        system_prompt: str | None,
        tools: tuple[ToolSpec, ...],
        params: Any,
        tokens: int,
    ) -> None:
        self._compactor = compactor
        self._ctx = ctx
        self.turns = turns
        self.system_prompt = system_prompt
        self.tools = tools
        self.params = params
        self.window = compactor.window
        self.threshold = compactor.threshold_tokens
        self.target = compactor.target_tokens
        self.tokens = tokens

    def estimate(self, turns: Sequence[Turn]) -> int:
        """The calibrated size, in tokens, of the agent's request with ``turns``."""
        request = ModelRequest(self.system_prompt, tuple(turns), self.tools, self.params)
        return self._compactor.meter.scaled(estimate_tokens(request))

    def chars_for(self, tokens: int) -> int:
        """How many characters of text fit in ``tokens`` by the calibrated estimate."""
        return max(0, math.floor(tokens * 4 / self._compactor.meter.ratio))

    def request_tokens(self, request: ModelRequest) -> int:
        """The calibrated size of any request, in tokens."""
        return self._compactor.meter.scaled(estimate_tokens(request))

    async def ask(self, request: ModelRequest) -> AssistantTurn:
        """Send one compaction request to the agent's model, as a request of the run.

        It is checked against the run's limits (and a lead's shared budget) first and
        counted like any other request; a request bigger than :attr:`threshold` is not
        sent (room is left for the answer).

        Args:
            request: The request (a strategy builds its own; tools are usually empty).

        Returns:
            The model's turn.

        Raises:
            CompactionHalted: A limit stopped the run, or the request is too big; the
                run's stop reason is set. Let it propagate.
        """
        return await self._compactor.ask(self._ctx, request)


@runtime_checkable
class CompactionStrategy(Protocol):
    """How a conversation is made smaller. ``name`` is shown in events."""

    @property
    def name(self) -> str:
        """The strategy's name, as the compaction events show it."""
        ...

    async def compact(self, job: CompactionJob) -> Sequence[Turn]:
        """The compacted conversation.

        Rules: the first turn stays a user turn holding the task; a tool request and
        its result are kept or removed together (a turn's results answer exactly the
        requests of the assistant turn before it); the system prompt is not part of the
        turns and is always kept. Return ``job.turns`` to leave it as it is.

        Args:
            job: The conversation, its sizes and the model.

        Returns:
            The new turns.
        """
        ...


class SummarizeOldest(msgspec.Struct, frozen=True, gc=False):
    """Summarise the oldest turns with the agent's own model (the default strategy).

    Keeps the task (the first user message, to which the summary is added), and the
    newest turns that fit in ``recent_share`` of the target, starting at an assistant
    turn so no tool request is parted from its result. The older turns (with an earlier
    summary) are rendered as a transcript and summarised by the agent's model, in pieces
    when the transcript is bigger than one request may be (each piece's summary carries
    into the next). The summary is cut to what is left of the target.

    Attributes:
        recent_share: The share of the target kept as recent turns (0.1 to 0.9).
    """

    recent_share: float = 0.5
    name: ClassVar[str] = "summarize"

    def __post_init__(self) -> None:
        _fraction("SummarizeOldest.recent_share", self.recent_share, 0.1, 0.9)

    async def compact(self, job: CompactionJob) -> Sequence[Turn]:
        turns = job.turns
        if len(turns) < 2:
            return turns
        task, earlier = _split_summary(turns[0])
        head = Turn("user", task)
        sizer = _Sizer(job, turns)
        head_chars = sizer.chars(head)
        room = job.target - sizer.tokens(head_chars, 1)
        if room < _MIN_SUMMARY_TOKENS:
            return turns  # the task alone fills the target: nothing to gain here
        split = sizer.split_point(head_chars, math.floor(room * self.recent_share))
        if split <= 1:
            return turns
        tail = sizer.suffix(split)
        summary_tokens = job.target - sizer.tokens(head_chars + tail, 1 + len(turns) - split)
        # The summary's own JSON framing (a text content, the header) and escaping.
        summary_chars = math.floor(job.chars_for(summary_tokens) * 0.9) - len(SUMMARY_HEADER) - 32
        if summary_chars < 1:
            return turns
        summary = await _summarize(job, earlier, _transcript(turns[1:split]), summary_chars)
        if len(summary) > summary_chars:
            summary = summary[: max(0, summary_chars - 6)] + " [cut]"
        return (Turn("user", (*task, ContentText(SUMMARY_HEADER + summary))), *turns[split:])


class DropToolResults(msgspec.Struct, frozen=True, gc=False):
    """Replace old tool results with a short placeholder, oldest first, until the
    conversation is under the target. Sends no model request.

    The requests stay, so the model still sees what it called; only the results'
    content goes. The newest ``keep_recent`` turns are never touched.

    Attributes:
        keep_recent: Turns at the end left as they are (0 or more).
        placeholder: The text a dropped result becomes (the model reads it).
    """

    keep_recent: int = 2
    placeholder: str = DROPPED_RESULT_TEXT
    name: ClassVar[str] = "drop_tool_results"

    def __post_init__(self) -> None:
        if isinstance(self.keep_recent, bool) or not isinstance(self.keep_recent, int):
            raise TypeError(f"DropToolResults.keep_recent must be an int, got {self.keep_recent!r}")
        if self.keep_recent < 0:
            raise ValueError(f"DropToolResults.keep_recent must be >= 0, got {self.keep_recent}")
        if not isinstance(self.placeholder, str) or not self.placeholder.strip():
            raise ValueError("DropToolResults.placeholder must be a non-empty string")

    async def compact(self, job: CompactionJob) -> Sequence[Turn]:
        turns = list(job.turns)
        sizer = _Sizer(job, turns)
        total = sizer.suffix(0)
        last = len(turns) - self.keep_recent
        for i in range(1, max(1, last)):
            turn = turns[i]
            if not any(_droppable(c, self.placeholder) for c in turn.contents):
                continue
            turns[i] = Turn(
                turn.role,
                tuple(
                    ContentToolResult(c.request_id, value=self.placeholder)
                    if _droppable(c, self.placeholder)
                    else c
                    for c in turn.contents
                ),
            )
            total += sizer.chars(turns[i]) - sizer.sizes[i]
            if sizer.tokens(total, len(turns)) <= job.target:
                break
        return turns


def _droppable(content: object, placeholder: str) -> TypeGuard[ContentToolResult]:
    return isinstance(content, ContentToolResult) and content.value != placeholder


class Compaction(msgspec.Struct, frozen=True, gc=False):
    """When and how an agent's conversation is compacted.

    Attributes:
        threshold: The fraction of the context window at which a request triggers a
            compaction (above 0, at most 1; default 0.8).
        target: The fraction of the threshold a compaction aims for (0.1 to 0.9;
            default 0.6), so the next one is some turns away.
        strategy: How (default :class:`SummarizeOldest`); ``None`` never compacts, so a
            request that would not fit the window stops the run ``context_window``.
        window: The context window in tokens, over what the provider says (its
            ``context_window`` attribute or the table ``CONTEXT_WINDOWS``); without
            either the agent has no window and is never compacted.

    Raises:
        ValueError: A fraction is out of range or the window is not a positive int.
        TypeError: ``strategy`` is not a CompactionStrategy.
    """

    threshold: float = 0.8
    target: float = 0.6
    strategy: CompactionStrategy | None = SummarizeOldest()
    window: int | None = None

    def __post_init__(self) -> None:
        _fraction("Compaction.threshold", self.threshold, 0.0, 1.0, low_open=True)
        _fraction("Compaction.target", self.target, 0.1, 0.9)
        if self.strategy is not None and not isinstance(self.strategy, CompactionStrategy):
            raise TypeError(
                "Compaction.strategy must be a CompactionStrategy (an object with a name "
                f"and an async compact(job) method) or None, got {type(self.strategy).__name__}"
            )
        window_value("Compaction.window", self.window)


class Compactor:
    """One run's window accounting and compactions (built by :func:`compactor_for`)."""

    __slots__ = (
        "chat",
        "meter",
        "name",
        "setting",
        "target_tokens",
        "threshold_tokens",
        "window",
    )

    def __init__(self, chat: Chat, name: str | None, setting: Compaction, window: int) -> None:
        self.chat = chat
        self.name = name
        self.setting = setting
        self.window = window
        self.threshold_tokens = max(1, math.floor(window * setting.threshold))
        self.target_tokens = max(1, math.floor(self.threshold_tokens * setting.target))
        self.meter = WindowMeter()

    def reported(self, input_tokens: int) -> None:
        """The provider's input tokens for the request :meth:`fit` passed last."""
        self.meter.reported(input_tokens)

    async def fit(
        self, ctx: RunContext, system_prompt: str | None, tools: tuple[ToolSpec, ...]
    ) -> bool:
        """Make the run's next request fit: compact it when it reached the threshold.

        Args:
            ctx: The run (its turns may be replaced).
            system_prompt: The agent's system prompt.
            tools: The tool schemas of the request.

        Returns:
            Whether the request may be sent; when not, the run's stop reason is set.

        Raises:
            ProviderFailure: A compaction request failed (the stop reason is set).
        """
        params = self.chat.params
        tokens = self.meter.estimate(ModelRequest(system_prompt, tuple(ctx.turns), tools, params))
        if tokens < self.threshold_tokens:
            return True
        strategy = self.setting.strategy
        if strategy is not None:
            tokens = await self._compact(ctx, strategy, system_prompt, tools, tokens)
            if ctx.stop_reason is not None:
                return False
        if tokens <= self.window:
            return True
        ctx.stop_reason = StopReason.CONTEXT_WINDOW
        ctx.stop_error = (
            f"The next request is about {tokens} tokens, over the model's context window "
            f"of {self.window} tokens"
            + (" even after compaction" if strategy is not None else " (compaction is off)")
        )
        return False

    async def _compact(
        self,
        ctx: RunContext,
        strategy: CompactionStrategy,
        system_prompt: str | None,
        tools: tuple[ToolSpec, ...],
        tokens: int,
    ) -> int:
        if ctx.wants(HookEvent.PreCompact):
            decision = await ctx.fire(
                ctx.hook_input(
                    HookEvent.PreCompact,
                    reason="auto",
                    context_tokens=tokens,
                    context_window=self.window,
                )
            )
            if decision is not None and decision.decision == "stop":
                ctx.stop(StopReason.HOOK_REQUESTED_STOP)
                return tokens
            if decision is not None and decision.decision == "deny":
                return tokens
        before = tuple(ctx.turns)
        requests = ctx.meter.requests
        if ctx.emit is not None:
            ctx.emit(
                CompactionStart(
                    **ctx.event_ids(),
                    strategy=strategy.name,
                    tokens=tokens,
                    window=self.window,
                    threshold=self.threshold_tokens,
                    turns=len(before),
                )
            )
        job = CompactionJob(self, ctx, before, system_prompt, tools, self.chat.params, tokens)
        error: str | None = None
        after = before
        try:
            after = check_turns(strategy.name, before, await strategy.compact(job))
        except CompactionHalted:
            error = f"compaction stopped: {ctx.stop_reason}"
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            ctx.turns[:] = after
            compacted = self.meter.estimate(
                ModelRequest(system_prompt, after, tools, self.chat.params)
            )
            if ctx.emit is not None:
                ctx.emit(
                    CompactionEnd(
                        **ctx.event_ids(),
                        strategy=strategy.name,
                        tokens_before=tokens,
                        tokens_after=compacted,
                        turns_before=len(before),
                        turns_after=len(after),
                        requests=ctx.meter.requests - requests,
                        error=error,
                    )
                )
        if ctx.stop_reason is None and ctx.wants(HookEvent.PostCompact):
            decision = await ctx.fire(
                ctx.hook_input(
                    HookEvent.PostCompact,
                    reason="auto",
                    context_tokens=compacted,
                    context_window=self.window,
                )
            )
            if decision is not None and decision.decision == "stop":
                ctx.stop(StopReason.HOOK_REQUESTED_STOP)
        return compacted

    async def ask(self, ctx: RunContext, request: ModelRequest) -> AssistantTurn:
        """:meth:`CompactionJob.ask`."""
        if self.meter.scaled(estimate_tokens(request)) > self.threshold_tokens:
            ctx.stop(StopReason.CONTEXT_WINDOW)
            ctx.stop_error = (
                f"A compaction request would be over {self.threshold_tokens} tokens "
                f"({self.setting.threshold:g} of the context window of {self.window})"
            )
            raise CompactionHalted
        meter = ctx.meter
        spend = ctx.spend
        limit = meter.before_request()
        if limit is None and spend is not None:
            limit = await spend.before_request()
        if limit is not None:
            ctx.stop(limit)
            raise CompactionHalted
        meter.start_request()
        reply: AssistantTurn | None = None
        token = set_current_agent(self.name)
        try:
            reply = await self.chat.provider.complete(request)
        except ProviderError as exc:
            ctx.stop_reason = StopReason.PROVIDER_ERROR
            raise ProviderFailure(f"compaction request failed: {exc}") from exc
        finally:
            reset_current_agent(token)
            if spend is not None:
                await spend.after_request(reply.usage if reply is not None else None)
        meter.add_response(reply.usage)
        return reply


def compactor_for(chat: Chat, name: str | None, setting: Compaction) -> Compactor | None:
    """The run's compactor, or ``None`` when the agent's model has no known window."""
    window = setting.window if setting.window is not None else context_window(chat.provider)
    if window is None:
        return None
    return Compactor(chat, name, setting, window)


def check_turns(strategy: str, before: tuple[Turn, ...], turns: object) -> tuple[Turn, ...]:
    """A strategy's result, checked against the rules of :class:`CompactionStrategy`.

    Raises:
        TypeError: It is not a sequence of turns.
        ValueError: It breaks a rule (the message names the strategy and the turn).
    """
    if isinstance(turns, str | bytes) or not isinstance(turns, Sequence):
        raise TypeError(
            f"compaction strategy {strategy!r} returned {type(turns).__name__}, "
            "expected a sequence of Turn"
        )
    result = tuple(turns)
    for i, turn in enumerate(result):
        if not isinstance(turn, Turn):
            raise TypeError(
                f"compaction strategy {strategy!r}: item {i} is {type(turn).__name__}, "
                "expected a Turn"
            )
    if before and (not result or result[0].role != "user"):
        raise ValueError(
            f"compaction strategy {strategy!r}: the first turn must stay the user turn "
            "holding the task"
        )
    for i, turn in enumerate(result):
        answered = {c.request_id for c in turn.contents if isinstance(c, ContentToolResult)}
        previous = result[i - 1] if i > 0 else None
        asked = (
            {r.id for r in previous.tool_requests}
            if previous is not None and previous.role == "assistant"
            else set()
        )
        if answered != asked:
            raise ValueError(
                f"compaction strategy {strategy!r}: turn {i} answers tool requests "
                f"{sorted(answered)} but the turn before asked for {sorted(asked)}; a "
                "tool request and its result are kept or removed together"
            )
    return result


# -- the summary strategy's parts ----------------------------------------------------------


def _split_summary(first: Turn) -> tuple[tuple[Any, ...], str | None]:
    """The task's contents without an earlier summary, and that summary's text."""
    earlier: str | None = None
    task: list[Any] = []
    for c in first.contents:
        if isinstance(c, ContentText) and c.text.startswith(SUMMARY_HEADER):
            earlier = c.text[len(SUMMARY_HEADER) :]
        else:
            task.append(c)
    return tuple(task), earlier


class _Sizer:
    """Request sizes of a job's turns without encoding the whole request per question.

    The JSON of a request with turns ``t1..tn`` is the JSON of the request without
    turns plus each turn's JSON plus ``n - 1`` commas, so sizes of any selection of
    turns are sums (exactly the characters :func:`estimate_tokens` counts).
    """

    __slots__ = ("base", "job", "sizes", "suffixes", "turns")

    def __init__(self, job: CompactionJob, turns: Sequence[Turn]) -> None:
        self.job = job
        self.turns = turns
        empty = ModelRequest(job.system_prompt, (), job.tools, job.params)
        self.base = len(_encoder.encode(empty))
        self.sizes = [self.chars(t) for t in turns]
        self.suffixes = [0] * (len(turns) + 1)
        for i in range(len(turns) - 1, -1, -1):
            self.suffixes[i] = self.suffixes[i + 1] + self.sizes[i]

    @staticmethod
    def chars(turn: Turn) -> int:
        return len(_encoder.encode(turn))

    def suffix(self, start: int) -> int:
        """The characters of the turns from ``start`` on (without separators)."""
        return self.suffixes[start]

    def tokens(self, chars: int, count: int) -> int:
        """The calibrated tokens of a request holding ``count`` turns of ``chars``."""
        total = self.base + chars + max(0, count - 1)
        return self.job._compactor.meter.scaled(math.ceil(total / 4))

    def split_point(self, head_chars: int, keep: int) -> int:
        """Where the kept recent turns start: the earliest assistant turn from which the
        rest adds at most ``keep`` tokens to the head (``len(turns)``: summarise all)."""
        turns = self.turns
        alone = self.tokens(head_chars, 1)
        for s in range(1, len(turns)):
            if turns[s].role != "assistant":
                continue
            grown = self.tokens(head_chars + self.suffixes[s], 1 + len(turns) - s) - alone
            if grown <= keep:
                return s
        return len(turns)


def _transcript(turns: Sequence[Turn]) -> str:
    lines: list[str] = []
    encode = msgspec.json.encode
    for turn in turns:
        for c in turn.contents:
            if isinstance(c, ContentText):
                lines.append(f"{turn.role}: {c.text}")
            elif isinstance(c, ContentToolRequest):
                lines.append(f"{turn.role} called {c.name} {encode(c.arguments).decode()}")
            elif isinstance(c, ContentToolResult):
                body = c.error if c.error is not None else encode(c.value).decode()
                kind = "error" if c.error is not None else "result"
                lines.append(f"tool {kind} ({c.request_id}): {body}")
    return "\n".join(lines)


async def _summarize(job: CompactionJob, earlier: str | None, transcript: str, chars: int) -> str:
    """The rolling summary of ``transcript`` (after ``earlier``), one request per piece."""
    summary = earlier or ""
    words = max(10, chars // 6)
    position = 0
    while position < len(transcript):
        frame = _summary_request(job, summary, "", words)
        room = job.chars_for(job.threshold - job.request_tokens(frame)) - 64
        if room < _MIN_CHUNK_CHARS:
            _halt(job, "the context window is too small for a compaction request")
        piece = transcript[position : position + room]
        request = _summary_request(job, summary, piece, words)
        # JSON escaping makes some text longer than its characters: shrink to fit.
        while job.request_tokens(request) > job.threshold and len(piece) > _MIN_CHUNK_CHARS:
            piece = piece[: max(_MIN_CHUNK_CHARS, math.floor(len(piece) * 0.8))]
            request = _summary_request(job, summary, piece, words)
        position += len(piece)
        reply = await job.ask(request)
        summary = reply.text.strip() or summary
    return summary


def _halt(job: CompactionJob, why: str) -> None:
    """Stop the run ``context_window`` from inside a strategy (raises CompactionHalted)."""
    ctx = job._ctx
    ctx.stop(StopReason.CONTEXT_WINDOW)
    ctx.stop_error = f"Compaction is impossible: {why} ({job.window} tokens)"
    raise CompactionHalted


def _summary_request(job: CompactionJob, earlier: str, piece: str, words: int) -> ModelRequest:
    parts = [_SUMMARY_ASK.format(words=words)]
    if earlier:
        parts.append(f"Earlier summary:\n{earlier}")
    parts.append(f"Transcript:\n{piece}")
    return ModelRequest(
        _SUMMARY_SYSTEM, (Turn("user", (ContentText("\n\n".join(parts)),)),), (), job.params
    )
