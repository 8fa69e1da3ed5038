"""The Bash permission rules: matched on every parsed part, so a rule never widens."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deputy_runtime.errors import ToolDefinitionError
from deputy_runtime.tools._bashparse import UnparseableCommand, parse_command
from deputy_runtime.tools._bashrules import BashRules


def test_parts_of_compound_commands_and_substitutions() -> None:
    parts = parse_command("git log && rm -rf / ; echo $(curl x) `id` | (cd a; make)")
    words = [p.words for p in parts]
    assert ("rm", "-rf", "/") in words
    assert ("curl", "x") in words
    assert ("id",) in words
    assert ("make",) in words
    assert ("echo", None, None) in words


@pytest.mark.parametrize(
    "command",
    ["git log; rm -rf ~", "git log $(curl evil)", "git log `sh`", "git log\nrm x",
     "git log | sh", "git log & rm x", "(rm x)", "git log > ~/.bashrc", "FOO=1 git log",
     "git $(echo log)", "if true; then rm x; fi", "git log <<EOF"],
)  # fmt: skip
def test_prefix_rule_never_widens(command: str) -> None:
    rules = BashRules.parse(allow=["Bash(git log:*)"])
    assert rules.refusal(command) is not None


@pytest.mark.parametrize("command", ["git log", "'git' \"log\" -n 3", "git log $REV", "g\\it log"])
def test_prefix_rule_allows_quoting_variants(command: str) -> None:
    assert BashRules.parse(allow=["Bash(git log:*)"]).refusal(command) is None


def test_exact_rule_and_deny_rules() -> None:
    rules = BashRules.parse(allow=["Bash(npm test)"], deny=["Bash(rm:*)"])
    assert rules.refusal("npm test") is None
    assert rules.refusal("npm test --watch") is not None
    deny = BashRules.parse(deny=["rm:*"])
    for command in ("FOO=1 rm x", "ls && rm x", "echo $(rm x)", "$CMD x"):
        assert deny.refusal(command) is not None, command
    assert deny.refusal("ls -l") is None


def test_bad_rules_and_unparseable_commands() -> None:
    with pytest.raises(ToolDefinitionError, match="one plain command"):
        BashRules.parse(allow=["Bash(a && b)"])
    with pytest.raises(UnparseableCommand):
        parse_command("echo 'unterminated")


_QUOTINGS = (lambda w: w, lambda w: f"'{w}'", lambda w: f'"{w}"', lambda w: "\\" + w)
_JOINS = ("; ", " && ", " || ", " | ", " & ", "\n", " $(", " `", " (")
_CLOSE = {" $(": ")", " `": "`", " (": ")"}


@given(
    quoting=st.lists(st.sampled_from(_QUOTINGS), min_size=3, max_size=3),
    join=st.sampled_from(_JOINS),
    env=st.sampled_from(("", "FOO=1 ", "LD_PRELOAD=x ")),
    tail=st.sampled_from(("rm x", "curl evil", "sh -c id", "git push")),
)
def test_no_join_widens_an_allowed_command(
    quoting: list[Callable[[str], str]], join: str, env: str, tail: str
) -> None:
    rules = BashRules.parse(allow=["Bash(git log:*)", "Bash(npm test)"], deny=["rm:*"])
    head = " ".join(q(w) for q, w in zip(quoting, ("git", "log", "-n"), strict=True))
    assert rules.refusal(head) is None
    assert rules.refusal(f"{head}{join}{env}{tail}{_CLOSE.get(join, '')}") is not None
