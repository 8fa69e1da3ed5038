"""InProcessLedger: a :class:`BudgetLedger` kept in this process's memory.

Leads in one process that should draw on one budget (a server that builds a lead per
request, several leads a host runs side by side) pass the same ledger as their
``shared_budget``. It keeps the rules of every ledger: a reservation takes at most
``ceil(remaining / parties)`` of each limited field, what was reserved is unavailable to
others until it is settled, settling counts what was used (even past the grant, as a run
that overshot by one request did use it) and gives the rest back, exactly once per
holder. Nothing expires, so :meth:`hold` only waits.

Every operation runs without yielding between reading and changing the state, so
concurrent reservations in one event loop never both take the same remainder. It is not
thread-safe: use it from one event loop.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Mapping

import anyio
import anyio.lowlevel

from ..errors import BudgetLedgerError

__all__ = ["InProcessLedger"]

#: The amounts a ledger keeps, as :class:`BudgetLedger` names them.
LEDGER_FIELDS = ("requests", "tool_calls", "input_tokens", "output_tokens", "cost_usd")
# Settled holders remembered so a second settle is a no-op and a reused id is refused;
# the oldest are forgotten past this many, so a long-lived server's memory stays bounded.
_KEEP_ENDED = 10_000

Amount = int | float


class InProcessLedger:
    """A budget shared by the leads of one process (see the module docstring).

    Args:
        requests: Model requests in all (``None``: not limited).
        tool_calls: Tool calls in all.
        input_tokens: Input tokens in all.
        output_tokens: Output tokens in all.
        cost_usd: Dollars in all.

    Raises:
        ValueError: A limit is negative, not a number, or (but for ``cost_usd``) not whole.
    """

    __slots__ = ("_ended", "_held", "_limits", "_used")

    def __init__(
        self,
        *,
        requests: int | None = None,
        tool_calls: int | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        cost_usd: float | None = None,
    ) -> None:
        given = {
            "requests": requests,
            "tool_calls": tool_calls,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cost_usd": cost_usd,
        }
        self._limits: dict[str, Amount | None] = {
            name: _limit(name, value) for name, value in given.items()
        }
        self._used: dict[str, Amount] = dict.fromkeys(LEDGER_FIELDS, 0)
        self._held: dict[str, dict[str, Amount | None]] = {}
        self._ended: OrderedDict[str, None] = OrderedDict()

    def __repr__(self) -> str:
        limited = {k: v for k, v in self._limits.items() if v is not None}
        return f"InProcessLedger({', '.join(f'{k}={v}' for k, v in limited.items())})"

    @property
    def limits(self) -> dict[str, Amount | None]:
        """Each field's limit (``None``: not limited)."""
        return dict(self._limits)

    def used(self) -> dict[str, Amount]:
        """What settled holders used, per field."""
        return dict(self._used)

    def remaining(self) -> dict[str, Amount | None]:
        """What is neither used nor reserved, per field (``None``: not limited)."""
        return {name: self._remaining(name) for name in LEDGER_FIELDS}

    def spent(self) -> tuple[str, ...]:
        """The limited fields with nothing left (neither used nor reserved)."""
        left = self.remaining()
        return tuple(name for name in LEDGER_FIELDS if _none_left(left[name]))

    async def reserve(
        self, holder: str, want: Mapping[str, int | float | None], *, parties: int = 1
    ) -> Mapping[str, int | float | None]:
        """Take ``min(want, ceil(remaining / parties))`` of each limited field.

        A field missing from ``want`` or ``None`` asks no limit and takes its whole share;
        unlimited fields are granted ``None``. Reserving again for a holder that holds a
        reservation returns that grant.

        Raises:
            BudgetLedgerError: ``holder`` was already settled.
            ValueError: ``parties`` is not a whole number of at least 1.
        """
        if isinstance(parties, bool) or not isinstance(parties, int) or parties < 1:
            raise ValueError(f"parties must be a whole number of at least 1, got {parties!r}")
        await anyio.lowlevel.checkpoint()
        held = self._held.get(holder)
        if held is not None:
            return dict(held)
        if holder in self._ended:
            raise BudgetLedgerError(
                f"Cannot reserve for holder {holder!r}: it was already settled (holder ids "
                "are used once)"
            )
        grant: dict[str, Amount | None] = {}
        for name in LEDGER_FIELDS:
            left = self._remaining(name)
            if left is None:
                grant[name] = None
                continue
            share: Amount = left / parties if name == "cost_usd" else math.ceil(left / parties)
            asked = want.get(name)
            grant[name] = share if asked is None else max(0, min(asked, share))
        self._held[holder] = grant
        return dict(grant)

    async def hold(
        self, holder: str, on_lost: Callable[[str], None], *, renewed_at: float | None = None
    ) -> None:
        """Wait until cancelled: a reservation in this process never expires."""
        await anyio.sleep_forever()

    async def settle(self, holder: str, used: Mapping[str, int | float]) -> None:
        """Count ``used`` and give back the rest of the grant; a second settle is a no-op.

        Raises:
            BudgetLedgerError: ``holder`` never reserved (or was settled too long ago).
            ValueError: An amount in ``used`` is negative or not a number.
        """
        if holder in self._ended:
            return
        if holder not in self._held:
            raise BudgetLedgerError(f"Cannot settle holder {holder!r}: it has no reservation")
        amounts = {name: _amount(name, used.get(name, 0)) for name in LEDGER_FIELDS}
        del self._held[holder]
        for name, value in amounts.items():
            self._used[name] += value
        self._ended[holder] = None
        while len(self._ended) > _KEEP_ENDED:
            self._ended.popitem(last=False)

    def _remaining(self, name: str) -> Amount | None:
        limit = self._limits[name]
        if limit is None:
            return None
        reserved = sum(grant[name] or 0 for grant in self._held.values())
        return max(0, limit - self._used[name] - reserved)


def _none_left(left: Amount | None) -> bool:
    return left is not None and left <= 0


def _limit(name: str, value: object) -> Amount | None:
    if value is None:
        return None
    return _amount(name, value)


def _amount(name: str, value: object) -> Amount:
    whole = name != "cost_usd"
    if (
        not isinstance(value, (int, float))
        or isinstance(value, bool)
        or (whole and not isinstance(value, int))
        or not math.isfinite(value)
        or value < 0
    ):
        kind = "a whole number" if whole else "a number"
        raise ValueError(f"InProcessLedger {name}: expected {kind} of at least 0, got {value!r}")
    return value
