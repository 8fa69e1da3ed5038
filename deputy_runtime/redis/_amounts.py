"""Ledger amounts: validation at the boundary and the exact storage of cost.

Counts (requests, tool calls, tokens) are integers. Cost is a float in dollars at the API
and an integer number of micro-dollars (1e-6 USD) in Redis, so sums are exact and never
drift. Conversion goes through the float's shortest decimal form (``0.1`` is 100000
micro-dollars, not 100000.00000000001): a reservation wanted is rounded *down* (a grant
never exceeds what was asked) and usage reported is rounded *up* (usage is never
under-counted).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

import msgspec

from ._scripts import FIELDS

__all__ = [
    "FIELDS",
    "Amounts",
    "LedgerState",
    "decode",
    "encode_limits",
    "encode_used",
    "encode_want",
]

# Integers above 2**53 lose precision in Lua's doubles; nothing realistic gets near it.
MAX_AMOUNT = 2**53 - 1
_MICRO = Decimal(1_000_000)


class Amounts(msgspec.Struct, frozen=True, kw_only=True):
    """One value per ledger field; ``None`` means the field is not limited."""

    requests: int | None
    tool_calls: int | None
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None

    def as_dict(self) -> dict[str, int | float | None]:
        """The values by field name.

        Returns:
            ``requests``, ``tool_calls``, ``input_tokens``, ``output_tokens`` and
            ``cost_usd`` (dollars), in that order; ``None`` for a field not limited.
        """
        return {f: getattr(self, f) for f in FIELDS}


class LedgerState(msgspec.Struct, frozen=True, kw_only=True):
    """A snapshot of a shared budget, after expired reservations were returned.

    For every limited field ``remaining + reserved + used == limit`` holds, except that
    ``remaining`` goes below zero when usage exceeded a grant (token and cost limits are
    checked after each response, so a holder can overrun its grant by one response).
    ``used`` is counted for unlimited fields too; their other values are ``None``.
    ``traceparents`` maps the holder id of each current reservation that recorded one
    (it was made with tracing on) to the W3C ``traceparent`` of the span that made it.
    """

    name: str
    holders: int
    limit: Amounts
    remaining: Amounts
    reserved: Amounts
    used: Amounts
    traceparents: dict[str, str] = msgspec.field(default_factory=dict)


def _to_micro(value: float, rounding: str) -> int:
    return int((Decimal(repr(float(value))) * _MICRO).to_integral_value(rounding=rounding))


def _check_fields(what: str, values: Mapping[str, object]) -> None:
    if not isinstance(values, Mapping):
        raise TypeError(f"{what} must be a mapping of ledger fields, got {values!r}")
    unknown = sorted(str(k) for k in values if k not in FIELDS)
    if unknown:
        raise ValueError(
            f"{what} has unknown field(s) {', '.join(unknown)}; expected some of "
            f"{', '.join(FIELDS)}"
        )


def _encode(what: str, values: Mapping[str, object], *, none_ok: bool, rounding: str) -> list[int]:
    _check_fields(what, values)
    out: list[int] = []
    for field in FIELDS:
        value = values.get(field)
        if value is None:
            if not none_ok:
                out.append(0)
                continue
            out.append(-1)
            continue
        if field == "cost_usd":
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{what}[{field!r}] must be a number of dollars, got {value!r}")
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{what}[{field!r}] must be finite and >= 0, got {value!r}")
            micro = _to_micro(value, rounding)
        else:
            if type(value) is not int:
                raise TypeError(f"{what}[{field!r}] must be an int, got {value!r}")
            micro = value
        if not 0 <= micro <= MAX_AMOUNT:
            raise ValueError(f"{what}[{field!r}] must be between 0 and {MAX_AMOUNT}, got {value!r}")
        out.append(micro)
    return out


def encode_limits(limits: Mapping[str, int | float | None]) -> list[int]:
    """Budget limits as stored (-1 = unlimited; a missing field is unlimited)."""
    return _encode("limits", limits, none_ok=True, rounding=ROUND_FLOOR)


def encode_want(want: Mapping[str, int | float | None]) -> list[int]:
    """A reservation request (-1 = no limit asked; a missing field asks no limit)."""
    return _encode("want", want, none_ok=True, rounding=ROUND_FLOOR)


def encode_used(used: Mapping[str, int | float]) -> list[int]:
    """Usage to settle (a missing field used nothing); cost rounded up."""
    return _encode("used", used, none_ok=False, rounding=ROUND_CEILING)


def decode(raw: Sequence[int], limited: Sequence[bool] | None = None) -> Amounts:
    """Stored values back to API values: ``None`` where the field is not ``limited``
    (by default: where the stored value is -1); cost from micro-dollars to dollars."""
    mask = [int(v) >= 0 for v in raw] if limited is None else list(limited)
    count = [int(v) if on else None for v, on in zip(raw, mask, strict=True)]
    cost = None if count[4] is None else count[4] / 1_000_000
    return Amounts(
        requests=count[0],
        tool_calls=count[1],
        input_tokens=count[2],
        output_tokens=count[3],
        cost_usd=cost,
    )
