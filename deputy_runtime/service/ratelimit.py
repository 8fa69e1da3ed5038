"""Per-token request rate: a token bucket per client, refilled continuously.

Each client may make ``burst`` requests at once and ``rate`` per second after that; a
request over the limit is refused with the seconds until one more would be allowed
(``Retry-After``). The clock is injectable so tests need not sleep.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

__all__ = ["RateLimiter"]


class RateLimiter:
    """Token buckets keyed by client; :meth:`take` is synchronous (no await inside)."""

    __slots__ = ("_buckets", "_clock", "burst", "rate")

    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not rate > 0 or burst < 1:
            raise ValueError(f"rate must be > 0 and burst >= 1, got {rate!r} and {burst!r}")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._buckets: dict[int, tuple[float, float]] = {}  # key -> (tokens, updated)

    def take(self, key: int) -> int | None:
        """Count one request; ``None`` if allowed, else whole seconds to wait (>= 1)."""
        now = self._clock()
        tokens, updated = self._buckets.get(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - updated) * self.rate)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            return None
        self._buckets[key] = (tokens, now)
        return max(1, math.ceil((1.0 - tokens) / self.rate))
