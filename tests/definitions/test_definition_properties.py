"""Property tests: write/read round trips byte-stably; the reader only ever raises its error."""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deputy_runtime.definitions import (
    AgentDefinition,
    agent_definition_read,
    agent_definition_write,
)
from deputy_runtime.definitions._model import MAX_PARAM_INT, PERMISSION_MODES
from deputy_runtime.errors import DefinitionFileError
from deputy_runtime.skills import Skill
from tests.definitions._definition_helpers import MIN, make_tool
from tests.definitions._tag_strategies import core_tagged_scalars

TOOLS = {name: make_tool(name) for name in ("read_file", "list_files", "grep_files", "bash")}
SKILLS: dict[str, Skill | str] = {
    "style": Skill("style", "House style", "Write plainly."),
    "review.checklist": "skills/checklist",
    "paths-2": "/opt/skills/other",
}
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

text = st.text(min_size=1, max_size=60).filter(str.strip)
multiline = st.lists(st.text(max_size=30), min_size=1, max_size=5).map("\n".join).filter(str.strip)
prose = st.one_of(text, multiline)
json_scalar = st.one_of(
    st.none(),
    st.booleans(),
    # Definition files hold integers of at most 18 digits (MAX_PARAM_INT).
    st.integers(-MAX_PARAM_INT, MAX_PARAM_INT),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
json_value = st.recursive(
    json_scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(text, inner, max_size=3)),
    max_leaves=8,
)
string_list = st.one_of(st.none(), st.lists(text, max_size=4))


@st.composite
def definitions(draw: st.DrawFn) -> AgentDefinition:
    name = draw(st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,15}", fullmatch=True))
    tools = draw(st.permutations(list(TOOLS.values())))[: draw(st.integers(0, len(TOOLS)))]
    skills = draw(st.permutations(list(SKILLS.values())))[: draw(st.integers(0, len(SKILLS)))]
    fields: dict[str, Any] = {
        "name": draw(st.sampled_from(["", " ", "\t"])) + name,
        "description": draw(prose),
        "prompt": draw(prose),
        "tools": tools,
        "model": draw(st.one_of(st.just("inherit"), text)),
        "skills": skills,
        "disallowed_tools": draw(string_list),
        "memory": draw(string_list),
        "mcp_servers": draw(string_list),
        "initial_prompt": draw(st.one_of(st.none(), prose)),
        "max_requests": draw(st.one_of(st.none(), st.integers(0, 2**31 - 1))),
        "permission_mode": draw(st.one_of(st.none(), st.sampled_from(PERMISSION_MODES))),
        "params": draw(st.one_of(st.none(), st.dictionaries(text, json_value, max_size=4))),
    }
    return AgentDefinition(**fields)


@SETTINGS
@given(definition=definitions())
def test_round_trip_is_equal_and_byte_stable(definition: AgentDefinition) -> None:
    with tempfile.TemporaryDirectory() as directory:
        first = Path(directory, "first.yaml")
        agent_definition_write(definition, first, TOOLS, SKILLS)
        restored = agent_definition_read(first, TOOLS, SKILLS)
        assert restored == definition
        for field in AgentDefinition.__struct_fields__:
            assert getattr(restored, field) == getattr(definition, field), field
        for got, expected in zip(restored.tools, definition.tools, strict=True):
            assert got is expected
        for got_skill, expected_skill in zip(restored.skills, definition.skills, strict=True):
            assert got_skill is expected_skill
        second = Path(directory, "second.yaml")
        agent_definition_write(restored, second, TOOLS, SKILLS)
        data = first.read_bytes()
        assert second.read_bytes() == data
        assert b"\r" not in data


def read_bytes_outcome(data: bytes) -> AgentDefinition | DefinitionFileError:
    """Read ``data`` from a real file in a worker thread; a hang fails the join timeout."""
    outcome: list[Any] = []

    def run() -> None:
        with tempfile.TemporaryDirectory() as directory:
            path = Path(directory, "fuzz.yaml")
            path.write_bytes(data)
            try:
                outcome.append(agent_definition_read(path, TOOLS, SKILLS))
            except DefinitionFileError as exc:
                outcome.append(exc)
            except BaseException as exc:  # reported below as the failure it is
                outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=30)  # a hang guard, not a speed check
    assert not thread.is_alive(), "the reader hung"
    result = outcome[0]
    assert isinstance(result, (AgentDefinition, DefinitionFileError)), repr(result)
    if isinstance(result, DefinitionFileError):
        assert result.reason
        assert result.line is None or result.line >= 1
    return result


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=400))
def test_arbitrary_bytes_only_raise_definition_file_error(data: bytes) -> None:
    read_bytes_outcome(data)


YAMLISH = st.sampled_from(
    [
        "version: 1",
        "name: a",
        "description: d",
        "prompt: p",
        "tools: [read_file]",
        "memory: [yes]",
        "&a",
        "*a",
        "!!python/object:os.system",
        "!expr x",
        "<<:",
        "- ",
        "? ",
        ": ",
        "{",
        "}",
        "[",
        "]",
        ",",
        "|",
        ">-",
        "'",
        '"',
        "#",
        "%YAML 1.1",
        "---",
        "...",
        "\t",
        "  ",
        "\n",
        "\r\n",
        "~",
        "null",
        "1e3",
        "0x1F",
        "2024-01-01",
        "\ufeff",
        "\x00",
        "é",
        "params: {a: [1, {b: 2}]}",
        "max_requests: 3",
        "skills: style",
    ]
)


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(YAMLISH, max_size=30))
def test_yaml_ish_text_only_raises_definition_file_error(parts: list[str]) -> None:
    read_bytes_outcome("".join(parts).encode("utf-8"))


@settings(max_examples=300, deadline=None)
@given(soup=st.text(alphabet=st.sampled_from(list("-:{}[]&*!|>'\"#%@`,? \n\tab1.~<")), max_size=80))
def test_yaml_punctuation_soup_only_raises_definition_file_error(soup: str) -> None:
    read_bytes_outcome(soup.encode("utf-8"))


@settings(max_examples=150, deadline=None)
@given(extra=st.text(max_size=80))
def test_valid_prefix_with_arbitrary_text_appended(extra: str) -> None:
    read_bytes_outcome((MIN + extra).encode("utf-8", "surrogatepass"))


def test_billion_laughs_is_rejected() -> None:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for depth in range(1, 10):
        previous, current = chr(ord("a") + depth - 1), chr(ord("a") + depth)
        lines.append(f"{current}: &{current} [{', '.join(['*' + previous] * 9)}]")
    data = ("\n".join(lines) + "\n").encode()
    assert len(data) < 1024 * 1024
    outcome = read_bytes_outcome(data)
    assert isinstance(outcome, DefinitionFileError)
    assert "YAML anchors (&a / *a) are not supported" in outcome.reason
    assert outcome.line == 1


def test_deep_nesting_is_rejected() -> None:
    for opener, closer in (("[", "]"), ("{a: ", "}")):
        data = (MIN + "params: {x: " + opener * 5000 + closer * 5000 + "}\n").encode()
        outcome = read_bytes_outcome(data)
        assert isinstance(outcome, DefinitionFileError)
        assert outcome.line is not None


CORE_TAGS = {"!!str", "!!int", "!!float", "!!bool", "!!null", "!!seq", "!!map", "!!timestamp"}


@settings(max_examples=200, deadline=None)
@given(
    tag=st.one_of(
        st.from_regex(r"!![a-z][a-z/:._-]{0,15}", fullmatch=True),
        st.from_regex(r"![a-z][a-zA-Z0-9_-]{0,15}", fullmatch=True),
    ).filter(lambda tag: tag not in CORE_TAGS),
    field=st.sampled_from(["name", "description", "prompt"]),
)
def test_any_non_core_tag_is_rejected(tag: str, field: str) -> None:
    text = MIN.replace(f"{field}: ", f"{field}: {tag} ")
    outcome = read_bytes_outcome(text.encode())
    assert isinstance(outcome, DefinitionFileError)
    assert f"The tag {tag} is not allowed" in outcome.reason


@settings(max_examples=200, deadline=None)
@given(
    path=st.lists(st.from_regex(r"[a-z]{1,6}", fullmatch=True), min_size=1, max_size=6),
    key=st.from_regex(r"[a-z]{1,6}", fullmatch=True),
)
def test_duplicate_keys_at_any_depth_are_rejected(path: list[str], key: str) -> None:
    nested = f"{{{key}: 1, {key}: 2}}"
    for step in reversed(path):
        nested = f"{{{step}: {nested}}}"
    outcome = read_bytes_outcome(f"{MIN}params: {nested}\n".encode())
    assert isinstance(outcome, DefinitionFileError)
    # YAML 1.1 types plain keys too: `no` is the key False, `on` is True.
    parsed_key = yaml.load(key, Loader=yaml.SafeLoader)
    assert outcome.reason.startswith(f"Duplicate key {parsed_key!r}")
    assert outcome.line == 5


# Where a tagged value goes, and the file line it starts on.
TAGGED_PLACES = {
    "memory": (MIN + "memory: [{}]\n", 5),
    "prompt": (MIN.replace("prompt: Read carefully", "prompt: {}"), 4),
    "description": (MIN.replace("description: Reviews text", "description: {}"), 3),
    "params": (MIN + "params:\n  key: {}\n", 6),
}


@settings(max_examples=400, deadline=None)
@given(tagged=core_tagged_scalars(), place=st.sampled_from(sorted(TAGGED_PLACES)))
def test_explicit_core_tags_with_any_value_give_a_located_one_line_error(
    tagged: str, place: str
) -> None:
    template, line = TAGGED_PLACES[place]
    outcome = read_bytes_outcome(template.format(tagged).encode("utf-8", "surrogatepass"))
    if isinstance(outcome, DefinitionFileError):
        assert outcome.line is not None, outcome
        assert "\n" not in outcome.reason, outcome.reason
        if "could not be read as" in outcome.reason:
            assert outcome.line == line, outcome
