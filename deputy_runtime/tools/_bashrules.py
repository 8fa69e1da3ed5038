"""Claude Code's permission rules for the Bash tool, matched on parsed commands.

A rule is written as Claude Code writes it: ``Bash(npm test)`` allows exactly
``npm test``; ``Bash(git log:*)`` (or ``Bash(git log *)``) allows ``git log`` followed by
any arguments; ``Bash`` or ``Bash(*)`` allows every command. The ``Bash(...)`` wrapper
may be left out (``git log:*``).

A command line is allowed only if every simple command it runs (see ``_bashparse``:
each side of ``&&``/``||``/``;``/``|``/``&``, every line, every ``$(...)``, backtick
and subshell) is allowed on its own, so ``git log:*`` never allows
``git log; rm -rf ~`` or ``git log $(curl evil)``. Matching compares words after quote
removal, so ``'git' log`` is ``git log`` but ``"git log"`` is one word. For the allow
list:

- a word only known at run time (``$VAR``, a substitution, a glob) never equals a rule
  word, so ``git log:*`` allows ``git log $REV`` but ``Bash(npm test)`` does not allow
  ``npm $T``;
- leading ``NAME=value`` assignments are compared as words: ``FOO=1 npm test`` needs a
  rule that names ``FOO=1`` (an environment variable can change what a program does);
- a command that redirects output into a file matches no allow rule.

A deny rule refuses a command line if it *may* match any simple command in it:
assignments are stripped first, and a word only known at run time counts as matching.
A command line the parser does not follow is refused whenever any rule applies; only a
broad allow (``Bash``) with an empty deny list runs it unchecked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import msgspec

from ..errors import ToolArgumentError, ToolDefinitionError
from ._bashparse import SimpleCommand, UnparseableCommand, parse_command

__all__ = ["BashRule", "BashRules", "parse_rule"]

_WRAPPED = re.compile(r"^Bash\((.*)\)$", re.DOTALL)


class BashRule(msgspec.Struct, frozen=True):
    """One parsed rule.

    Attributes:
        text: The rule as written.
        words: The command words the rule names (empty for a rule allowing everything).
        prefix: The rule allows any further arguments (``:*``).
    """

    text: str
    words: tuple[str, ...]
    prefix: bool

    @property
    def broad(self) -> bool:
        """The rule names every command."""
        return not self.words and self.prefix

    def allows(self, part: SimpleCommand) -> bool:
        """Whether this allow rule allows ``part`` (never for a word unknown until run)."""
        if part.writes_file:
            return False
        if self.broad:
            return True
        full = (*part.assignments, *part.words)
        k = len(self.words)
        if self.prefix:
            return len(full) >= k and all(a == b for a, b in zip(full, self.words, strict=False))
        return len(full) == k and all(a == b for a, b in zip(full, self.words, strict=True))

    def may_deny(self, part: SimpleCommand) -> bool:
        """Whether this deny rule may match ``part`` (unknown words count as matching)."""
        if self.broad:
            return True
        return _may_match(self, part.words) or _may_match(self, (*part.assignments, *part.words))


def _may_match(rule: BashRule, words: Sequence[str | None]) -> bool:
    for i, expected in enumerate(rule.words):
        if i >= len(words):
            return False
        word = words[i]
        if word is None:
            return True
        if word != expected:
            return False
    rest = words[len(rule.words) :]
    return rule.prefix or not rest or any(w is None for w in rest)


def parse_rule(text: str, *, field: str = "rule") -> BashRule:
    """Parse one Claude Code Bash rule (``Bash(git log:*)``, ``npm test``, ``Bash``).

    Raises:
        ToolDefinitionError: The rule is empty, not a string, or not one plain command
            (the message names ``field`` and the rule).
    """
    if not isinstance(text, str):
        raise ToolDefinitionError(f"{field}: expected a Bash rule string, got {text!r}")
    body = text.strip()
    if body in ("Bash", "Bash(*)", "*", "Bash()"):
        return BashRule(text, (), True)
    wrapped = _WRAPPED.match(body)
    if wrapped is not None:
        body = wrapped.group(1).strip()
    prefix = False
    if body.endswith(":*") or body.endswith(" *"):
        body, prefix = body[:-2].rstrip(), True
    if not body:
        raise ToolDefinitionError(f"{field} {text!r}: names no command")
    try:
        parts = parse_command(body)
    except UnparseableCommand as exc:
        raise ToolDefinitionError(f"{field} {text!r}: {exc}") from None
    if len(parts) != 1 or parts[0].writes_file:
        raise ToolDefinitionError(
            f"{field} {text!r}: a rule names one plain command (no operators, "
            "substitutions or redirections); write one rule per command"
        )
    words = (*parts[0].assignments, *parts[0].words)
    if any(w is None for w in words):
        raise ToolDefinitionError(
            f"{field} {text!r}: a rule's words must be literal (no $VAR, globs or "
            "substitutions); only a trailing ':*' is a wildcard"
        )
    return BashRule(text, tuple(w for w in words if w is not None), prefix)


class BashRules(msgspec.Struct, frozen=True):
    """The allow and deny rules one Bash tool checks every command against.

    An empty allow list allows every command the deny list does not refuse.
    """

    allow: tuple[BashRule, ...] = ()
    deny: tuple[BashRule, ...] = ()

    @classmethod
    def parse(cls, allow: Iterable[str] = (), deny: Iterable[str] = ()) -> BashRules:
        """Rules from Claude Code rule strings.

        Raises:
            ToolDefinitionError: A rule is invalid, or a list is given as one string.
        """
        for name, values in (("allow", allow), ("deny", deny)):
            if isinstance(values, str):
                raise ToolDefinitionError(
                    f"Bash {name} rules must be a list of rule strings, not one string"
                )
        return cls(
            tuple(parse_rule(r, field=f"Bash allow rule {i}") for i, r in enumerate(allow)),
            tuple(parse_rule(r, field=f"Bash deny rule {i}") for i, r in enumerate(deny)),
        )

    @property
    def unrestricted(self) -> bool:
        """No rule restricts anything: every command runs unchecked."""
        return not self.deny and (not self.allow or any(r.broad for r in self.allow))

    def refusal(self, command: str) -> str | None:
        """Why ``command`` may not run, or ``None`` when it may.

        Args:
            command: The whole command line.

        Returns:
            The reason in words the model can act on, or ``None``.
        """
        if self.unrestricted:
            return None
        try:
            parts = parse_command(command)
        except UnparseableCommand as exc:
            return (
                f"The command cannot be checked against the Bash permission rules: {exc}. "
                "Write it as plain commands joined by &&, ||, ;, | or newlines."
            )
        for part in parts:
            for rule in self.deny:
                if rule.may_deny(part):
                    return f"{_show(part)!r} is refused by the Bash deny rule {rule.text!r}."
        if self.allow and not any(r.broad for r in self.allow):
            for part in parts:
                if not any(rule.allows(part) for rule in self.allow):
                    shown = ", ".join(repr(r.text) for r in self.allow)
                    why = " (it redirects output into a file)" if part.writes_file else ""
                    return (
                        f"{_show(part)!r}{why} is not allowed by the Bash allow rules "
                        f"({shown}); every command in a line must be allowed on its own."
                    )
        return None

    def check(self, command: str) -> None:
        """Raise ToolArgumentError with :meth:`refusal`'s reason if ``command`` may not run.

        Args:
            command: The whole command line.

        Raises:
            ToolArgumentError: The rules refuse it.
        """
        reason = self.refusal(command)
        if reason is not None:
            raise ToolArgumentError(reason)


def _show(part: SimpleCommand) -> str:
    return " ".join("<expansion>" if w is None else w for w in (*part.assignments, *part.words))
