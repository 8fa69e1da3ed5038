"""Every text the model reads about its calls and delegations is worded in one module.

Both engines (in-process and Temporal) answer the model with these texts; a second copy
of one is how the two drifted apart before. The test reads every module's string
literals (docstrings and comments aside) and finds each text's wording in its one home.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "deputy_runtime"
TEXTS = "runtime/_texts.py"

#: A distinctive fragment of each text, and the one module that may spell it.
HOMES = {
    "Unknown agent:": TEXTS,
    "Run limit reached for": TEXTS,
    "'task' must not be blank": TEXTS,
    "the call did not run": TEXTS,
    "stopped before this tool call ran": TEXTS,
    "was cancelled while this tool call was running": TEXTS,
    "delegation budget for agent": TEXTS,
    "Invalid arguments:": TEXTS,
    "Permission denied:": TEXTS,
    "Tool calling failed with error": "chat/_toolloop.py",
}


def _literals(path: Path) -> list[str]:
    """The module's string literals, f-string parts included, docstrings left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bare = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in bare
    ]


def _spellers() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {fragment: set() for fragment in HOMES}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        for literal in _literals(path):
            for fragment, modules in found.items():
                if fragment in literal:
                    modules.add(name)
    return found


@pytest.mark.parametrize("fragment", sorted(HOMES))
def test_each_text_the_model_reads_is_worded_in_one_module(fragment: str) -> None:
    assert _spellers()[fragment] == {HOMES[fragment]}


def test_the_texts_read_as_the_model_sees_them() -> None:
    from deputy_runtime.chat import tool_error_text
    from deputy_runtime.runtime import (
        delegation_cap_text,
        run_limit_text,
        unknown_agent_text,
    )

    assert unknown_agent_text("ghost", "alpha, beta") == (
        "Unknown agent: ghost. Available agents: alpha, beta"
    )
    assert run_limit_text("requests") == (
        "Run limit reached for requests: no new delegation can start."
    )
    assert delegation_cap_text("alpha", 2).startswith(
        "The delegation budget for agent 'alpha' is spent: 2 of 2 delegations"
    )
    assert tool_error_text(ValueError()) == "Tool calling failed with error ValueError"
    assert tool_error_text("boom") == "Tool calling failed with error boom"
