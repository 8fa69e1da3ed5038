"""The workload every contender reproduces, and the contract a contender module fulfils.

Keeping the canned answers and the checks in one place is what makes the numbers of
different frameworks comparable: every contender runs the same three-call sequential shape
and the same two-call fan-out shape, and every run is checked for ``done:N``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from importlib import metadata
from typing import Any, Protocol

__all__ = [
    "CHILD_ANSWER",
    "CHILD_DESCRIPTION",
    "CHILD_NAME",
    "CHILD_PROMPT",
    "LEAD_PROMPT",
    "TOKENS_IN",
    "TOKENS_OUT",
    "Contender",
    "ContenderFactory",
    "check_answer",
    "distribution_version",
    "done",
    "task_text",
]

#: What every subagent's model answers; the lead counts tool results equal to it.
CHILD_ANSWER = "subagent-done"
#: The subagent definition every contender builds: name, description, system prompt.
CHILD_NAME = "worker"
CHILD_DESCRIPTION = "does work"
CHILD_PROMPT = "You work."
LEAD_PROMPT = "You lead."
#: Token usage every canned response reports (input, output).
TOKENS_IN = 12
TOKENS_OUT = 4


def task_text(index: int) -> str:
    """The task text of delegation number ``index`` (distinct per delegation)."""
    return f"task {index}"


def done(results: Iterable[Any]) -> str:
    """The lead's final answer: ``done:K`` with K the results equal to the child answer."""
    return f"done:{sum(1 for r in results if r == CHILD_ANSWER)}"


def distribution_version(name: str) -> str:
    """``"name X.Y.Z"`` for an installed distribution, or ``"name (unknown)"``."""
    try:
        return f"{name} {metadata.version(name)}"
    except metadata.PackageNotFoundError:
        return f"{name} (unknown)"


def check_answer(answer: object, expected: int) -> None:
    """Raise unless ``answer`` is ``done:<expected>`` (every delegation ran and reached
    the lead)."""
    if answer != f"done:{expected}":
        raise AssertionError(f"contender answered {answer!r}, expected 'done:{expected}'")


class Contender(Protocol):
    """One framework reproducing the workload.

    ``sequential()`` is one complete lead run with one delegation (three model calls);
    ``fanout(n)`` is one lead run whose first response asks for ``n`` delegations at once.
    Both return the lead's final answer, which must be ``done:1`` / ``done:n``.
    """

    name: str
    version: str

    async def sequential(self) -> str: ...

    async def fanout(self, n: int) -> str: ...


#: A contender module exposes ``create(child_yields=False) -> Contender``. With
#: ``child_yields`` the subagent's canned model yields to the event loop once before
#: answering, so all N delegations of a fan-out are alive at once (used for the memory
#: pass; timing passes never yield).
ContenderFactory = Callable[..., Contender]
