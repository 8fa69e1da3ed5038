"""Time limits in workflow time: ``UsageLimits.max_seconds`` as a durable timer.

A run's deadline is fixed when its loop starts: ``workflow.now()`` plus its
``max_seconds``, carried across a continue-as-new in the checkpoint. The loop's steps run
as a task raced against a durable timer (``workflow.wait_condition(..., timeout=)``), so
a replay fires it at the same point of the history. When the timer wins, the run is cut
off wherever it is, as the in-process cancel scope cuts it off: the task is cancelled,
which asks Temporal to cancel the activity in flight (a model request or a tool call;
the worker learns it at its next heartbeat) and the run waits until that activity has
stopped, so nothing of the run still runs once it has ended. A request in flight is
counted (it was sent) and its reply, if any, is dropped; a tool call in flight is
answered as cut off, one that never started as not run, one that finished keeps its
result.

Delegations are not cut off by their lead's timer: each child workflow has its own time
limit, at most the time its lead had left when it started, so it ends ``time_limit`` by
itself at (or a moment after) the lead's deadline and the lead settles it as usual;
:func:`outlive` keeps the lead's cancellation away from it. The lead also sends its
running children the ``interrupt`` signal then (:attr:`Deadline.on_expiry`), which stops
one waiting outside its loop (for a lease). A delegation still queued for a slot at the
deadline leaves the queue ``not_started`` (:attr:`Deadline.expired`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.exceptions import is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from ..chat import ContentToolResult, Turn
    from ..runtime import CUT_OFF_TEXT, NOT_RUN_TEXT, Event, ToolStart, UsageLimits

__all__ = ["Deadline", "close_cut_turn", "outlive"]

T = TypeVar("T")


def _now() -> float:
    return workflow.now().timestamp()


class Deadline:
    """One run's time limit in workflow time.

    Attributes:
        at: When the run's time runs out (a ``workflow.now()`` timestamp), ``None``
            without a limit; set by :meth:`start` or carried by a checkpoint.
        expired: Set once the timer fired and the run is being cut off.
        answered: The results of the current turn's tool calls that finished, by call
            id (what a cut-off turn keeps).
    """

    __slots__ = ("answered", "at", "expired", "on_expiry")

    def __init__(self) -> None:
        self.at: float | None = None
        self.expired = False
        self.answered: dict[str, ContentToolResult] = {}
        #: Called once when the timer fires (a lead interrupts its running children, so
        #: one waiting outside its loop, e.g. for a lease, stops too).
        self.on_expiry: Callable[[], Awaitable[None]] | None = None

    def start(self, limits: UsageLimits) -> None:
        """Fix the deadline from ``limits`` at the run's start (kept when carried)."""
        if self.at is None and limits.max_seconds is not None:
            self.at = _now() + limits.max_seconds

    def left(self) -> float | None:
        """The seconds the run has left (never negative), ``None`` without a limit."""
        if self.at is None:
            return None
        return 0.0 if self.expired else max(0.0, self.at - _now())

    async def run(self, steps: Coroutine[Any, Any, T]) -> T | None:
        """Run ``steps`` within the deadline.

        Args:
            steps: The loop's steps.

        Returns:
            What ``steps`` returned, or ``None`` when the deadline passed first (then
            ``steps`` has been cancelled and has ended).

        Raises:
            BaseException: What ``steps`` raised, and this workflow's own cancellation.
        """
        if self.at is None:
            return await steps
        task = asyncio.ensure_future(steps)
        try:
            left = self.at - _now()
            if left > 0:
                with contextlib.suppress(asyncio.TimeoutError):
                    await workflow.wait_condition(task.done, timeout=left)
        except BaseException:  # this workflow's cancellation: the steps go with it
            task.cancel()
            await asyncio.wait([task])
            raise
        if task.done():
            return task.result()
        self.expired = True
        told = asyncio.ensure_future(self.on_expiry()) if self.on_expiry is not None else None
        task.cancel()
        try:
            await task
        except BaseException as exc:
            # The cut-off itself (a cancelled activity or the task's cancellation); a
            # workflow cancellation arriving meanwhile, or a real error, goes on.
            if workflow.cancellation_reason() is not None or not is_cancelled_exception(exc):
                raise
        finally:
            if told is not None:
                await told
        return None

    def note(self, call_id: str, result: ContentToolResult) -> ContentToolResult:
        """Keep a tool call's result for a cut-off turn; returns it.

        Only under a time limit, and only before the cut-off: a call settling after it
        was cut off (a cancelled activity) is answered as cut off, as in-process.
        """
        if self.at is not None and not self.expired:
            self.answered[call_id] = result
        return result


def close_cut_turn(turns: list[Turn], deadline: Deadline, events: list[Event]) -> None:
    """Answer the last reply's tool calls after the run was cut off, as in-process.

    A call that finished keeps its result, one that was running (its ``ToolStart`` is in
    ``events``) is answered :data:`CUT_OFF_TEXT`, one that never started is answered "not run".
    Nothing happens when the last turn is not a reply asking for tool calls.
    """
    if not turns or turns[-1].role != "assistant" or not turns[-1].tool_requests:
        return
    calls = turns[-1].tool_requests
    ids = {c.id for c in calls}
    started = {e.tool_call_id for e in events if isinstance(e, ToolStart) and e.tool_call_id in ids}
    answers = []
    for call in calls:
        done = deadline.answered.get(call.id)
        if done is not None:
            answers.append(done)
        else:
            error = CUT_OFF_TEXT if call.id in started else NOT_RUN_TEXT
            answers.append(ContentToolResult(call.id, error=error))
    turns.append(Turn("user", tuple(answers)))


async def outlive(work: Awaitable[T]) -> T:
    """Await ``work`` (a delegation) to its end even when the awaiting task is cut off by
    a time limit; this workflow's own cancellation still reaches it.

    A delegation has its own time limit, never later than its lead's (give or take the
    moment its child workflow took to start), so it ends by itself; cancelling it from
    the lead would fail it instead of stopping it ``time_limit``.
    """
    inner = asyncio.ensure_future(work)
    while True:
        try:
            return await asyncio.shield(inner)
        except asyncio.CancelledError:
            if workflow.cancellation_reason() is not None:
                inner.cancel()
                return await inner
