"""The client side of human input: answering a run's questions and listing them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from temporalio.client import Client, WorkflowHandle

from ._human_values import ANSWER_UPDATE, PENDING_QUESTIONS_QUERY, PendingQuestion

__all__ = ["answer_question", "pending_questions"]


def _handle(target: Client | WorkflowHandle[Any, Any], workflow_id: str | None) -> Any:
    if isinstance(target, WorkflowHandle):
        if workflow_id is not None and workflow_id != target.id:
            raise ValueError(
                f"workflow_id {workflow_id!r} does not match the handle's workflow {target.id!r}"
            )
        return target
    if not isinstance(target, Client):
        raise TypeError(
            f"expected a temporalio Client or WorkflowHandle, got {type(target).__name__}"
        )
    if not isinstance(workflow_id, str) or not workflow_id.strip():
        raise ValueError(f"workflow_id must be the lead workflow's id, got {workflow_id!r}")
    return target.get_workflow_handle(workflow_id)


async def answer_question(
    target: Client | WorkflowHandle[Any, Any],
    workflow_id: str | None,
    question_id: str,
    answers: Mapping[str, str | Sequence[str]],
) -> str:
    """Answer a pending question of a durable run, the lead's or a delegation's.

    Sends the lead workflow's ``answer`` update; its validator refuses an unknown or
    already answered ``question_id`` and answers that do not fit the questions before
    anything is written to the run's history.

    Args:
        target: A client built with ``data_converter``, or the lead workflow's handle.
        workflow_id: The lead workflow's id (``None`` with a handle).
        question_id: The ``question_id`` of the ``QuestionEvent`` (or of
            :func:`pending_questions`).
        answers: Each question's text -> its answer, a string or a list of strings
            (joined with ``", "``, as in-process); every question must be answered.

    Returns:
        What the asking model receives: the answers as a JSON object.

    Raises:
        ValueError: ``question_id`` is blank or ``answers`` is not a mapping (checked
            here, before any request).
        temporalio.client.WorkflowUpdateFailedError: The workflow refused the answer;
            its ``cause`` names the field and what was expected.
    """
    handle = _handle(target, workflow_id)
    if not isinstance(question_id, str) or not question_id.strip():
        raise ValueError(f"question_id must be a non-blank string, got {question_id!r}")
    if not isinstance(answers, Mapping):
        raise ValueError(
            "answers must be a mapping of each question to its answer, got "
            f"{type(answers).__name__}"
        )
    plain = {
        str(k): v if isinstance(v, str) else list(v) if isinstance(v, list | tuple) else v
        for k, v in answers.items()
    }
    value: str = await handle.execute_update(
        ANSWER_UPDATE, args=[question_id, plain], result_type=str
    )
    return value


async def pending_questions(
    target: Client | WorkflowHandle[Any, Any], workflow_id: str | None = None
) -> tuple[PendingQuestion, ...]:
    """The questions of a durable run waiting for answers, in the order they were asked.

    Args:
        target: A client built with ``data_converter``, or the lead workflow's handle.
        workflow_id: The lead workflow's id (``None`` with a handle).

    Returns:
        One :class:`PendingQuestion` per question (the lead's and its delegations').
    """
    handle = _handle(target, workflow_id)
    found: list[PendingQuestion] = await handle.query(
        PENDING_QUESTIONS_QUERY, result_type=list[PendingQuestion]
    )
    return tuple(found)
