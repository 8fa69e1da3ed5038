"""Splitting a shell command into the simple commands it runs, for the Bash rules.

A permission rule such as ``git log:*`` must never widen into something else, so it is
matched against every simple command a command line runs, not against the line's text.
:func:`parse_command` reads a command line with bash's quoting (single and double
quotes, backslashes, line continuations, comments) and splits it at ``;``, ``&&``,
``||``, ``|``, ``|&``, ``&`` and newlines. The commands inside ``$(...)``, backticks
and ``( ... )`` subshells are parsed too and returned as parts of their own.

Each :class:`SimpleCommand` keeps its leading ``NAME=value`` assignments apart from its
words. A word whose value is only known when the shell runs (a ``$VAR`` or ``${...}``
expansion, a substitution, an unquoted glob, brace or tilde expansion) is ``None``: it
never equals a literal rule word. Redirections are taken out of the words; a command
that redirects output into a file (anything but ``/dev/null`` or another descriptor)
is marked ``writes_file``.

Whatever this module does not follow is refused with :class:`UnparseableCommand`
rather than guessed: control structures (``if``, ``for``, ``while``, ``case``,
functions, ``{ ...; }`` groups, ``[[``, ``!``, ``time``, ``coproc``), here-documents,
process substitution, arithmetic ``$((...))``, ``$'...'`` and ``$"..."`` quoting,
unbalanced quotes or parentheses, and empty commands between operators.
"""

from __future__ import annotations

import re

import msgspec

from ..errors import ToolArgumentError

__all__ = ["RESERVED_WORDS", "SimpleCommand", "UnparseableCommand", "parse_command"]

#: Words that start a compound command or change how the next ones run; a simple
#: command starting with one (unquoted) is not followed.
RESERVED_WORDS = frozenset(
    {
        "if",
        "then",
        "else",
        "elif",
        "fi",
        "for",
        "while",
        "until",
        "do",
        "done",
        "case",
        "esac",
        "select",
        "function",
        "time",
        "coproc",
        "{",
        "}",
        "!",
        "[[",
        "]]",
        "in",
    }
)

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
_FD_DIGITS = re.compile(r"[0-9]+")
# Characters that end an unquoted word.
_BREAK = frozenset(" \t\n;&|<>()")
_SPECIAL_PARAMS = frozenset("@*#?-$!0123456789")
_GLOB = frozenset("*?[")
_MAX_DEPTH = 50
_MAX_CHARS = 100_000


class UnparseableCommand(ToolArgumentError):
    """The command uses shell syntax the rules cannot be checked against."""


class SimpleCommand(msgspec.Struct, frozen=True):
    """One command a command line runs.

    Attributes:
        assignments: The leading ``NAME=value`` words, as written after quote removal
            (``None`` when the value is only known at run time).
        words: The command name and its arguments after quote removal; ``None`` for a
            word whose value is only known at run time.
        writes_file: Output is redirected into a file (not ``/dev/null``, not a
            descriptor).
    """

    assignments: tuple[str | None, ...]
    words: tuple[str | None, ...]
    writes_file: bool = False


class _Word:
    __slots__ = ("dynamic", "plain", "quoted_at", "text")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.dynamic = False
        self.plain = True  # no quoting or escaping anywhere in the word
        self.quoted_at: int | None = None  # text length when quoting first started

    def quote(self) -> None:
        if self.plain:
            self.plain = False
            self.quoted_at = len("".join(self.text))

    def value(self) -> str | None:
        return None if self.dynamic else "".join(self.text)

    def is_assignment(self) -> bool:
        text = "".join(self.text)
        match = _ASSIGNMENT.match(text)
        if match is None:
            return False
        return self.quoted_at is None or match.end() <= self.quoted_at


class _Builder:
    __slots__ = ("assignments", "redirected", "words", "writes_file")

    def __init__(self) -> None:
        self.assignments: list[str | None] = []
        self.words: list[str | None] = []
        self.writes_file = False
        self.redirected = False

    def empty(self) -> bool:
        return not (self.assignments or self.words or self.redirected)

    def add(self, word: _Word) -> None:
        if not self.words and word.is_assignment():
            self.assignments.append(word.value())
            return
        if not self.words and word.plain and word.value() in RESERVED_WORDS:
            raise UnparseableCommand(
                f"'{word.value()}' starts a compound command (if/for/while/case/function/"
                "groups), which the Bash rules do not follow"
            )
        self.words.append(word.value())

    def build(self) -> SimpleCommand:
        return SimpleCommand(tuple(self.assignments), tuple(self.words), self.writes_file)


class _Parser:
    def __init__(self, src: str) -> None:
        self.src = src
        self.n = len(src)
        self.parts: list[SimpleCommand] = []

    # -- sequences -------------------------------------------------------------------

    def sequence(self, i: int, closer: str | None, depth: int) -> int:
        """Parse commands from ``i`` up to ``closer`` (``)`` or a backtick); the index
        after the closer (or the end of input when ``closer`` is None)."""
        if depth > _MAX_DEPTH:
            raise UnparseableCommand("substitutions and subshells are nested too deeply")
        src, n = self.src, self.n
        cur = _Builder()
        pending_op: str | None = None  # an operator that needs a command after it
        while True:
            if i >= n:
                if closer is not None:
                    raise UnparseableCommand(f"missing the closing {closer!r}")
                self._end(cur, pending_op)
                return i
            c = src[i]
            if c in " \t":
                i += 1
            elif c == "\\" and src.startswith("\\\n", i):
                i += 2
            elif closer is not None and c == closer:
                self._end(cur, pending_op)
                return i + 1
            elif c == "#":
                end = src.find("\n", i)
                i = n if end < 0 else end
            elif c == "\n" and pending_op is not None and cur.empty():
                i += 1  # a line may end after '&&', '||' or '|'
            elif c == "\n" or c == ";":
                if src.startswith(";;", i):
                    raise UnparseableCommand("';;' belongs to a case statement")
                self._end(cur, pending_op)
                cur, pending_op = _Builder(), None
                i += 1
            elif c == "&" and src.startswith("&&", i):
                self._end(cur, pending_op, op="&&")
                cur, pending_op = _Builder(), "&&"
                i += 2
            elif c == "&" and src.startswith("&>", i):
                i = self.redirect(i, cur, depth)
            elif c == "&":
                self._end(cur, pending_op, op="&")
                cur, pending_op = _Builder(), None
                i += 1
            elif c == "|":
                op = src[i : i + 2] if src.startswith(("||", "|&"), i) else "|"
                self._end(cur, pending_op, op=op)
                cur, pending_op = _Builder(), op
                i += len(op)
            elif c in "<>":
                i = self.redirect(i, cur, depth)
            elif c == "(":
                if not cur.empty():
                    raise UnparseableCommand(
                        "'(' after a word (a function definition or process substitution)"
                    )
                i = self.sequence(i + 1, ")", depth + 1)
                cur.redirected = True  # the subshell stands in for a command here
            elif c == ")":
                raise UnparseableCommand("unbalanced ')'")
            else:
                word, i = self.word(i, closer, depth)
                if (
                    _FD_DIGITS.fullmatch("".join(word.text))
                    and word.plain
                    and (i < n and src[i] in "<>")
                ):
                    i = self.redirect(i, cur, depth)
                else:
                    cur.add(word)

    def _end(self, cur: _Builder, pending_op: str | None, op: str | None = None) -> None:
        if cur.empty():
            if op is not None:
                raise UnparseableCommand(f"no command before {op!r}")
            if pending_op is not None:
                raise UnparseableCommand(f"no command after {pending_op!r}")
            return
        if cur.words or cur.assignments or cur.writes_file:
            self.parts.append(cur.build())

    # -- redirections ----------------------------------------------------------------

    def redirect(self, i: int, cur: _Builder, depth: int) -> int:
        src = self.src
        if src.startswith("<<<", i):
            op = "<<<"
        elif src.startswith("<<", i):
            raise UnparseableCommand("here-documents ('<<') are not followed")
        elif src.startswith(("<(", ">("), i):
            raise UnparseableCommand("process substitution ('<(' / '>(') is not followed")
        else:
            for op in ("&>>", "&>", ">>", ">|", ">&", "<&", "<>", ">", "<"):
                if src.startswith(op, i):
                    break
        i += len(op)
        while i < self.n and src[i] in " \t":
            i += 1
        if i >= self.n or src[i] in _BREAK:
            raise UnparseableCommand(f"redirection {op!r} without a target")
        target, i = self.word(i, None, depth)
        value = target.value()
        cur.redirected = True
        if (
            op in (">&", "<&")
            and value is not None
            and (_FD_DIGITS.fullmatch(value) or value == "-")
        ):
            return i
        if op in ("<", "<<<"):
            return i
        if value != "/dev/null":
            cur.writes_file = True
        return i

    # -- words -----------------------------------------------------------------------

    def word(self, i: int, closer: str | None, depth: int) -> tuple[_Word, int]:
        src, n = self.src, self.n
        word = _Word()
        started = False
        while i < n:
            c = src[i]
            if c in _BREAK or (closer == "`" and c == "`"):
                break
            if c == "\\":
                if i + 1 >= n:
                    raise UnparseableCommand("a trailing backslash")
                if src[i + 1] == "\n":
                    i += 2
                    continue
                word.quote()
                word.text.append(src[i + 1])
                i += 2
            elif c == "'":
                end = src.find("'", i + 1)
                if end < 0:
                    raise UnparseableCommand("an unterminated single quote")
                word.quote()
                word.text.append(src[i + 1 : end])
                i = end + 1
            elif c == '"':
                word.quote()
                i = self.double_quoted(i + 1, word, depth)
            elif c == "$":
                i = self.dollar(i, word, depth)
            elif c == "`":
                i = self.sequence(i + 1, "`", depth + 1)
                word.dynamic = True
            elif c in _GLOB or c in "{}" or (c == "~" and not started):
                word.dynamic = True
                word.text.append(c)
                i += 1
            else:
                word.text.append(c)
                i += 1
            started = True
        return word, i

    def double_quoted(self, i: int, word: _Word, depth: int) -> int:
        src, n = self.src, self.n
        while i < n:
            c = src[i]
            if c == '"':
                return i + 1
            if c == "\\" and i + 1 < n and src[i + 1] in '$`"\\\n':
                if src[i + 1] != "\n":
                    word.text.append(src[i + 1])
                i += 2
            elif c == "$":
                i = self.dollar(i, word, depth)
            elif c == "`":
                i = self.sequence(i + 1, "`", depth + 1)
                word.dynamic = True
            else:
                word.text.append(c)
                i += 1
        raise UnparseableCommand("an unterminated double quote")

    def dollar(self, i: int, word: _Word, depth: int) -> int:
        src = self.src
        nxt = src[i + 1] if i + 1 < self.n else ""
        if src.startswith("$((", i):
            raise UnparseableCommand("arithmetic expansion '$((...))' is not followed")
        if nxt == "(":
            word.dynamic = True
            return self.sequence(i + 2, ")", depth + 1)
        if nxt == "{":
            end = src.find("}", i + 2)
            inner = src[i + 2 : end] if end >= 0 else ""
            if end < 0 or any(ch in inner for ch in "$`'\"\\{"):
                raise UnparseableCommand("a '${...}' expansion this parser does not follow")
            word.dynamic = True
            return end + 1
        if nxt in ("'", '"'):
            raise UnparseableCommand("$'...' and $\"...\" quoting is not followed")
        if nxt and nxt in _SPECIAL_PARAMS:
            word.dynamic = True
            return i + 2
        match = _NAME.match(src, i + 1)
        if match is not None:
            word.dynamic = True
            return match.end()
        word.text.append("$")  # a lone '$' is literal
        return i + 1


def parse_command(command: str) -> tuple[SimpleCommand, ...]:
    """Every simple command ``command`` runs, substitutions and subshells included.

    Args:
        command: A bash command line.

    Returns:
        The simple commands in the order they appear (a substitution's commands before
        the command that uses them).

    Raises:
        UnparseableCommand: The line uses syntax the rules do not follow (the message
            says which).
    """
    if "\x00" in command:
        raise UnparseableCommand("the command contains a NUL byte")
    if len(command) > _MAX_CHARS:
        raise UnparseableCommand(f"the command is longer than {_MAX_CHARS} characters")
    parser = _Parser(command)
    parser.sequence(0, None, 0)
    return tuple(parser.parts)
