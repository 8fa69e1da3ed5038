"""Problems found in definition files: one frozen value for warnings and errors alike.

Readers report a file they accept with caveats (an unquoted ``: `` in a value, a cut
description, an entry that has no effect here) as warnings instead of failing. Warnings
never change the definition a file reads to, so :class:`AgentDefinition` equality and
round trips are unaffected by them: a reader hands each one to the caller's
``on_warning`` callback, or, without a callback, issues it as a Python warning of the
category :class:`DefinitionWarning` so that it is not lost.
"""

from __future__ import annotations

import enum
import warnings
from collections.abc import Callable
from pathlib import Path

import msgspec

from ..errors import DefinitionFileError

__all__ = [
    "DefinitionProblem",
    "DefinitionWarning",
    "ProblemLog",
    "Severity",
    "WarningCallback",
    "problem_from_error",
]


class Severity(enum.Enum):
    """How bad a :class:`DefinitionProblem` is: a warning still loads, an error does not."""

    WARNING = "warning"
    ERROR = "error"


class DefinitionProblem(msgspec.Struct, frozen=True):
    """One problem in one definition file.

    ``line`` is 1-based (``None`` when unknown); ``field`` is the file's key the problem is
    about (``None`` for the file as a whole); ``message`` says what is wrong and how to fix
    it. ``str()`` gives the ``path:line: severity: message`` line the command prints.
    """

    path: Path
    line: int | None
    field: str | None
    message: str
    severity: Severity

    def __str__(self) -> str:
        where = str(self.path) if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.severity.value}: {self.message}"


class DefinitionWarning(UserWarning):
    """The category of the Python warnings readers issue when no ``on_warning`` is given."""


#: Receives each warning a reader finds.
WarningCallback = Callable[[DefinitionProblem], None]


def problem_from_error(exc: DefinitionFileError, field: str | None = None) -> DefinitionProblem:
    """The error-severity problem a :class:`DefinitionFileError` describes."""
    return DefinitionProblem(exc.path, exc.line, field, exc.reason, Severity.ERROR)


class ProblemLog:
    """Collects the problems of one file while it is read.

    Readers record every independent problem instead of stopping at the first, so a file
    with three mistakes is fixed in one pass; the strict API then raises the first error.
    """

    __slots__ = ("_raised", "items", "path")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.items: list[DefinitionProblem] = []
        self._raised: list[DefinitionFileError] = []

    def warn(self, message: str, *, line: int | None = None, field: str | None = None) -> None:
        self.items.append(DefinitionProblem(self.path, line, field, message, Severity.WARNING))

    def error(self, exc: DefinitionFileError, field: str | None = None) -> None:
        self.items.append(problem_from_error(exc, field))
        self._raised.append(exc)

    def record_raised(self, exc: DefinitionFileError) -> None:
        """Record ``exc`` unless it is an error already recorded (and then re-raised)."""
        if not any(known is exc for known in self._raised):
            self.error(exc)

    @property
    def errors(self) -> list[DefinitionProblem]:
        return [p for p in self.items if p.severity is Severity.ERROR]

    @property
    def warnings(self) -> list[DefinitionProblem]:
        return [p for p in self.items if p.severity is Severity.WARNING]

    def raise_first_error(self) -> None:
        """Raise the first recorded error (the original exception), if there is one."""
        if self._raised:
            raise self._raised[0]

    def deliver(self, on_warning: WarningCallback | None, *, stacklevel: int = 3) -> None:
        """Hand every warning to ``on_warning``, or issue it as a DefinitionWarning."""
        for problem in self.warnings:
            if on_warning is None:
                warnings.warn(str(problem), DefinitionWarning, stacklevel=stacklevel)
            else:
                on_warning(problem)
