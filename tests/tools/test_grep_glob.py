"""The ``glob`` argument of grep_files: capped, linear to translate and to match.

``fnmatch`` needed quadratic time for a glob of 10,000 ``[``; the replacement refuses
over-long or over-complex globs with a message naming the argument, and otherwise
matches exactly what ``fnmatch.fnmatchcase`` matches (a hypothesis property), except
where CPython's removal of a reversed range moves a later ``!`` to the front of the set
and reads it as a negation (``[?-/!]`` matches any character there): here that ``!`` stays
the literal it was written as.
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from deputy_runtime.errors import ToolArgumentError
from deputy_runtime.tools import tools_file
from deputy_runtime.tools._glob import GLOB_MAX_CHARS, GLOB_MAX_WILDCARDS, compile_glob


@pytest.fixture
def grep(tmp_path: Path) -> Callable[..., Any]:
    for i in range(50):
        (tmp_path / f"f{i}.txt").write_text("needle\n")
    (tmp_path / "code.py").write_text("needle\n")
    return {t.name: t for t in tools_file(tmp_path)}["grep_files"].function


def test_ten_thousand_brackets_are_refused_by_length(grep: Callable[..., Any]) -> None:
    with pytest.raises(ToolArgumentError) as info:
        grep(pattern="needle", glob="[" * 10_000)
    assert str(info.value).startswith(
        f"argument 'glob': 10000 characters is over the {GLOB_MAX_CHARS}-character limit"
    )


def test_too_many_wildcards_are_refused(grep: Callable[..., Any]) -> None:
    with pytest.raises(ToolArgumentError, match=r"argument 'glob': 33 wildcards"):
        grep(pattern="needle", glob="*a" * (GLOB_MAX_WILDCARDS + 1))
    with pytest.raises(ToolArgumentError, match=r"argument 'glob': 40 wildcards"):
        grep(pattern="needle", glob="[ab]?" * 20)


def test_the_costliest_allowed_globs_cost_about_a_plain_one(grep: Callable[..., Any]) -> None:
    """Globs at the caps against a plain '*.txt' on the same tree, in the same run."""

    def took(glob: str) -> float:
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            grep(pattern="needle", glob=glob)
            best = min(best, time.perf_counter() - start)
        return best

    baseline = took("*.txt")
    worst = [
        "[" * GLOB_MAX_CHARS,
        ("*a" * GLOB_MAX_WILDCARDS)[:GLOB_MAX_CHARS],
        "[!" * (GLOB_MAX_CHARS // 2),
        "?" * GLOB_MAX_WILDCARDS + "x" * (GLOB_MAX_CHARS - GLOB_MAX_WILDCARDS),
    ]
    for glob in worst:
        assert took(glob) <= 20 * baseline, glob


def test_glob_selects_names_and_paths(grep: Callable[..., Any]) -> None:
    out = grep(pattern="needle", glob="*.py")
    assert out == "code.py:1: needle"
    out = grep(pattern="needle", glob="f[0-1].txt")
    assert out.splitlines() == ["f0.txt:1: needle", "f1.txt:1: needle"]
    out = grep(pattern="needle", glob="f[!0-9]*")
    assert out == "No matches for 'needle' in ."


_GLOB_ALPHABET = "ab]-![*?/."
_NAME_ALPHABET = "ab]-![/.*?"


@settings(max_examples=400, deadline=None)
@given(
    glob=st.text(alphabet=_GLOB_ALPHABET, max_size=10),
    name=st.text(alphabet=_NAME_ALPHABET, max_size=8),
)
def test_property_globs_match_what_fnmatch_matches(glob: str, name: str) -> None:
    assume(not _may_move_a_bang_forward(glob))
    assert compile_glob(glob).matches(name) == fnmatch.fnmatchcase(name, glob)


def _may_move_a_bang_forward(glob: str) -> bool:
    """Whether a reversed range comes before a ``!`` (a superset of CPython's quirk)."""
    reversed_at = [i for i in range(len(glob) - 2) if glob[i + 1] == "-" and glob[i] > glob[i + 2]]
    return bool(reversed_at) and "!" in glob[reversed_at[0] + 3 :]


def test_a_bang_after_a_reversed_range_stays_a_literal() -> None:
    matcher = compile_glob("[?-/!]")
    assert matcher.matches("!")
    assert not matcher.matches("?")
    assert not matcher.matches("a")
    assert fnmatch.fnmatchcase("a", "[?-/!]")  # CPython reads it as "[!]": any character
