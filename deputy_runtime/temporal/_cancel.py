"""Cancellation of a workflow (``handle.cancel()``) as workflow code sees it.

Temporal delivers a workflow's cancellation as an exception at whatever it awaits: an
``asyncio.CancelledError``, or an ``ActivityError`` / ``ChildWorkflowError`` whose
cause is Temporal's ``CancelledError`` once the activity or child it awaited has been
cancelled in turn. The loop turns a failed activity or child into a result for the
model, so it must tell this workflow's own cancellation apart from a failure (or from a
child cancelled on its own, which the lead settles and goes on from): the workflow's
own cancellation is re-raised, so it ends ``CANCELED``, never with a result.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import is_cancelled_exception

__all__ = ["cancelling"]


def cancelling(exc: BaseException) -> bool:
    """Whether ``exc`` is this workflow's own cancellation reaching the code awaiting.

    Args:
        exc: An exception caught in workflow code.

    Returns:
        ``True`` when the workflow was asked to cancel and ``exc`` is a cancellation
        (then re-raise it); ``False`` for a failure, or for an activity or child workflow
        cancelled while this workflow was not.
    """
    if isinstance(exc, GeneratorExit):
        # A worker evicting the run closes its coroutines: not a cancellation, and the
        # workflow's state cannot be read then.
        return False
    return workflow.cancellation_reason() is not None and is_cancelled_exception(exc)
