"""Asking a person on the terminal: the questions of an ``ask_user`` call, one by one.

Each question is printed with its options numbered; the person types an option's
number, several numbers separated by commas (the answer is then the list of those
options), or any other text, which is the answer as typed. An empty line asks again.
The result is the mapping an ``ask_user`` handler returns: question -> answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

__all__ = ["prompt_answers"]


def prompt_answers(
    questions: Sequence[Mapping[str, Any]],
    read: Callable[[str], str],
    out: IO[str],
    *,
    asker: str = "agent",
) -> dict[str, str | list[str]]:
    """Ask each question on ``out``, reading the answers with ``read(prompt)``.

    Args:
        questions: ``{"question": str, "options": list[str] | None}`` objects.
        read: Reads one line (``input``, or a stand-in in tests); raises ``EOFError``
            when there is nothing more to read.
        out: Where the questions are written.
        asker: Who asks (shown in the heading).

    Returns:
        Question -> the answer: the text typed, an option, or a list of options.

    Raises:
        EOFError: The input ended before every question was answered.
    """
    out.write(f"\n{asker} asks:\n")
    answers: dict[str, str | list[str]] = {}
    for item in questions:
        text = str(item.get("question", ""))
        options = [str(o) for o in item.get("options") or ()]
        out.write(f"  {text}\n")
        for number, option in enumerate(options, start=1):
            out.write(f"    {number}. {option}\n")
        out.flush()
        hint = f"answer (1-{len(options)} or text)" if options else "answer"
        while True:
            line = read(f"  {hint}: ").strip()
            if line:
                break
        answers[text] = _chosen(line, options)
    return answers


def _chosen(line: str, options: list[str]) -> str | list[str]:
    """The options a line of numbers picks, or the line itself."""
    parts = [p.strip() for p in line.split(",")]
    if options and all(p.isdigit() and 1 <= int(p) <= len(options) for p in parts):
        picked = [options[int(p) - 1] for p in parts]
        return picked[0] if len(picked) == 1 else picked
    return line
