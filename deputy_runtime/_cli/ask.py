"""Asking a person on the terminal: the questions of an ``ask_user`` call, one by one.

Each question is printed with its options numbered; the person types an option's
number, several numbers separated by commas (the answer is then the list of those
options), or any other text, which is the answer as typed. An empty line asks again.
The result is the mapping an ``ask_user`` handler returns: question -> answer.
"""

from __future__ import annotations

import select
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

import anyio

from ..errors import DeputyError

__all__ = ["NO_ONE_TO_ASK", "TerminalAsker", "prompt_answers", "read_line"]

#: Why a delegation's ``ask_user`` call gets no answer when nobody is at a terminal.
NO_ONE_TO_ASK = (
    "No one can answer here: deputy-runtime asks the user only when it runs on a terminal "
    "(standard input and output both TTYs, without --json). Go on without the answer and "
    "say what you assumed."
)


def read_line(prompt: str, gone: threading.Event | None = None) -> str:
    """One line of standard input, the prompt on standard output (``input`` would write
    it to standard error on a terminal).

    With ``gone``, the wait checks it a few times a second, so a prompt whose asker was
    cancelled leaves its thread instead of holding the process open at exit.

    Raises:
        EOFError: Standard input ended, or ``gone`` was set.
    """
    sys.stdout.write(prompt)
    sys.stdout.flush()
    while gone is not None and not select.select([sys.stdin], [], [], 0.2)[0]:
        if gone.is_set():
            raise EOFError("the question was withdrawn")
    line = sys.stdin.readline()
    if not line:
        raise EOFError("standard input ended")
    return line.rstrip("\n")


class TerminalAsker:
    """The ``human_input`` of an in-process ``run``: a delegation's ``ask_user`` questions
    are asked on the terminal, one call at a time, while the live view (``view``, set
    once it exists) pauses. Not interactive (no terminal, ``--json``, ``serve``): the
    call fails with :data:`NO_ONE_TO_ASK`, which the model reads as the tool's error.
    """

    def __init__(self, *, interactive: bool) -> None:
        self.interactive = interactive
        self.view: Any = None
        self._turn: anyio.Lock | None = None

    async def __call__(self, questions: Sequence[Mapping[str, Any]], context: Any) -> Any:
        if not self.interactive:
            raise DeputyError(NO_ONE_TO_ASK)
        if self._turn is None:
            self._turn = anyio.Lock()
        asker = str(getattr(context, "agent_name", None) or "agent")
        gone = threading.Event()
        async with self._turn:
            hold = getattr(self.view, "hold", None)
            if hold is not None:
                hold()
            try:
                # A worker thread waits on standard input; a cancelled run abandons it and
                # sets ``gone``, which ends its wait within a fraction of a second.
                return await anyio.to_thread.run_sync(
                    lambda: prompt_answers(
                        questions, lambda p: read_line(p, gone), sys.stdout, asker=asker
                    ),
                    abandon_on_cancel=True,
                )
            except EOFError:
                raise DeputyError(
                    "Standard input ended before the user answered; go on without the answer."
                ) from None
            finally:
                gone.set()
                resume = getattr(self.view, "resume", None)
                if resume is not None:
                    resume()


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
