"""Human input on the durable path: the values that cross the boundary, and their checks.

A question an agent asks with ``ask_user`` is a :class:`PendingQuestion` until a person
answers it through the lead's ``answer`` update. The answers are checked here (by the
update's validator in the workflow and by :func:`answer_question` on the client) and
encoded as the in-process tool encodes them: a JSON object mapping each question to its
answer, a list of choices joined with ``", "``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from ..runtime import ASK_USER_TOOL_NAME, normalize_tool_name

__all__ = [
    "ANSWER_UPDATE",
    "PENDING_QUESTIONS_QUERY",
    "AnswerDelivery",
    "AskedQuestion",
    "PendingQuestion",
    "asks_user",
    "check_answers",
    "encode_answers",
]

#: Update on the lead workflow answering a pending question: ``(question_id, answers)``.
ANSWER_UPDATE = "answer"
#: Query on the lead workflow listing the run's pending questions.
PENDING_QUESTIONS_QUERY = "pending_questions"


class AskedQuestion(msgspec.Struct, frozen=True, gc=False):
    """One question of an ``ask_user`` call, with the choices the model offered."""

    question: str
    options: tuple[str, ...] | None = None


class PendingQuestion(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """An ``ask_user`` call waiting for a person's answers.

    ``question_id`` is what the ``answer`` update names; the ids say which agent asked
    (``delegation_id`` is ``None`` for the lead's own questions).
    """

    question_id: str
    tool_call_id: str
    agent_id: str
    agent_name: str | None
    run_id: str
    delegation_id: str | None = None
    questions: tuple[AskedQuestion, ...]


class AnswerDelivery(msgspec.Struct, frozen=True, gc=False):
    """The lead forwarding checked answers to the child workflow that asked."""

    question_id: str
    value: str


def asks_user(tool_name: str) -> bool:
    """Whether ``tool_name`` is ``ask_user`` (names compare as the permission rules do)."""
    return normalize_tool_name(tool_name) == ASK_USER_TOOL_NAME


def check_answers(questions: Iterable[AskedQuestion], answers: object) -> dict[str, str]:
    """``answers`` checked against ``questions`` and put in the in-process form.

    Args:
        questions: The questions asked.
        answers: A mapping from each question's text to its answer: a string, or a list
            of strings (joined with ``", "``, as in-process).

    Returns:
        Question text -> answer, in the order of the questions.

    Raises:
        ValueError: ``answers`` is not a mapping, names a question that was not asked,
            leaves one out, or gives an answer that is not a string or list of strings;
            the message names it.
    """
    if not isinstance(answers, Mapping):
        raise ValueError(
            "answers must be a JSON object mapping each question to its answer, got "
            f"{type(answers).__name__}"
        )
    texts = [q.question for q in questions]
    unknown = [k for k in answers if k not in texts]
    if unknown:
        raise ValueError(
            f"answers: {unknown[0]!r} is not one of the questions asked ({_listed(texts)})"
        )
    missing = [t for t in texts if t not in answers]
    if missing:
        raise ValueError(f"answers: no answer for {missing[0]!r}; answer every question")
    out: dict[str, str] = {}
    for text in texts:
        out[text] = _answer(text, answers[text])
    return out


def encode_answers(answers: Mapping[str, str]) -> str:
    """What the model receives: the answers as a JSON object (as the in-process tool)."""
    return msgspec.json.encode(dict(answers)).decode()


def _answer(text: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return ", ".join(value)
    raise ValueError(
        f"answers[{text!r}] must be a string or a list of strings, got {type(value).__name__}"
    )


def _listed(texts: list[str]) -> str:
    return ", ".join(repr(t) for t in texts)
