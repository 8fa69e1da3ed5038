"""The ``ask_user`` tool: the model asks a person questions and gets answers back.

``ask_user`` is the unbound tool: it carries the schema and fails with a clear error when
called, because only the host knows how to reach a person. ``ask_user_tool(handler)``
binds a handler ``(questions, context)`` (sync or async) that returns the answers as a
mapping from question text to the chosen answer (a list of labels is joined with ", ").
The model receives the answers JSON-encoded. An answer grants no permissions.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any, TypeAlias

import msgspec

from ._decorator import tool
from ._tool import Tool

__all__ = ["AskUserHandler", "Question", "ask_user", "ask_user_tool"]

ASK_USER_NAME = "ask_user"


class Question(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One question for the user, with optional answer choices."""

    question: Annotated[
        str,
        msgspec.Meta(
            min_length=1,
            description="The question, phrased for a person.",
            examples=["Which option should I use?"],
        ),
    ]
    options: (
        Annotated[
            list[str],
            msgspec.Meta(description="Suggested answers the person can pick from."),
        ]
        | None
    ) = None


#: ``handler(questions, context)`` -> answers (or an awaitable of them). ``questions`` is
#: a list of ``{"question": str, "options": list[str] | None}`` dicts.
AskUserHandler: TypeAlias = Callable[
    [list[dict[str, Any]], Any], "Mapping[str, Any] | Awaitable[Mapping[str, Any]]"
]

_Questions = Annotated[
    list[Question],
    msgspec.Meta(
        min_length=1,
        description="The questions to ask, in order.",
        examples=[[{"question": "Which option should I use?", "options": ["A", "B"]}]],
    ),
]
_DESCRIPTION = (
    "Ask the user one or more questions and wait for the answers. Use it when you need "
    "a decision or information only the user has. Offer options when the choices are known."
)


def _unbound(questions: _Questions) -> str:
    raise RuntimeError(
        "ask_user has no answer handler bound: the host must provide one "
        "(ask_user_tool(handler), or DelegationPolicy(human_input=...) for subagents)"
    )


#: The unbound ``ask_user`` tool (calling it fails until a host binds a handler).
ask_user: Tool = tool(name=ASK_USER_NAME, description=_DESCRIPTION, read_only=True)(_unbound)


def _encode_answers(answers: Any) -> str:
    if not isinstance(answers, Mapping):
        raise TypeError(
            "ask_user handler must return a mapping of question -> answer, got "
            f"{type(answers).__name__}"
        )
    out: dict[str, str] = {}
    for question, answer in answers.items():
        if isinstance(answer, str):
            out[str(question)] = answer
        elif isinstance(answer, Sequence) and all(isinstance(a, str) for a in answer):
            out[str(question)] = ", ".join(answer)
        else:
            raise TypeError(
                f"ask_user handler answer for {question!r} must be a string or a list of "
                f"strings, got {type(answer).__name__}"
            )
    return msgspec.json.encode(out).decode()


def ask_user_tool(handler: AskUserHandler, context: Any = None) -> Tool:
    """An ``ask_user`` tool whose answers come from ``handler(questions, context)``.

    The result the model sees is a JSON object mapping each question to its answer.

    Args:
        handler: Called with the questions and ``context``; returns question -> answer
            (a string or a list of strings); may be async.
        context: Passed to ``handler`` unchanged (delegation binds the child's ids there).

    Returns:
        A read-only tool named ``ask_user``.

    Raises:
        TypeError: ``handler`` is not callable.
    """
    if not callable(handler):
        raise TypeError("ask_user_tool: handler must be callable")

    async def ask(questions: _Questions) -> str:
        plain = [{"question": q.question, "options": q.options} for q in questions]
        answers = handler(plain, context)
        if inspect.isawaitable(answers):
            answers = await answers
        return _encode_answers(answers)

    return tool(name=ASK_USER_NAME, description=_DESCRIPTION, read_only=True)(ask)
