"""One process-wide lock per file path, so writes to one file never interleave.

``edit_file`` is read, modify, replace. Two edits of one file running at once (two tool
calls in one model turn, or two subagents sharing a working directory) would both read
the same original, and the second replace would silently drop the first edit. Holding
:func:`path_lock` around the whole read-modify-replace makes each write see the result
of the one before.

The file tools run in worker threads, possibly of different event loops (one per
thread) and of either anyio backend, so this is a plain :class:`threading.Lock`: an
anyio lock belongs to one event loop and cannot be held across threads. Waiting blocks
only the worker thread, and every holder is a bounded local write, so the wait is short.

The key is the resolved path, Unicode-normalised and case-folded: on a case-insensitive
file system ``A.txt`` and ``a.txt`` are one file, and on a case-sensitive one sharing a
lock between them only serialises two writes that could have run side by side. Entries
are counted and removed when their last user leaves, so the table holds only paths
being written right now.
"""

from __future__ import annotations

import threading
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["lock_key", "locks_in_use", "path_lock"]


class _Entry:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0


_table: dict[str, _Entry] = {}
_table_lock = threading.Lock()


def lock_key(real: str) -> str:
    """The table key for the resolved path ``real``."""
    return unicodedata.normalize("NFC", real).casefold()


@contextmanager
def path_lock(real: str) -> Iterator[None]:
    """Hold the process-wide lock for the resolved path ``real``; blocks until free."""
    key = lock_key(real)
    with _table_lock:
        entry = _table.get(key)
        if entry is None:
            entry = _table[key] = _Entry()
        entry.users += 1
    try:
        with entry.lock:
            yield
    finally:
        with _table_lock:
            entry.users -= 1
            if entry.users == 0:
                del _table[key]


def locks_in_use() -> int:
    """How many paths are locked or waited on right now (for tests and diagnostics)."""
    with _table_lock:
        return len(_table)
