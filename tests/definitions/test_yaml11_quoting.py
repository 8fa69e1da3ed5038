"""Both writers quote every string a full YAML 1.1 reader would retype, y/n included.

PyYAML's resolver does not read ``y``/``n`` as booleans, but YAML 1.1 does
(https://yaml.org/type/bool.html), and so does R's yaml package, which the R deputy
package reads these files with. The tests load the written text with a PyYAML loader
given YAML 1.1's full boolean pattern and require it to see exactly what the strict
reader sees.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deputy_runtime.definitions import (
    AgentDefinition,
    agent_definition,
    agent_definition_from_markdown,
    agent_definition_read,
)
from deputy_runtime.definitions._format import definition_to_yaml
from deputy_runtime.definitions._markdown_write import markdown_text
from deputy_runtime.definitions._yaml import YAML11_BOOL
from tests.definitions._definition_helpers import make_tool

BOOL_WORDS = ["y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "true", "True"]
BOOL_WORDS += ["TRUE", "false", "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF"]
_TRUE = {"y", "yes", "true", "on"}


class _Yaml11Loader(yaml.SafeLoader):
    """A safe loader that resolves booleans by YAML 1.1's full pattern, as R's yaml does."""


def _construct_bool(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> bool:
    return str(loader.construct_scalar(node)).lower() in _TRUE


_Yaml11Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:" + "|".join(BOOL_WORDS) + r")$"), list("yYnN")
)
_Yaml11Loader.add_constructor("tag:yaml.org,2002:bool", _construct_bool)


def _both_loads(text: str) -> tuple[Any, Any]:
    return yaml.load(text, Loader=yaml.SafeLoader), yaml.load(text, Loader=_Yaml11Loader)


def _frontmatter(text: str) -> str:
    assert text.startswith("---\n")
    return text[4:].split("\n---\n", 1)[0]


TOOLS = {word: make_tool(f"t_{index}") for index, word in enumerate(BOOL_WORDS)}


def test_the_pattern_is_yaml_11s() -> None:
    # Sanity of the test loader: unquoted y and n are booleans to it, not to PyYAML.
    assert _both_loads("a: y\nb: N\n") == ({"a": "y", "b": "N"}, {"a": True, "b": False})
    assert all(YAML11_BOOL.fullmatch(word) for word in BOOL_WORDS)
    for text in ("yes!", "Y ", "nO", "yES", "ye", "o", "On\n", ""):
        assert not YAML11_BOOL.fullmatch(text), text


@pytest.mark.parametrize("word", BOOL_WORDS)
def test_every_position_is_quoted_in_yaml(tmp_path: Path, word: str) -> None:
    definition = agent_definition(
        word,
        word,
        word,
        tools=[TOOLS[word]],
        model=word,
        disallowed_tools=[word],
        memory=[word],
        mcp_servers=[word],
        initial_prompt=word,
        params={word: word, "list": [word, {word: [word]}]},
    )
    text = definition_to_yaml(definition, tmp_path / "a.yaml", TOOLS, {}).decode()
    strict, yaml11 = _both_loads(text)
    assert strict == yaml11
    assert f"name: '{word.lower()}'\ndescription: '{word}'\nprompt: '{word}'\n" in text
    assert f"  '{word}': '{word}'\n" in text
    (tmp_path / "a.yaml").write_text(text)
    assert agent_definition_read(tmp_path / "a.yaml", TOOLS) == definition


@pytest.mark.parametrize("word", BOOL_WORDS)
def test_every_frontmatter_position_is_quoted_in_markdown(tmp_path: Path, word: str) -> None:
    definition = agent_definition(
        word,
        word,
        f"Body for {word}.",
        tools=[TOOLS[word]],
        model=word,
        disallowed_tools=[word],
        mcp_servers=[word],
        initial_prompt=word,
        params={word: word, "list": [word, {word: [word]}]},
    )
    text = markdown_text(definition, tmp_path / "a.md", TOOLS, {})
    strict, yaml11 = _both_loads(_frontmatter(text))
    assert strict == yaml11
    assert f"name: '{word.lower()}'\ndescription: '{word}'\ntools: ['{word}']\n" in text
    (tmp_path / "a.md").write_text(text)
    assert agent_definition_from_markdown(tmp_path / "a.md", TOOLS) == definition


_words = st.sampled_from(BOOL_WORDS)
_strings = _words | st.text(min_size=1, max_size=12).filter(str.strip)
_leaf = st.none() | st.booleans() | st.integers(-1000, 1000) | _strings
_params = st.dictionaries(
    _strings,
    st.recursive(
        _leaf,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_strings, inner, max_size=3),
        max_leaves=6,
    ),
    max_size=4,
)


@st.composite
def _definitions(draw: st.DrawFn) -> AgentDefinition:
    return agent_definition(
        draw(st.sampled_from(["y", "n", "yes", "off", "agent"])),
        draw(_strings),
        draw(_strings),
        model=draw(_strings),
        memory=draw(st.none() | st.lists(_strings, max_size=3)),
        disallowed_tools=draw(st.none() | st.lists(_strings, max_size=3)),
        initial_prompt=draw(st.none() | _strings),
        params=draw(st.none() | _params),
    )


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(definition=_definitions())
def test_a_full_yaml_11_reader_sees_what_the_strict_reader_sees(
    tmp_path: Path, definition: AgentDefinition
) -> None:
    text = definition_to_yaml(definition, tmp_path / "a.yaml", {}, {}).decode()
    strict, yaml11 = _both_loads(text)
    assert strict == yaml11
