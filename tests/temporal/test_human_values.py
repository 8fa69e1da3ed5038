"""The answer checks shared by the ``answer`` update's validator and ``answer_question``:
every question answered, nothing else, strings or lists of strings, encoded as the
in-process ``ask_user`` tool encodes a handler's answers."""

from __future__ import annotations

import pytest

from deputy_runtime import ask_user_tool
from deputy_runtime.temporal import AskedQuestion
from deputy_runtime.temporal._human_values import asks_user, check_answers, encode_answers
from deputy_runtime.tools import invoke_tool

QUESTIONS = (AskedQuestion("Which option?", ("A", "B")), AskedQuestion("Why?"))


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        (["A"], "answers must be a JSON object mapping each question to its answer, got list"),
        ({"Which option?": "A"}, "answers: no answer for 'Why?'; answer every question"),
        (
            {"Which option?": "A", "Why?": "x", "When?": "now"},
            "answers: 'When?' is not one of the questions asked ('Which option?', 'Why?')",
        ),
        ({"Which option?": 1, "Why?": "x"}, "answers['Which option?'] must be a string or"),
        ({"Which option?": ["A", 2], "Why?": "x"}, "answers['Which option?'] must be a string"),
    ],
)
def test_bad_answers_are_refused_naming_the_field(answers: object, message: str) -> None:
    with pytest.raises(ValueError) as refused:
        check_answers(QUESTIONS, answers)
    assert message in str(refused.value)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_answers_are_encoded_as_the_in_process_tool_encodes_them() -> None:
    answers = {"Why?": "because", "Which option?": ["A", "B"]}
    checked = check_answers(QUESTIONS, answers)
    assert list(checked) == ["Which option?", "Why?"]  # the questions' order
    in_process = await invoke_tool(
        ask_user_tool(lambda questions, context: checked),
        {"questions": [{"question": "Which option?"}, {"question": "Why?"}]},
    )
    assert encode_answers(checked) == in_process == ('{"Which option?":"A, B","Why?":"because"}')


def test_ask_user_names_compare_as_the_permission_rules_do() -> None:
    assert asks_user("ask_user")
    assert asks_user("Ask-User")
    assert not asks_user("ask_users")
