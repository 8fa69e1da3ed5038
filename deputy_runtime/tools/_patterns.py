"""Regular expressions from a model, compiled with RE2 for ``grep_files``.

A backtracking engine such as Python's ``re`` can take exponential or high-polynomial
time on a pattern like ``(a|aa)+$`` or ``.*.*.*=``, and it keeps the GIL for the whole
match, so one such search freezes the process and no cancellation reaches it. RE2 (the
``google-re2`` package) runs in time linear in the text for every pattern it accepts
and releases the GIL while matching, so no pattern needs to be refused for being slow.

RE2 has no backreferences, lookaround, conditionals, atomic groups or possessive
repeats (they are what make backtracking necessary). A pattern using one is refused
with a message naming the feature and what to do instead.
"""

from __future__ import annotations

import re
from typing import Protocol

from ..errors import ToolArgumentError

__all__ = ["GREP_MAX_PATTERN_CHARS", "LineMatcher", "compile_pattern"]

#: Longest ``pattern`` grep_files accepts: enough for any real search, and it keeps
#: RE2's compiled program (and the time to build it) small.
GREP_MAX_PATTERN_CHARS = 1000


class LineMatcher(Protocol):
    """A compiled pattern: ``search`` answers whether one line (UTF-8 bytes) matches."""

    def search(self, text: bytes) -> object: ...


# (what RE2 reports, the feature named to the model, what to do instead). RE2 reports
# only the start of an unknown '(?P' group, so a named backreference is recognised by
# the ``(?P`` report together with ``(?P=`` in the pattern (see _refusal).
_UNSUPPORTED: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (
        re.compile(r"invalid escape sequence: \\[1-9kg]"),
        "backreferences ('\\1', '(?P=name)')",
        "search for the literal text instead",
    ),
    (
        re.compile(r"\(\?<?[=!]"),
        "lookahead or lookbehind ('(?=', '(?!', '(?<=', '(?<!')",
        "match the surrounding text as part of the pattern instead",
    ),
    (re.compile(r"\(\?>"), "atomic groups ('(?>...)')", "use a plain group '(?:...)'"),
    (re.compile(r"\(\?\("), "conditional groups ('(?(1)...)')", "use an alternation 'a|b'"),
    (
        re.compile(r"repetition operator: (?:[*+?]|\{[0-9,]*\})\+"),
        "possessive repeats ('a++', 'a*+')",
        "use a plain repeat ('a+')",
    ),
    (
        re.compile(r"\(\?[a-zA-Z]*x"),
        "verbose mode ('(?x)')",
        "remove the flag and the spaces it would ignore",
    ),
    (re.compile(r"invalid escape sequence: \\Z"), "'\\Z'", "use '$' or '\\z'"),
    (
        re.compile(r"invalid escape sequence: \\[uUN]"),
        "'\\u', '\\U' or '\\N' escapes",
        "write '\\x{e9}' or the character itself",
    ),
)
_BACKREFERENCE = _UNSUPPORTED[0]


def compile_pattern(pattern: str, ignore_case: bool) -> LineMatcher:
    """``pattern`` compiled by RE2, or a refusal naming the argument and what to change."""
    if len(pattern) > GREP_MAX_PATTERN_CHARS:
        raise ToolArgumentError(
            f"argument 'pattern': {len(pattern)} characters is over the "
            f"{GREP_MAX_PATTERN_CHARS}-character limit; search for a shorter expression"
        )
    import re2  # loading RE2 takes ~40 ms: paid on the first search, not on import

    options = re2.Options()
    options.log_errors = False  # a model's typo must not print to the host's stderr
    options.never_capture = True  # only "does this line match" is asked
    options.case_sensitive = not ignore_case
    try:
        regex: LineMatcher = re2.compile(pattern, options)
    except re2.error as exc:
        raise ToolArgumentError(_refusal(pattern, _reason(exc))) from None
    return regex


def _reason(exc: BaseException) -> str:
    arg = exc.args[0] if exc.args else exc
    return arg.decode("utf-8", "replace") if isinstance(arg, bytes) else str(arg)


def _refusal(pattern: str, reason: str) -> str:
    shown = pattern if len(pattern) <= 80 else pattern[:80] + "..."
    for found, feature, instead in _UNSUPPORTED:
        if found.search(reason) or (
            found is _BACKREFERENCE[0] and reason.endswith("(?P") and "(?P=" in pattern
        ):
            return (
                f"argument 'pattern': {shown!r} uses {feature}, which grep_files does not "
                f"support (it uses RE2, which guarantees linear-time search); {instead}"
            )
    return f"argument 'pattern': invalid regular expression {shown!r}: {reason}"
