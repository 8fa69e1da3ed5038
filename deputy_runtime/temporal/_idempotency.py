"""Idempotency keys for model requests made by activities.

Temporal may run a model-request activity more than once (a worker lost mid-request, a
retryable provider error). Every attempt of one activity sends the same
``Idempotency-Key`` header, and no two activities share one, so a provider (or a proxy in
front of it) that honours the header can answer a repeated attempt from its first one
instead of billing it again.
"""

from __future__ import annotations

from temporalio import activity

__all__ = ["IDEMPOTENCY_HEADER", "idempotency_key"]

#: The HTTP header carrying the key.
IDEMPOTENCY_HEADER = "Idempotency-Key"


def idempotency_key(info: activity.Info) -> str:
    """``<workflow id>/<workflow run id>/<activity id>`` of the running activity.

    Activity ids are unique within one workflow run and kept by every retry of the
    activity; the run id keeps them apart across runs of one workflow id (a reset or a
    continue-as-new numbers its activities afresh).

    Args:
        info: The running activity's ``activity.info()``.

    Returns:
        The key: the same for every attempt, different for every other activity.
    """
    return f"{info.workflow_id}/{info.workflow_run_id}/{info.activity_id}"
