"""ask_user: the unbound tool, binding a sync or async handler, answer encoding."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from deputy_runtime.errors import ToolArgumentError
from deputy_runtime.tools import ask_user, ask_user_tool, invoke_tool

pytestmark = pytest.mark.anyio

QUESTIONS = {
    "questions": [
        {"question": "Which colour?", "options": ["red", "blue"]},
        {"question": "Why?"},
    ]
}


def test_unbound_tool_shape() -> None:
    assert ask_user.name == "ask_user"
    assert ask_user.read_only
    items = ask_user.parameters["properties"]["questions"]["items"]
    assert items["required"] == ["question"]
    assert set(items["properties"]) == {"question", "options"}
    assert ask_user.parameters["required"] == ["questions"]


async def test_unbound_tool_raises_clear_error() -> None:
    with pytest.raises(RuntimeError, match="no answer handler bound"):
        await invoke_tool(ask_user, QUESTIONS)


async def test_sync_handler_receives_questions_and_context() -> None:
    seen: list[tuple[Any, Any]] = []

    def handler(questions: list[dict[str, Any]], context: Any) -> dict[str, Any]:
        seen.append((questions, context))
        return {"Which colour?": ["red", "blue"], "Why?": "because"}

    bound = ask_user_tool(handler, context={"agent_id": "agent_1"})
    assert bound.name == "ask_user"
    assert bound.read_only
    out = await invoke_tool(bound, QUESTIONS)
    assert json.loads(out) == {"Which colour?": "red, blue", "Why?": "because"}
    assert seen == [
        (
            [
                {"question": "Which colour?", "options": ["red", "blue"]},
                {"question": "Why?", "options": None},
            ],
            {"agent_id": "agent_1"},
        )
    ]


async def test_async_handler_is_awaited() -> None:
    async def handler(questions: list[dict[str, Any]], context: Any) -> dict[str, str]:
        await anyio.sleep(0)
        return {q["question"]: "ok" for q in questions}

    out = await invoke_tool(ask_user_tool(handler), QUESTIONS)
    assert json.loads(out) == {"Which colour?": "ok", "Why?": "ok"}


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        (["not", "a", "map"], "must return a mapping"),
        ({"Why?": 3}, "must be a string or a list of strings"),
        ({"Why?": ["a", 1]}, "must be a string or a list of strings"),
    ],
)
async def test_bad_handler_results_raise(answers: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        await invoke_tool(ask_user_tool(lambda q, c: answers), QUESTIONS)


async def test_bad_questions_are_argument_errors() -> None:
    bound = ask_user_tool(lambda q, c: {})
    with pytest.raises(
        ToolArgumentError, match="argument 'questions': expected array of length >= 1"
    ):
        await invoke_tool(bound, {"questions": []})
    with pytest.raises(ToolArgumentError, match=r"argument 'questions\[0\].question'"):
        await invoke_tool(bound, {"questions": [{"question": ""}]})


def test_non_callable_handler_rejected() -> None:
    with pytest.raises(TypeError, match="callable"):
        ask_user_tool("nope")  # type: ignore[arg-type]
