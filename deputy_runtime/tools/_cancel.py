"""Cancellation checks for tool functions running in a worker thread.

A cancelled call abandons a read-only tool's thread (see ``invoke_tool``), but the
thread itself runs on until it returns. Long loops in the file tools call
:func:`raise_if_cancelled` between steps so an abandoned search or read stops promptly
instead of reading on in the background.
"""

from __future__ import annotations

import anyio.from_thread

__all__ = ["raise_if_cancelled"]


def raise_if_cancelled() -> None:
    """Raise the backend's cancellation if the task waiting for this thread was cancelled.

    Does nothing outside an anyio worker thread (a tool function called directly).
    """
    try:
        anyio.from_thread.check_cancelled()
    except RuntimeError:  # not in an anyio worker thread
        return
