"""Context windows: how many tokens a model reads per request, and how big a request is.

Three sources, the first that knows wins: a provider's own ``context_window`` attribute
(:class:`ScriptedProvider` and :class:`TestProvider` take one; any host provider may set
one), then :data:`CONTEXT_WINDOWS`, a table of the built-in providers' models by id
prefix. A model nobody knows has no window (``None``): the runtime does not guess one.

The size of a request before it is sent is an estimate (:func:`estimate_tokens`): the
characters of its JSON encoding divided by four, the rule of thumb for English text and
code with the providers' tokenizers. :class:`WindowMeter` calibrates it with the input
tokens the provider reported for the last request, and only ever upwards: a provider
that reports fewer tokens than the estimate (or a scripted one reporting a fixed count)
must never make the runtime send a request that is bigger than it thinks.
"""

from __future__ import annotations

import math
from typing import Final

import msgspec

from ._types import ModelRequest, Provider, Turn

__all__ = [
    "CHARS_PER_TOKEN",
    "CONTEXT_WINDOWS",
    "CONTEXT_WINDOWS_CHECKED",
    "WindowMeter",
    "context_window",
    "estimate_tokens",
    "request_chars",
    "turns_tokens",
    "window_value",
]

#: When the figures of :data:`CONTEXT_WINDOWS` were last compared with the providers'
#: published model documentation.
CONTEXT_WINDOWS_CHECKED: Final = "2026-12-07"

#: Input-context tokens by provider name, then model id prefix (the longest matching
#: prefix wins). Figures are the standard windows: a larger opt-in window (a beta
#: header) is not assumed; set ``context_window`` on the provider or
#: ``Compaction(window=...)`` for it. ``ollama`` and ``openai_compatible`` serve any
#: model, so they have no entries. Checked on :data:`CONTEXT_WINDOWS_CHECKED`.
CONTEXT_WINDOWS: Final[dict[str, tuple[tuple[str, int], ...]]] = {
    "openai": (
        ("gpt-3.5-turbo", 16_385),
        ("gpt-4-turbo", 128_000),
        ("gpt-4o", 128_000),
        ("gpt-4.1", 1_047_576),
        ("gpt-5", 400_000),
        ("o1", 200_000),
        ("o3", 200_000),
        ("o4-mini", 200_000),
    ),
    "anthropic": (("claude-", 200_000),),
}

#: The characters one token is estimated at (see :func:`estimate_tokens`).
CHARS_PER_TOKEN: Final = 4

_encoder = msgspec.json.Encoder()
_MAX_WINDOW = 2**31 - 1


def window_value(where: str, value: object) -> int | None:
    """``value`` checked as a context window: ``None`` or an int from 1 to 2**31 - 1.

    Args:
        where: What holds the value (``"ScriptedProvider.context_window"``), for the
            message.
        value: The value to check.

    Returns:
        The value.

    Raises:
        TypeError: It is not an int (bools are refused).
        ValueError: It is out of range.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{where} must be an int number of tokens or None, got {value!r}")
    if not 1 <= value <= _MAX_WINDOW:
        raise ValueError(f"{where} must be between 1 and {_MAX_WINDOW} tokens, got {value}")
    return value


def context_window(provider: Provider) -> int | None:
    """The context window of ``provider``'s model, in tokens.

    Args:
        provider: The provider.

    Returns:
        Its ``context_window`` attribute when it has one (an int), else the
        :data:`CONTEXT_WINDOWS` entry of its name and model, else ``None``.
    """
    own = getattr(provider, "context_window", None)
    if isinstance(own, int) and not isinstance(own, bool) and own > 0:
        return own
    entries = CONTEXT_WINDOWS.get(str(getattr(provider, "name", "")))
    if not entries:
        return None
    model = str(getattr(provider, "model", ""))
    best: tuple[int, int] | None = None
    for prefix, tokens in entries:
        if model.startswith(prefix) and (best is None or len(prefix) > best[0]):
            best = (len(prefix), tokens)
    return None if best is None else best[1]


def request_chars(request: ModelRequest) -> int:
    """The characters of ``request``'s JSON encoding (what the estimate divides)."""
    return len(_encoder.encode(request))


def estimate_tokens(request: ModelRequest) -> int:
    """The cheap estimate of ``request``'s input tokens: its JSON characters / 4.

    The JSON encoding holds the system prompt, every turn and the tool schemas, so
    what a provider adds around them (its own framing) is the only part it misses;
    :class:`WindowMeter` corrects for that with the provider's reported counts.

    Args:
        request: The request.

    Returns:
        The estimated tokens, rounded up.
    """
    return math.ceil(request_chars(request) / CHARS_PER_TOKEN)


def turns_tokens(turns: tuple[Turn, ...] | list[Turn]) -> int:
    """The estimated tokens of some turns alone (as :func:`estimate_tokens` counts them)."""
    return math.ceil(len(_encoder.encode(turns)) / CHARS_PER_TOKEN)


class WindowMeter:
    """One conversation's request sizes: the last estimate and the provider's reports.

    ``ratio`` is reported input tokens per estimated token of the last request whose
    usage was reported, at least 1: estimates are multiplied by it, so they never fall
    below the plain characters/4 estimate.
    """

    __slots__ = ("last_estimate", "last_reported", "ratio")

    def __init__(self) -> None:
        self.ratio = 1.0
        self.last_estimate: int | None = None
        self.last_reported: int | None = None

    def estimate(self, request: ModelRequest) -> int:
        """The calibrated estimate of ``request``'s input tokens (remembered as the last)."""
        raw = estimate_tokens(request)
        self.last_estimate = raw
        return math.ceil(raw * self.ratio)

    def scaled(self, raw: int) -> int:
        """A plain characters/4 estimate, calibrated."""
        return math.ceil(raw * self.ratio)

    def reported(self, input_tokens: int) -> None:
        """Calibrate with the input tokens the provider reported for the last estimate.

        A report of 0 (a provider that does not count) changes nothing.
        """
        if input_tokens <= 0 or not self.last_estimate:
            return
        self.last_reported = input_tokens
        self.ratio = max(1.0, input_tokens / self.last_estimate)
