"""Value types of the chat layer and the Provider protocol.

Everything here is a frozen msgspec Struct so turns, usage and requests can be shared
between tasks without copying and encoded to JSON without adapters. Contents form one
tagged union (tag field ``type``) so a whole conversation round-trips through JSON.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal, Protocol, Self, TypeAlias, runtime_checkable

import msgspec

from .._toolspec import ToolSpec
from ..errors import UsageValueError

__all__ = [
    "AssistantTurn",
    "Content",
    "ContentText",
    "ContentThinking",
    "ContentToolRequest",
    "ContentToolResult",
    "ModelRequest",
    "Provider",
    "Role",
    "StreamDelta",
    "ToolSpec",
    "Turn",
    "Usage",
    "UsageCounts",
    "add_costs",
]

#: Who a turn is from: the user (task, tool results), the assistant (the model) or the
#: system prompt.
Role: TypeAlias = Literal["user", "assistant", "system"]


class ContentText(msgspec.Struct, frozen=True, gc=False, tag="text"):
    """Plain text from the user or the model."""

    text: str


class ContentThinking(msgspec.Struct, frozen=True, gc=False, tag="thinking"):
    """Model reasoning. ``signature``/``redacted`` keep what a provider needs for replay."""

    thinking: str
    signature: str | None = None
    redacted: str | None = None


class ContentToolRequest(msgspec.Struct, frozen=True, gc=False, tag="tool_request"):
    """A tool call requested by the model. ``arguments`` is the parsed JSON object."""

    id: str
    name: str
    arguments: dict[str, Any]


class ContentToolResult(msgspec.Struct, frozen=True, gc=False, tag="tool_result"):
    """The answer to one tool request; it lives in the user turn after the request.

    ``error`` is set (and ``value`` is ``None``) when the call failed or was denied; the
    model sees the error text.
    """

    request_id: str
    value: Any = None
    error: str | None = None


#: One piece of a turn: text, reasoning, a tool request or a tool result (a tagged union,
#: tag field ``type``, so a conversation round-trips through JSON).
Content: TypeAlias = ContentText | ContentThinking | ContentToolRequest | ContentToolResult


class Turn(msgspec.Struct, frozen=True, gc=False):
    """One message of a conversation."""

    role: Role
    contents: tuple[Content, ...]

    @property
    def text(self) -> str:
        """The concatenated text contents."""
        return "".join(c.text for c in self.contents if isinstance(c, ContentText))

    @property
    def tool_requests(self) -> tuple[ContentToolRequest, ...]:
        """The tool requests in this turn, in order."""
        return tuple(c for c in self.contents if isinstance(c, ContentToolRequest))


def add_costs(a: float | None, b: float | None) -> float | None:
    """The sum of two costs in USD where ``None`` means unknown.

    Args:
        a: A cost, or ``None``.
        b: Another cost, or ``None``.

    Returns:
        ``None`` when both are unknown, else the sum of the known ones.
    """
    if a is None:
        return b
    if b is None:
        return a
    return a + b


class UsageCounts(msgspec.Struct, frozen=True, gc=False):
    """The arithmetic every usage value shares: :class:`Usage` and the runtime's
    ``AgentUsage`` (which also counts tool calls).

    Adding two values of the same type adds every field; ``cost_usd`` is added with
    :func:`add_costs`, so an unknown cost does not hide a known one.

    Every count must be an int >= 0 and ``cost_usd`` ``None`` or a finite number >= 0;
    anything else raises :class:`~deputy_runtime.errors.UsageValueError` naming the field,
    because a NaN, infinite or negative value would silently disable a usage limit.
    """

    def __post_init__(self) -> None:
        for name in self.__struct_fields__:
            value = getattr(self, name)
            if name == "cost_usd":
                if value is None or (
                    not isinstance(value, bool)
                    and isinstance(value, int | float)
                    and math.isfinite(value)
                    and value >= 0
                ):
                    continue
                raise UsageValueError(
                    f"{type(self).__name__}.cost_usd must be None or a finite number >= 0, "
                    f"got {value!r}",
                    field="cost_usd",
                )
            # Fast path for the common valid value; type() is int rejects bools.
            if type(value) is int and value >= 0:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise UsageValueError(
                    f"{type(self).__name__}.{name} must be an int >= 0, got {value!r}",
                    field=name,
                )

    def __add__(self, other: Self) -> Self:
        if type(other) is not type(self):
            return NotImplemented
        values = [
            add_costs(getattr(self, name), getattr(other, name))
            if name == "cost_usd"
            else getattr(self, name) + getattr(other, name)
            for name in self.__struct_fields__
        ]
        return type(self)(*values)


class Usage(UsageCounts, frozen=True, gc=False):
    """Usage of one or more model requests. ``cost_usd`` is ``None`` when unknown."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cost_usd: float | None = None

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens (cached input tokens are part of input, not added)."""
        return self.input_tokens + self.output_tokens


class AssistantTurn(msgspec.Struct, frozen=True, gc=False):
    """What a provider returns for one request: the model's turn plus its accounting.

    ``duration`` is the wall-clock seconds of the request when the provider measured it.
    """

    contents: tuple[Content, ...]
    usage: Usage = Usage()
    finish_reason: str | None = None
    duration: float | None = None

    @property
    def text(self) -> str:
        """The concatenated text contents."""
        return "".join(c.text for c in self.contents if isinstance(c, ContentText))

    @property
    def tool_requests(self) -> tuple[ContentToolRequest, ...]:
        """The tool requests in this turn, in order."""
        return tuple(c for c in self.contents if isinstance(c, ContentToolRequest))

    def turn(self) -> Turn:
        """This reply as a history turn.

        Returns:
            A :class:`Turn` with role ``assistant`` and this reply's contents.
        """
        return Turn("assistant", self.contents)


class StreamDelta(msgspec.Struct, frozen=True, gc=False):
    """An incremental piece of a streamed reply: text or thinking text."""

    text: str = ""
    thinking: str = ""


class ModelRequest(msgspec.Struct, frozen=True, gc=False):
    """One request to a model: system prompt, history, offered tools and parameters."""

    system_prompt: str | None
    turns: tuple[Turn, ...]
    tools: tuple[ToolSpec, ...] = ()
    params: Mapping[str, Any] = msgspec.field(default_factory=dict)


@runtime_checkable
class Provider(Protocol):
    """A model backend. One call is one request; the provider keeps no conversation.

    ``stream`` yields :class:`StreamDelta` values and the assembled :class:`AssistantTurn`
    last. A provider that only implements ``complete`` still works everywhere: wrap it with
    :func:`deputy_runtime.chat.stream_request`, which falls back to one final turn.
    """

    name: str
    model: str

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        """Send one request and return the model's whole turn.

        Args:
            request: The system prompt, the turns, the offered tools and the parameters.

        Returns:
            The model's turn, with the usage of the request.
        """

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta | AssistantTurn]:
        """Send one request, yield deltas as they arrive, then the whole turn.

        A provider without streaming may leave this out: :func:`stream_request` then falls back
        to one :meth:`complete` call.

        Args:
            request: As for :meth:`complete`.

        Returns:
            An async iterator of :class:`StreamDelta` values followed by the final
            :class:`AssistantTurn`, exactly once.
        """

    def with_model(self, model: str) -> Provider:
        """The same provider for another model (how ``model: some-id`` in a definition runs).

        Args:
            model: The model name.

        Returns:
            A provider for that model.
        """
