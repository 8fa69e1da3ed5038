"""The ``glob`` argument of grep_files: checked, then translated to an RE2 pattern.

``fnmatch`` translates a glob in quadratic time (each unclosed ``[`` scans the rest of
the pattern for a ``]``) and matches with Python's backtracking ``re``. This module
translates in one pass, matches with RE2 (linear in the name), and caps the glob's length
and its number of wildcards, so no glob can cost more than a short, simple one.

Semantics are fnmatch's: ``*`` matches any run of characters (``/`` included), ``?`` one
character, ``[abc]``, ``[a-z]`` and ``[!abc]`` one character from (or not from) a set, a
``[`` without a closing ``]`` is literal, and matching is case-sensitive.
"""

from __future__ import annotations

from typing import Any

from ..errors import ToolArgumentError

__all__ = ["GLOB_MAX_CHARS", "GLOB_MAX_WILDCARDS", "GlobMatcher", "compile_glob"]

#: Longest ``glob`` accepted; real file globs are a few dozen characters.
GLOB_MAX_CHARS = 256
#: Most wildcards (``*``, ``?``, ``[...]``) in one glob.
GLOB_MAX_WILDCARDS = 32
_MATCH_NOTHING = r"[^\x00-\x{10FFFF}]"


class GlobMatcher:
    """A compiled glob; :meth:`matches` tests one name or relative path."""

    __slots__ = ("_regex",)

    def __init__(self, regex: Any) -> None:
        self._regex = regex

    def matches(self, name: str) -> bool:
        data = name.encode("utf-8", "surrogateescape")
        return self._regex.fullmatch(data) is not None


def compile_glob(glob: str) -> GlobMatcher:
    """``glob`` compiled, or a refusal naming the argument and the limit it broke."""
    if len(glob) > GLOB_MAX_CHARS:
        raise ToolArgumentError(
            f"argument 'glob': {len(glob)} characters is over the {GLOB_MAX_CHARS}-character "
            "limit; use a short pattern such as '*.py' or 'src/*.ts'"
        )
    pattern, wildcards = _translate(glob)
    if wildcards > GLOB_MAX_WILDCARDS:
        raise ToolArgumentError(
            f"argument 'glob': {wildcards} wildcards ('*', '?', '[...]') is over the limit "
            f"of {GLOB_MAX_WILDCARDS}; use a simpler pattern such as '*.py'"
        )
    import re2  # loading RE2 takes ~40 ms: paid on the first search, not on import

    options = re2.Options()
    options.log_errors = False
    options.never_capture = True
    options.dot_nl = True
    try:
        return GlobMatcher(re2.compile(pattern, options))
    except re2.error as exc:  # not expected: the translation escapes every literal
        raise ToolArgumentError(f"argument 'glob': {glob!r} cannot be used: {exc}") from None


def _translate(glob: str) -> tuple[str, int]:
    """The RE2 pattern for ``glob`` and its wildcard count, in one pass over ``glob``."""
    # closing[i]: index of the first ']' at or after i (len(glob) if none); a class
    # body starts one past '[' (two past '[!'), and a ']' right there is literal.
    closing = [len(glob)] * (len(glob) + 2)
    for i in range(len(glob) - 1, -1, -1):
        closing[i] = i if glob[i] == "]" else closing[i + 1]
    out: list[str] = []
    wildcards = i = 0
    while i < len(glob):
        char = glob[i]
        i += 1
        if char == "*":
            wildcards += 1
            if not out or out[-1] != ".*":  # '**' matches what '*' matches
                out.append(".*")
        elif char == "?":
            wildcards += 1
            out.append(".")
        elif char == "[":
            start = i + 1 if i < len(glob) and glob[i] == "!" else i
            end = closing[start + 1] if start < len(glob) else len(glob)
            if end >= len(glob):
                out.append(_literal("["))
                continue
            wildcards += 1
            out.append(_char_class(glob[start:end], negated=start > i))
            i = end + 1
        else:
            out.append(_literal(char))
    return "".join(out), wildcards


def _char_class(body: str, *, negated: bool) -> str:
    """An RE2 class for a glob set; reversed ranges match nothing, as in fnmatch."""
    parts: list[str] = []
    j = 0
    while j < len(body):
        if j + 2 < len(body) and body[j + 1] == "-":
            low, high = body[j], body[j + 2]
            if low <= high:
                parts.append(f"{_literal(low)}-{_literal(high)}")
            j += 3
        else:
            parts.append(_literal(body[j]))
            j += 1
    if not parts:
        return "." if negated else _MATCH_NOTHING
    return ("[^" if negated else "[") + "".join(parts) + "]"


def _literal(char: str) -> str:
    """``char`` as an RE2 literal: letters and digits as they are, the rest by code point."""
    return char if char.isascii() and char.isalnum() else f"\\x{{{ord(char):x}}}"
