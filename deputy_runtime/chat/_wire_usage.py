"""Usage as a server reports it, validated before anything counts it.

A usage limit is only as good as the numbers it is fed: a negative token count or a
negative, infinite or NaN cost would silently disable ``max_total_tokens`` or
``max_cost_usd``. The providers build their :class:`Usage` through :func:`wire_usage`,
which rejects such a response with :class:`InvalidUsageError` instead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..errors import InvalidUsageError
from ._types import Usage

__all__ = ["wire_usage"]

# No real response reports more tokens than this; a larger count is a broken or hostile
# server, and Python ints would let it grow without bound.
_MAX_TOKENS = 2**53


def _count(provider: str, name: str, value: int | None) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_TOKENS:
        raise InvalidUsageError(
            f"{provider}: invalid usage: {name} is {value!r}, expected an int from 0 to 2**53; "
            "the response was rejected and not counted",
            provider=provider,
        )
    return value


def wire_usage(
    provider: str,
    *,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    cached_input_tokens: int | None = None,
    extra_input_tokens: Mapping[str, int | None] | None = None,
    cost_usd: float | None = None,
) -> Usage:
    """The usage of one response as a server reported it, validated.

    Negative, absurd (over 2**53) or non-integer token counts and a cost that is not a
    finite number >= 0 raise :class:`InvalidUsageError`: such a value would silently
    disable a token or cost limit. ``extra_input_tokens`` are named counts that add to
    the input (Anthropic's cache reads and writes), each validated on its own.
    """
    total_input = _count(provider, "input_tokens", input_tokens)
    for name, value in (extra_input_tokens or {}).items():
        total_input += _count(provider, name, value)
    if cost_usd is not None and (
        isinstance(cost_usd, bool)
        or not isinstance(cost_usd, int | float)
        or not math.isfinite(cost_usd)
        or cost_usd < 0
    ):
        raise InvalidUsageError(
            f"{provider}: invalid usage: cost is {cost_usd!r}, expected a finite number >= 0; "
            "the response was rejected and not counted",
            provider=provider,
        )
    return Usage(
        requests=1,
        input_tokens=total_input,
        output_tokens=_count(provider, "output_tokens", output_tokens),
        cached_input_tokens=_count(provider, "cached_input_tokens", cached_input_tokens),
        cost_usd=None if cost_usd is None else float(cost_usd),
    )
