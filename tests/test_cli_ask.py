"""The terminal prompt of ``ask_user`` questions (``run --temporal`` on a TTY): numbered
options, several picks, free text, and the mapping an ``ask_user`` handler returns."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest

from deputy_runtime._cli.ask import prompt_answers

QUESTIONS: list[dict[str, Any]] = [
    {"question": "Which option should I use?", "options": ["A", "B", "C"]},
    {"question": "Anything else?", "options": None},
]


def _reader(lines: list[str], prompts: list[str]) -> Callable[[str], str]:
    def read(prompt: str) -> str:
        prompts.append(prompt)
        if not lines:
            raise EOFError
        return lines.pop(0)

    return read


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("2", "B"),
        ("1, 3", ["A", "C"]),
        ("neither, thanks", "neither, thanks"),
        ("4", "4"),  # not an option's number: the text as typed
    ],
)
def test_an_answer_is_an_option_several_or_the_text(typed: str, expected: object) -> None:
    out, prompts = io.StringIO(), list[str]()
    answers = prompt_answers(QUESTIONS, _reader(["", typed, "no"], prompts), out, asker="asker")
    assert answers == {"Which option should I use?": expected, "Anything else?": "no"}
    assert "asker asks:" in out.getvalue()
    assert "    3. C\n" in out.getvalue()
    # The blank line asked again; the question without options asks for text.
    assert prompts == ["  answer (1-3 or text): "] * 2 + ["  answer: "]


def test_the_input_ending_early_is_an_eof_error() -> None:
    with pytest.raises(EOFError):
        prompt_answers(QUESTIONS, _reader(["1"], []), io.StringIO())
