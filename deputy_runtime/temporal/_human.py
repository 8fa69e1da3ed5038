"""``ask_user`` as workflow code: a question waits durably for a person's answers.

An agent's ``ask_user`` call never becomes an activity. The workflow checks the call as
the tool activity would (both permission sets, then the arguments against the tool's
schema), gives the question an id from the workflow's seeded random source, makes it
known to the lead (a child signals its lead workflow, and waits until the signal is
recorded there, before the question is announced), appends a ``QuestionEvent`` and
waits (``workflow.wait_condition``: no timer, no activity) until the answers arrive or
the agent is interrupted. Answers come through the lead's ``answer`` update, whose
validator checks them before anything is written; the lead forwards a delegation's
answers to its child workflow as the ``answers`` signal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import msgspec
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ..chat import ContentToolRequest, ContentToolResult, ToolSpec, tool_error_text
    from ..errors import ToolArgumentError
    from ..runtime import Event, QuestionEvent, invalid_arguments_text, permission_denied_text
    from ..tools import ask_user, tool_validator
    from ._human_values import (
        AnswerDelivery,
        AskedQuestion,
        PendingQuestion,
        asks_user,
        check_answers,
        encode_answers,
    )
    from ._values import AgentSpec, PermissionSpec, ToolReply

__all__ = [
    "ANSWERS_SIGNAL",
    "QUESTION_SIGNAL",
    "Asker",
    "HumanInput",
    "ask_tools",
    "human_input_refusal",
    "tell_lead",
]

#: Signal from a child workflow to its lead: a question of the delegation is pending.
QUESTION_SIGNAL = "question"
#: Signal from the lead to a child workflow: the checked answers to one of its questions.
ANSWERS_SIGNAL = "answers"
#: The answer to an ``ask_user`` call of a child workflow started without delegated
#: human input (a lead refuses to start such a delegation unless ``ask_user`` is
#: disallowed, and then the deny list refuses the call first), worded as the in-process
#: unbound tool's failure.
NOT_ALLOWED = tool_error_text(
    "ask_user has no answer handler bound: this run does not allow delegated human "
    "input (lead_input(human_input=True))"
)
#: The answer to an ``ask_user`` call whose wait an interrupt ended.
INTERRUPTED = "The run was interrupted before the user answered; the question is withdrawn."


class Asker(Protocol):
    """What :meth:`HumanInput.ask` reads of the agent loop asking."""

    permissions: PermissionSpec
    lead_permissions: PermissionSpec | None
    interrupt_reason: str | None
    events: list[Event]

    @property
    def ids(self) -> Any:
        """The loop's ids (``fields()`` gives the event id fields)."""


def ask_tools(
    tools: tuple[str, ...], extra: tuple[ToolSpec, ...]
) -> tuple[tuple[str, ...], tuple[ToolSpec, ...]]:
    """``tools`` without ``ask_user``, and ``extra`` with its spec when it was there.

    The workflow answers ``ask_user`` itself, so the workers need not have it.
    """
    kept = tuple(t for t in tools if not asks_user(t))
    if len(kept) == len(tools):
        return tools, extra
    spec = ToolSpec(ask_user.name, ask_user.description, ask_user.parameters)
    return kept, (*extra, spec)


def human_input_refusal(spec: AgentSpec, allowed: bool) -> str | None:
    """Why a delegation to ``spec`` cannot start (it has ``ask_user`` and the run does
    not allow delegated human input), or ``None``."""
    disallowed = any(asks_user(t) for t in spec.disallowed_tools)  # removed, as in-process
    if allowed or disallowed or not any(asks_user(t) for t in spec.tools):
        return None
    return (
        f"Subagent '{spec.name}' has ask_user: delegated human input requires "
        "lead_input(human_input=True)."
    )


async def tell_lead(pending: PendingQuestion) -> None:
    """A child's announcement: signal the lead workflow (the run's one address for
    answers); the question is announced once the signal is recorded in the lead's history,
    so an answer sent on seeing it finds the lead knowing the question."""
    parent = workflow.info().parent
    assert parent is not None, "a delegation's workflow is always a child of its lead"
    lead = workflow.get_external_workflow_handle(parent.workflow_id)
    await lead.signal(QUESTION_SIGNAL, pending)


class _Args(msgspec.Struct, frozen=True):
    questions: list[Any]


class HumanInput:
    """One workflow's questions: those it waits on, and (for a lead) the run's pending
    ones and the ids already answered.

    ``announce`` makes a new question known where answers are taken (a child: signal the
    lead; a lead: nothing more, :meth:`register` already did). ``allowed`` is whether
    questions may be asked at all (set from the child's input before its loop runs).
    """

    def __init__(self, announce: Callable[[PendingQuestion], Any] | None = None) -> None:
        self._announce = announce
        self.allowed = True
        self._answers: dict[str, str] = {}  # question id -> the encoded answers
        self.pending: dict[str, PendingQuestion] = {}  # the run's, in asking order
        self.answered: set[str] = set()

    async def ask(self, call: ContentToolRequest, loop: Asker) -> ToolReply:
        """Check one ``ask_user`` call, announce its question and wait for the answers."""
        checks = [(loop.permissions, "")]
        if loop.lead_permissions is not None:
            checks.append((loop.lead_permissions, " (lead's current permissions)"))
        for spec, suffix in checks:
            denial = spec.checkable().check_static(ask_user, call.arguments)
            if denial is not None:
                reason = f"{denial.reason}{suffix}"
                error = permission_denied_text(reason)
                return ToolReply(ContentToolResult(call.id, error=error), denied=reason)
        try:
            questions = tool_validator(ask_user)(call.arguments)["questions"]
        except ToolArgumentError as exc:
            return ToolReply(ContentToolResult(call.id, error=invalid_arguments_text(exc)))
        if not self.allowed:
            return ToolReply(ContentToolResult(call.id, error=NOT_ALLOWED))
        ids = loop.ids.fields()
        pending = PendingQuestion(
            question_id=f"question_{workflow.uuid4().hex}",
            tool_call_id=call.id,
            agent_id=ids["agent_id"],
            agent_name=ids["agent_name"],
            run_id=ids["run_id"],
            delegation_id=ids["delegation_id"],
            questions=tuple(
                AskedQuestion(q.question, None if q.options is None else tuple(q.options))
                for q in questions
            ),
        )
        qid = pending.question_id
        if self._announce is not None:
            await self._announce(pending)
        else:
            self.register(pending)
        loop.events.append(
            QuestionEvent(
                **ids,
                question_id=qid,
                tool_call_id=call.id,
                questions=tuple({"question": q.question, "options": q.options} for q in questions),
            )
        )
        try:
            await workflow.wait_condition(
                lambda: qid in self._answers or loop.interrupt_reason is not None
            )
        finally:
            self.pending.pop(qid, None)
        value = self._answers.pop(qid, None)
        if value is None:
            return ToolReply(ContentToolResult(call.id, error=INTERRUPTED))
        return ToolReply(ContentToolResult(call.id, value=value))

    def register(self, pending: PendingQuestion) -> None:
        """Take a question in: the lead's own, or one a child announced."""
        if pending.question_id not in self.answered:
            self.pending[pending.question_id] = pending

    def check(self, question_id: object, answers: object) -> dict[str, str]:
        """The answers to ``question_id`` in the in-process form, or a ``ValueError``
        naming what is wrong (the ``answer`` update's validator)."""
        if not isinstance(question_id, str):
            raise ValueError(f"question_id must be a string, got {type(question_id).__name__}")
        pending = self.pending.get(question_id)
        if pending is None:
            if question_id in self.answered:
                raise ValueError(f"question_id {question_id!r} is already answered")
            known = ", ".join(self.pending) or "none"
            raise ValueError(
                f"question_id {question_id!r} is not a pending question of this run "
                f"(pending: {known})"
            )
        return check_answers(pending.questions, answers)

    def answer(self, question_id: str, answers: object) -> tuple[PendingQuestion, str]:
        """Take checked answers: the question leaves the pending ones; returns it and the
        encoded answers (for the lead to forward to the child that asked)."""
        value = encode_answers(self.check(question_id, answers))
        pending = self.pending.pop(question_id)
        self.answered.add(question_id)
        if pending.delegation_id is None:  # the lead's own: its loop waits here
            self._answers[question_id] = value
        return pending, value

    def deliver(self, delivery: AnswerDelivery) -> None:
        """Answers the lead forwarded (a child's question)."""
        self._answers[delivery.question_id] = delivery.value

    def forget(self, delegation_id: str) -> None:
        """A delegation settled: its questions are no longer pending."""
        for qid, pending in tuple(self.pending.items()):
            if pending.delegation_id == delegation_id:
                del self.pending[qid]
