"""Errors that say what would be right: unknown tags in frontmatter, dates in params."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from deputy_runtime.definitions import (
    agent_definition,
    agent_definition_from_markdown,
    agent_definition_read,
)
from deputy_runtime.errors import DefinitionError, DefinitionFileError
from tests.definitions._definition_helpers import MIN, write

SAFE_TAGS = "!!null, !!bool, !!int, !!float, !!binary, !!timestamp, !!omap, !!pairs, !!set, "
SAFE_TAGS += "!!str, !!seq, !!map"


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("!foo x", "!foo"),
        ("!foo {a: 1}", "!foo"),
        ("!foo [a]", "!foo"),
        ("!!python/name:os.system x", "!!python/name:os.system"),
        ("!<tag:example.com,2024:thing> x", "tag:example.com,2024:thing"),
    ],
)
def test_unknown_tag_in_frontmatter_names_the_allowed_tags(
    tmp_path: Path, value: str, shown: str
) -> None:
    path = write(tmp_path / "a.md", f"---\nname: a\ndescription: d\nmodel: {value}\n---\nb\n")
    with pytest.raises(DefinitionFileError) as info:
        agent_definition_from_markdown(path)
    assert info.value.reason == (
        f"invalid YAML in frontmatter: the tag {shown} is not allowed; frontmatter may only "
        f"use the standard YAML tags ({SAFE_TAGS}), because other tags can make loaders run "
        "code"
    )
    assert (info.value.line, info.value.column) == (4, 8)


def test_yaml_files_keep_their_core_tag_message(tmp_path: Path) -> None:
    path = write(tmp_path / "a.yaml", MIN + "model: !foo x\n")
    with pytest.raises(DefinitionFileError) as info:
        agent_definition_read(path)
    assert info.value.reason == (
        "The tag !foo is not allowed; definition files may only use the core YAML tags "
        "(!!str, !!int, !!float, !!bool, !!null, !!seq, !!map), because other tags can make "
        "loaders run code"
    )
    assert info.value.line == 5


def test_standard_tags_still_load_in_frontmatter(tmp_path: Path) -> None:
    path = write(tmp_path / "a.md", "---\nname: a\ndescription: !!str 12\n---\nb\n")
    assert agent_definition_from_markdown(path).description == "12"


DATE_HINT = "YAML reads an unquoted 2024-01-01 as a date, so quote it to keep it as text: "


def test_date_in_yaml_params_says_to_quote_it(tmp_path: Path) -> None:
    path = write(tmp_path / "a.yaml", MIN + "params:\n  d: 2024-01-01\n")
    with pytest.raises(DefinitionFileError) as info:
        agent_definition_read(path)
    assert info.value.reason == (
        "params: params['d'] is date; expected a JSON value (null, bool, number, string, list "
        f"or mapping); {DATE_HINT}'2024-01-01'"
    )
    assert info.value.line == 6
    quoted = write(tmp_path / "b.yaml", MIN + "params:\n  d: '2024-01-01'\n")
    assert agent_definition_read(quoted).params == {"d": "2024-01-01"}


def test_date_and_time_in_markdown_model_args_says_to_quote_it(tmp_path: Path) -> None:
    text = "---\nname: a\ndescription: d\nmodel_args:\n  at: [2024-01-01 10:30:00]\n---\nb\n"
    with pytest.raises(DefinitionFileError) as info:
        agent_definition_from_markdown(write(tmp_path / "a.md", text))
    assert info.value.reason.startswith("model_args (params): params['at'][0] is datetime; ")
    assert info.value.reason.endswith(
        "YAML reads an unquoted 2024-01-01 10:30:00 as a date, so quote it to keep it as "
        "text: '2024-01-01 10:30:00'"
    )
    assert info.value.line == 4


def test_python_callers_get_the_same_hint() -> None:
    with pytest.raises(DefinitionError, match=r"is date; .*quote it to keep it as text"):
        agent_definition("a", "d", "p", params={"d": datetime.date(2024, 1, 1)})
    with pytest.raises(DefinitionError) as info:
        agent_definition("a", "d", "p", params={"t": {1}})
    assert "quote" not in str(info.value)
