"""A run's events, numbered and kept in a bounded log, so SSE clients can resume.

Every event gets the next sequence number (1, 2, ...), which is its SSE ``id:``. The
log keeps the newest ``capacity`` events; a client resuming with ``Last-Event-ID: N``
gets every kept event after ``N``, and when some after ``N`` were already dropped it is
told how many (the stream then says ``event: truncated``). Appends are synchronous (the
runtime's event sink cannot await); readers wait on :meth:`wait_beyond`.
"""

from __future__ import annotations

import itertools
from collections import deque

import anyio

__all__ = ["EventLog"]


class EventLog:
    """Numbered, encoded events of one run; closed when the run has ended."""

    __slots__ = ("_changed", "_entries", "capacity", "closed", "last_seq")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"event log capacity must be at least 1, got {capacity!r}")
        self.capacity = capacity
        self._entries: deque[tuple[int, bytes]] = deque(maxlen=capacity)
        self.last_seq = 0
        self.closed = False
        self._changed = anyio.Event()

    def append(self, data: bytes) -> int:
        """Add one encoded event; returns its sequence number."""
        if self.closed:
            raise RuntimeError("the run's event log is closed")
        self.last_seq += 1
        self._entries.append((self.last_seq, data))
        self._wake()
        return self.last_seq

    def close(self) -> None:
        """No more events: waiting readers finish once they have read the rest."""
        if not self.closed:
            self.closed = True
            self._wake()

    def since(self, after: int) -> tuple[int, list[tuple[int, bytes]]]:
        """Events numbered above ``after``, and how many of those were already dropped."""
        first = self._entries[0][0] if self._entries else self.last_seq + 1
        dropped = max(0, first - after - 1) if after < self.last_seq else 0
        start = max(0, after - first + 1)
        return dropped, list(itertools.islice(self._entries, start, None))

    async def wait_beyond(self, after: int) -> None:
        """Return once an event numbered above ``after`` exists or the log is closed."""
        while self.last_seq <= after and not self.closed:
            await self._changed.wait()

    def _wake(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()
