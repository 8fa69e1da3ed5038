"""Delegation slots in workflow code: at most ``size`` at once, taken in admission order.

The in-process coordinator queues a delegation on a semaphore and re-checks the lead
before it starts; this is the same for a workflow. Waiting uses
``workflow.wait_condition``, whose conditions Temporal evaluates in a fixed order on
every activation, and only the head of the queue may take a free slot, so the order in
which queued delegations start is their admission order and is the same on every replay.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from temporalio import workflow

from ..runtime import Meter, StopReason

__all__ = ["Slots", "take_slot"]


class Slots:
    """First-in, first-out slots; ``size=None`` never makes anyone wait.

    Args:
        size: How many holders at once (``None``: unbounded).
    """

    __slots__ = ("free", "size", "waiting")

    def __init__(self, size: int | None) -> None:
        self.size = size
        self.free = size
        self.waiting: deque[object] = deque()

    async def acquire(self) -> None:
        """Wait for a slot, behind everyone who asked before."""
        if self.free is None:
            return
        token = object()
        self.waiting.append(token)
        try:
            await workflow.wait_condition(lambda: bool(self.free) and self.waiting[0] is token)
        except BaseException:
            self.waiting.remove(token)
            raise
        self.waiting.popleft()
        self.free -= 1

    def release(self) -> None:
        """Give a slot back (a no-op when unbounded)."""
        if self.free is not None:
            self.free += 1


async def take_slot(
    slots: Slots, meter: Meter, interrupted: Callable[[], bool]
) -> StopReason | None:
    """Wait ``queued`` for a slot; ``None`` once the caller holds one and may go on.

    As in-process, the lead is checked again once the slot is free, since the
    delegations ahead may have spent the budget or the lead been interrupted while this
    one waited: then the slot is given back and the blocker returned, ``interrupted``
    or the stop reason of the limit reached. Unbounded slots return ``None`` at once,
    with no re-check (nothing was awaited since the caller's own checks).

    Args:
        slots: The lead's delegation slots.
        meter: The lead's meter.
        interrupted: Whether the lead has been interrupted.

    Returns:
        ``None`` (a slot is held) or why the delegation must not start.
    """
    if slots.size is None:
        return None
    await slots.acquire()
    blocker = StopReason.INTERRUPTED if interrupted() else meter.exceeded(reaching=True)
    if blocker is not None:
        slots.release()
    return blocker
