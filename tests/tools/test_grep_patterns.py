"""grep_files refuses patterns that backtrack exponentially, and over-long ones.

Real files in a temp dir, the real tool; the property test drives it through
invoke_tool on both backends. A regex match keeps the GIL, so no timeout can interrupt
one: the property test stays bounded by searching only short lines.
"""

from __future__ import annotations

import re
import sys
import tempfile
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deputy_runtime.errors import ToolArgumentError
from deputy_runtime.tools import Tool, _patterns, invoke_tool, tools_file
from deputy_runtime.tools._patterns import GREP_MAX_PATTERN_CHARS

# The audit's repro: `(a+)+$` takes seconds to fail on this line.
EVIL_LINE = "a" * 26 + "!"

CATASTROPHIC = [
    r"(a+)+",
    r"(a+)+$",
    r"(a*)*",
    r"(.*a)*",
    r"(\w+\s?)+$",
    r"(a+?)+",
    r"(?:x*y*)+z",
    r"(a{2,})+",
    r"((a+)b)*",
    r"(foo|(a+)+)",
    r"x(?=(a+)+)",
    r"((a+){1,3})+",
    r"(?x) ( a + ) + $",
    r"(x)?(?(1)(a+)+|b)",
    r"(?>(a+)+b)",
]

ORDINARY = {
    "TODO": "notes.txt:1: TODO: tidy",
    r"def \w+\(": "code.py:1: def main(argv):",
    "(foo|bar)+": "notes.txt:2: foobarfoo",
    "a{1,3}": "evil.txt:1: " + EVIL_LINE,
    r"(a+){1,5}!": "evil.txt:1: " + EVIL_LINE,
    r"(\w+ ){0,5}tidy": "notes.txt:1: TODO: tidy",
}


def _tree(base: Path) -> Path:
    (base / "notes.txt").write_text("TODO: tidy\nfoobarfoo\n")
    (base / "code.py").write_text("def main(argv):\n    return 0\n")
    (base / "evil.txt").write_text(EVIL_LINE + "\n")
    return base


@pytest.fixture
def grep(tmp_path: Path) -> Callable[..., Any]:
    tools = {t.name: t for t in tools_file(_tree(tmp_path))}
    return tools["grep_files"].function


@pytest.mark.parametrize("pattern", CATASTROPHIC)
@pytest.mark.parametrize("ignore_case", [False, True])
def test_nested_unbounded_repeats_are_refused(
    grep: Callable[..., Any], pattern: str, ignore_case: bool
) -> None:
    with pytest.raises(ToolArgumentError) as info:
        grep(pattern=pattern, ignore_case=ignore_case)
    message = str(info.value)
    assert message.startswith("argument 'pattern':")
    assert "unbounded repeat" in message
    assert "instead of '(a+)+'" in message  # says what would be accepted


def test_audit_repro_is_refused_before_searching(grep: Callable[..., Any]) -> None:
    with pytest.raises(ToolArgumentError, match="exponential time"):
        grep(pattern="(a+)+$", path="evil.txt")


@pytest.mark.parametrize(("pattern", "expected"), ORDINARY.items())
def test_ordinary_patterns_still_search(
    grep: Callable[..., Any], pattern: str, expected: str
) -> None:
    assert expected in grep(pattern=pattern).splitlines()


def test_pattern_length_is_capped(grep: Callable[..., Any]) -> None:
    assert grep(pattern="b" * GREP_MAX_PATTERN_CHARS).startswith("No matches")
    with pytest.raises(ToolArgumentError, match=r"argument 'pattern': 1001 characters"):
        grep(pattern="b" * (GREP_MAX_PATTERN_CHARS + 1))


@pytest.mark.parametrize(
    "pattern",
    [
        "(" * 500 + ")" * 500,  # re's parser recurses per group: RecursionError before
        "a{99999999999}",  # OverflowError before
        "(a",
        "\\",
    ],
    ids=["deep-nesting", "huge-count", "unclosed", "trailing-backslash"],
)
def test_uncompilable_patterns_are_tool_errors(grep: Callable[..., Any], pattern: str) -> None:
    with pytest.raises(ToolArgumentError, match=r"^argument 'pattern': "):
        grep(pattern=pattern)


def _changed_parser(name: str) -> types.ModuleType:
    """A stand-in for re._parser whose parse() returns a shape the check does not know."""
    module = types.ModuleType(name)
    module.MAXREPEAT = 4294967295  # type: ignore[attr-defined]
    module.MAX_REPEAT = "MAX_REPEAT"  # type: ignore[attr-defined]
    module.SubPattern = list  # type: ignore[attr-defined]
    module.parse = lambda pattern, flags: [("MAX_REPEAT", "no longer a tuple")]  # type: ignore[attr-defined]
    return module


@pytest.mark.parametrize("module", ["missing", "changed"])
def test_unexpected_private_parser_falls_back_to_accepting(
    grep: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, module: str
) -> None:
    """The check reads a private module; if that is gone or changes shape, grep keeps
    working (without the check) instead of failing every search."""
    name = "deputy_test_fake_re_parser"
    if module == "changed":
        monkeypatch.setitem(sys.modules, name, _changed_parser(name))
    monkeypatch.setattr(_patterns, "_PARSER_MODULE", name)
    assert "evil.txt:1: " + EVIL_LINE in grep(pattern="(a+)+!").splitlines()


# Pieces of regex syntax a model might combine. Lines of at most 9 characters keep any
# slow pattern the check lets through (e.g. overlapping alternatives such as '(a|.)+$',
# at most ~4**8 steps here) fast.
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
]
_SHORT_LINES = "aaaaaaaa!\nab ab!\nbbbb\n\n"


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces=st.lists(st.sampled_from(_PIECES), min_size=1, max_size=8))
def test_property_grep_matches_or_refuses_clearly(backend: str, pieces: list[str]) -> None:
    """Any pattern gives the lines re.search finds, or a tool error naming 'pattern';
    nothing else escapes and no call outlives its bound."""
    pattern = "".join(pieces)
    with tempfile.TemporaryDirectory() as base:
        (Path(base) / "s.txt").write_text(_SHORT_LINES)
        grep_tool = {t.name: t for t in tools_file(base)}["grep_files"]
        outcome = anyio.run(_bounded_grep, grep_tool, pattern, backend=backend)
    if isinstance(outcome, ToolArgumentError):
        assert str(outcome).startswith("argument 'pattern': ")
        return
    expected = [
        f"s.txt:{no}: {line}"
        for no, line in enumerate(_SHORT_LINES.splitlines(), 1)
        if re.search(pattern, line)
    ]
    assert outcome == ("\n".join(expected) if expected else f"No matches for {pattern!r} in .")


async def _bounded_grep(grep_tool: Tool, pattern: str) -> str | ToolArgumentError:
    # Bounds the thread hand-off; a runaway match itself cannot be interrupted (it keeps
    # the GIL), which is why the lines searched are short.
    with anyio.fail_after(10):
        try:
            result = await invoke_tool(grep_tool, {"pattern": pattern})
        except ToolArgumentError as exc:
            return exc
    assert isinstance(result, str)
    return result
