"""Regular expressions from a model, checked before ``grep_files`` runs them.

Python's ``re`` backtracks, cannot be interrupted, and holds the GIL for a whole match,
so one catastrophic pattern can stall the process. This module refuses the common shape
of exponential backtracking (an unbounded repeat inside another) and over-long patterns,
and turns every compile failure into a tool error naming the argument.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from typing import Any

from ..errors import ToolArgumentError

__all__ = ["GREP_MAX_PATTERN_CHARS", "compile_pattern"]

#: Longest ``pattern`` grep_files accepts: enough for any real search, and it keeps
#: compiling and the nesting check cheap.
GREP_MAX_PATTERN_CHARS = 1000

_REPEAT_OPS = frozenset({"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"})
#: Python's private regex parser (``sre_parse`` before 3.11), looked up by name at use
#: so a missing or changed module only disables the nesting check.
_PARSER_MODULE = "re._parser"


def _nested_unbounded_repeat(pattern: str, flags: int) -> bool:
    """Whether an unbounded repeat (``+``, ``*``, ``{n,}``) lies inside another one.

    ``(a+)+``, ``(a*)*``, ``(.*a)*`` and ``(\\w+\\s?)+$`` can split one run of text
    between the two repeats in exponentially many ways, and Python's backtracking
    engine tries them all before failing. The pattern is walked as parsed by the
    private ``re._parser`` module (the only way to see its structure), so anything
    unexpected there (a renamed module, a changed tuple shape) answers False: the check
    only ever adds refusals, it must never break a search. Possessive and atomic forms
    are judged like plain ones, which refuses a few safe patterns but keeps this simple.
    """
    try:
        parser = importlib.import_module(_PARSER_MODULE)
        unbounded = parser.MAXREPEAT
        repeats = {getattr(parser, name) for name in _REPEAT_OPS if hasattr(parser, name)}
        # Explicit stack, not recursion: a 1000-character pattern can nest ~500 deep.
        stack: list[tuple[Any, bool]] = [(parser.parse(pattern, flags), False)]
        while stack:
            items, inside = stack.pop()
            for op, av in items:
                if op in repeats:
                    _low, high, body = av
                    if high == unbounded and inside:
                        return True
                    stack.append((body, inside or high == unbounded))
                else:
                    stack.extend((sub, inside) for sub in _subpatterns(parser, av))
    except Exception:  # the private parser changed shape: accept rather than break grep
        return False
    return False


def _subpatterns(parser: Any, av: Any) -> Iterator[Any]:
    """The parsed sub-patterns inside one node's argument (groups, branches, lookarounds).

    Found by type rather than per opcode, so new opcodes that wrap a sub-pattern are
    still searched; ``av`` is at most a tuple holding a list (``BRANCH``), so two levels.
    """
    if isinstance(av, parser.SubPattern):
        yield av
    elif isinstance(av, tuple | list):
        for part in av:
            if isinstance(part, parser.SubPattern):
                yield part
            elif isinstance(part, list):
                yield from (p for p in part if isinstance(p, parser.SubPattern))


def compile_pattern(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    """``pattern`` compiled, or a refusal naming the argument and what would be accepted."""
    if len(pattern) > GREP_MAX_PATTERN_CHARS:
        raise ToolArgumentError(
            f"argument 'pattern': {len(pattern)} characters is over the "
            f"{GREP_MAX_PATTERN_CHARS}-character limit; search for a shorter expression"
        )
    flags = re.IGNORECASE if ignore_case else 0
    shown = pattern if len(pattern) <= 80 else pattern[:80] + "..."
    try:
        regex = re.compile(pattern, flags)
    except (re.error, OverflowError) as exc:  # OverflowError: a repeat count over 2**32
        raise ToolArgumentError(
            f"argument 'pattern': invalid regular expression {shown!r}: {exc}"
        ) from None
    except RecursionError:  # re's parser recurses once per nested group
        raise ToolArgumentError(
            f"argument 'pattern': {shown!r} nests groups too deeply; use fewer nested groups"
        ) from None
    if _nested_unbounded_repeat(pattern, flags):
        raise ToolArgumentError(
            f"argument 'pattern': {shown!r} puts an unbounded repeat ('+', '*' or '{{n,}}') "
            "inside another unbounded repeat, which can take exponential time on a line "
            "that almost matches; use one level of unbounded repetition, e.g. 'a+' "
            "instead of '(a+)+', or bound the outer repeat, e.g. '(\\w+ ){0,5}' instead "
            "of '(\\w+ )*'"
        )
    return regex
