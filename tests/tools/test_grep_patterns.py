"""grep_files runs every pattern in linear time (RE2) and refuses what RE2 cannot run.

Real files in a temp dir and the real tool. The timing test compares each hostile
pattern with a plain search of the same file in the same run (a ratio, never an
absolute time); the property test drives the tool through invoke_tool on both backends.
"""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deputy_runtime.errors import ToolArgumentError
from deputy_runtime.tools import Tool, invoke_tool, tools_file
from deputy_runtime.tools._patterns import GREP_MAX_PATTERN_CHARS

# Each of these takes Python's backtracking `re` over 20 s on one such line.
HOSTILE_LINE = "a" * 20_000 + "!"
HOSTILE = [
    r"(a+){1,20}$",
    r"(a|aa)+$",
    r"(a{1,5})+$",
    r".*.*.*.*=",
    r"(a+)(a+)(a+)(a+)$",
    r"(a+)+$",
    r"(\w+\s?)+$",
]
# A hostile line or two makes a plain search too fast to time; 60 of them make the
# baseline read and scan ~1.2 MB, so per-call overhead does not dominate the ratio.
HOSTILE_LINES = 60
# A linear engine runs these within a few times the plain search; a backtracking one
# takes hours on this file. The bound is generous so a loaded machine cannot fail it.
MAX_RATIO = 40

UNSUPPORTED = {
    r"((a)\2?)+$": "backreferences",
    r"(a)\1": "backreferences",
    r"(?P<x>a)(?P=x)": "backreferences",
    r"x(?=y)": "lookahead or lookbehind",
    r"x(?!y)": "lookahead or lookbehind",
    r"(?<=x)y": "lookahead or lookbehind",
    r"(?<!x)y": "lookahead or lookbehind",
    r"(?>(a+)+b)": "atomic groups",
    r"(x)?(?(1)a|b)": "conditional groups",
    r"a++": "possessive repeats",
    r"(?x) a + $": "verbose mode",
    r"end\Z": "'\\Z'",
    r"caf\u00e9": "'\\u', '\\U' or '\\N' escapes",
}

ORDINARY = {
    "TODO": "notes.txt:1: TODO: tidy",
    r"def \w+\(": "code.py:1: def main(argv):",
    "(foo|bar)+": "notes.txt:2: foobarfoo",
    r"^\s+return \d$": "code.py:2:     return 0",
    r"(?i)todo": "notes.txt:1: TODO: tidy",
    r"(\w+ ){0,5}tidy": "notes.txt:1: TODO: tidy",
    r"caf\x{e9}": "notes.txt:3: café",
    r"(?P<word>foo)bar": "notes.txt:2: foobarfoo",
}


def _tree(base: Path) -> Path:
    (base / "notes.txt").write_text("TODO: tidy\nfoobarfoo\ncafé\n")
    (base / "code.py").write_text("def main(argv):\n    return 0\n")
    return base


@pytest.fixture
def grep(tmp_path: Path) -> Callable[..., Any]:
    tools = {t.name: t for t in tools_file(_tree(tmp_path))}
    return tools["grep_files"].function


def _best_of(runs: int, call: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def test_hostile_patterns_take_time_linear_in_the_text(tmp_path: Path) -> None:
    (tmp_path / "hostile.txt").write_text((HOSTILE_LINE + "\n") * HOSTILE_LINES)
    grep = {t.name: t for t in tools_file(tmp_path)}["grep_files"].function
    baseline = _best_of(5, lambda: grep(pattern="needle", path="hostile.txt"))
    for pattern in HOSTILE:
        out: list[str] = []

        def search(p: str = pattern, o: list[str] = out) -> None:
            o.append(grep(pattern=p, path="hostile.txt"))

        took = _best_of(5, search)
        assert out[-1].startswith("No matches"), (pattern, out[-1][:200])
        assert took <= MAX_RATIO * baseline, (pattern, took / baseline)


def test_hostile_backreference_is_refused_before_searching(tmp_path: Path) -> None:
    (tmp_path / "hostile.txt").write_text(HOSTILE_LINE + "\n")
    grep = {t.name: t for t in tools_file(tmp_path)}["grep_files"].function
    with pytest.raises(ToolArgumentError, match="backreferences"):
        grep(pattern=r"((a)\2?)+$", path="hostile.txt")


@pytest.mark.parametrize(("pattern", "feature"), UNSUPPORTED.items())
def test_features_re2_lacks_are_refused_by_name(
    grep: Callable[..., Any], pattern: str, feature: str
) -> None:
    with pytest.raises(ToolArgumentError) as info:
        grep(pattern=pattern)
    message = str(info.value)
    assert message.startswith("argument 'pattern': ")
    assert f"uses {feature}" in message
    assert "RE2" in message


def test_refusals_print_nothing_to_the_host(
    grep: Callable[..., Any], capfd: pytest.CaptureFixture[str]
) -> None:
    """RE2 logs parse errors to stderr by default; a model's typo must not reach it."""
    for pattern in ("(", *UNSUPPORTED):
        with pytest.raises(ToolArgumentError):
            grep(pattern=pattern)
    assert capfd.readouterr() == ("", "")


@pytest.mark.parametrize(("pattern", "expected"), ORDINARY.items())
def test_ordinary_patterns_still_search(
    grep: Callable[..., Any], pattern: str, expected: str
) -> None:
    assert expected in grep(pattern=pattern).splitlines()


def test_ignore_case_and_crlf_lines(grep: Callable[..., Any], tmp_path: Path) -> None:
    (tmp_path / "dos.txt").write_bytes(b"first\r\nLast one\r\n")
    assert grep(pattern="one$", path="dos.txt") == "dos.txt:2: Last one"
    assert grep(pattern="^last", path="dos.txt", ignore_case=True) == "dos.txt:2: Last one"


def test_pattern_length_is_capped(grep: Callable[..., Any]) -> None:
    assert grep(pattern="b" * GREP_MAX_PATTERN_CHARS).startswith("No matches")
    with pytest.raises(ToolArgumentError, match=r"argument 'pattern': 1001 characters"):
        grep(pattern="b" * (GREP_MAX_PATTERN_CHARS + 1))


@pytest.mark.parametrize(
    "pattern",
    ["a{1001}", "(a", "\\", "[z-a]", "a**"],
    ids=["huge-count", "unclosed", "trailing-backslash", "bad-range", "double-repeat"],
)
def test_uncompilable_patterns_are_tool_errors(grep: Callable[..., Any], pattern: str) -> None:
    with pytest.raises(ToolArgumentError, match=r"^argument 'pattern': invalid regular"):
        grep(pattern=pattern)


def test_deeply_nested_groups_are_searched(grep: Callable[..., Any]) -> None:
    # Python's re parser recursed once per group here; RE2 parses it iteratively.
    out = grep(pattern="(" * 500 + ")" * 500)
    assert "notes.txt:1: TODO: tidy" in out.splitlines()  # it is the empty pattern


# Pieces of regex syntax a model might combine; lines are short and ASCII, where RE2 and
# Python's re agree on every pattern both accept.
_PIECES = [
    "a",
    "b",
    "!",
    ".",
    r"\w",
    r"\s",
    "+",
    "*",
    "?",
    "{1,3}",
    "{2,}",
    "(",
    "(?:",
    ")",
    "|",
    "^",
    "$",
    "[ab]",
    "\\",
    r"\1",
    "(?=",
]
_SHORT_LINES = "aaaaaaaa!\nab ab!\nbbbb\n\n"


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces=st.lists(st.sampled_from(_PIECES), min_size=1, max_size=8))
def test_property_grep_matches_or_refuses_clearly(backend: str, pieces: list[str]) -> None:
    """Any pattern gives the lines re.search finds, or a tool error naming 'pattern';
    nothing else escapes. (RE2 accepts a few patterns re refuses, such as '^+'; those
    only have to answer.)"""
    pattern = "".join(pieces)
    with tempfile.TemporaryDirectory() as base:
        (Path(base) / "s.txt").write_text(_SHORT_LINES)
        grep_tool = {t.name: t for t in tools_file(base)}["grep_files"]
        outcome = anyio.run(_grep, grep_tool, pattern, backend=backend)
    if isinstance(outcome, ToolArgumentError):
        assert str(outcome).startswith("argument 'pattern': ")
        return
    try:
        reference = re.compile(pattern)
    except re.error:
        assert isinstance(outcome, str)
        return
    expected = [
        f"s.txt:{no}: {line}"
        for no, line in enumerate(_SHORT_LINES.splitlines(), 1)
        if reference.search(line)
    ]
    assert outcome == ("\n".join(expected) if expected else f"No matches for {pattern!r} in .")


async def _grep(grep_tool: Tool, pattern: str) -> str | ToolArgumentError:
    try:
        result = await invoke_tool(grep_tool, {"pattern": pattern})
    except ToolArgumentError as exc:
        return exc
    assert isinstance(result, str)
    return result
