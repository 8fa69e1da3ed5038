"""Fuzzing the markdown reader: arbitrary input only ever gives a definition or a
DefinitionFileError (never a YAML, Unicode, recursion or type error escaping)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deputy_runtime.definitions import AgentDefinition, agent_definition_from_markdown
from deputy_runtime.definitions._frontmatter import LINE_BREAKS
from deputy_runtime.definitions._markdown_read import build_definition, parse_markdown
from deputy_runtime.errors import DefinitionFileError
from tests.definitions._markdown_helpers import skill_registry, tool_registry
from tests.definitions._tag_strategies import core_tagged_scalars

TOOLS = tool_registry()
SKILLS = skill_registry()
PATH = Path("/fuzz/agent.md")


def _outcome(read: Callable[[], AgentDefinition]) -> AgentDefinition | DefinitionFileError:
    try:
        return read()
    except DefinitionFileError as exc:
        return exc


def _read_text(text: str) -> AgentDefinition | DefinitionFileError:
    result = _outcome(lambda: build_definition(parse_markdown(text, PATH), TOOLS, SKILLS))
    if isinstance(result, DefinitionFileError):
        assert result.path == PATH
        assert result.line is None or result.line >= 1
    else:
        assert isinstance(result, AgentDefinition)
    return result


# Pieces that make the generated text look like agent files often enough to get past the
# fences and into YAML, coercion and validation.
_KEYS = [
    "name",
    "description",
    "model",
    "model_args",
    "tools",
    "disallowedTools",
    "skills",
    "mcpServers",
    "permissionMode",
    "maxTurns",
    "initialPrompt",
    "color",
    "<<",
    "? ",
    "- ",
]
_VALUES = [
    "",
    "reviewer",
    "Read, Grep",
    "[Read, bash, Read]",
    "[]",
    "{}",
    "null",
    "~",
    "yes",
    "-1",
    "2147483648",
    "1e400",
    ".inf",
    ".nan",
    "2024-13-45",
    "2024-01-02 10:00:00",
    "0x1F",
    "0o17",
    "1_000",
    "=",
    "!!binary aGVsbG8=",
    "!!binary ###",
    "!!python/name:os.system",
    "!custom x",
    "&a [*a]",
    "*nope",
    "&x {a: 1}",
    "|\n  ---\n  x",
    ">\n  folded\n  text",
    '"\\u2028\\x85"',
    "'single'",
    "{temperature: 0.2, 1: a, true: b, null: c}",
    "[[[[[[[[[[]]]]]]]]]]",
    "\t- tab",
    "default",
    "bypassPermissions",
    "dontAsk",
    "[a, {b: c}]",
]
_piece = st.one_of(
    st.sampled_from(["---", "--- ", " ---", "----", "...", "# c", "", "\t", "\ufeff"]),
    st.builds(lambda k, v: f"{k}: {v}", st.sampled_from(_KEYS), st.sampled_from(_VALUES)),
    st.text(max_size=30),
)
_separator = st.sampled_from([*list(LINE_BREAKS), "\r\n"])


@st.composite
def _agentish(draw: st.DrawFn) -> str:
    pieces = draw(st.lists(_piece, max_size=14))
    seps = draw(st.lists(_separator, min_size=len(pieces), max_size=len(pieces)))
    prefix = draw(st.sampled_from(["---\n", "---\r\n", "", "\ufeff---\n"]))
    return prefix + "".join(p + s for p, s in zip(pieces, seps, strict=True))


# Where a tagged value goes in an agent file, and the file line it starts on.
_TAGGED_PLACES = {
    "description": ("---\nname: a\ndescription: {}\ntools: []\n---\nbody\n", 3),
    "tools": ("---\nname: a\ndescription: d\ntools: [Read, {}]\n---\nbody\n", 4),
    "model_args": ("---\r\nname: a\r\ndescription: d\r\nmodel_args:\r\n  k: {}\r\n---\r\nb", 5),
    "maxTurns": ("---\nname: a\ndescription: d\n\nmaxTurns: {}\n---\nbody\n", 5),
}


@settings(max_examples=400, deadline=None)
@given(tagged=core_tagged_scalars(), place=st.sampled_from(sorted(_TAGGED_PLACES)))
def test_explicit_core_tags_with_any_value(tagged: str, place: str) -> None:
    template, line = _TAGGED_PLACES[place]
    result = _read_text(template.format(tagged))
    if isinstance(result, DefinitionFileError) and "invalid YAML" in result.reason:
        assert result.line is not None, result
        assert "\n" not in result.reason, result.reason
        if "could not be read as" in result.reason:
            assert result.line == line, result


@settings(max_examples=400, deadline=None)
@given(text=st.text())
def test_arbitrary_text(text: str) -> None:
    _read_text(text)


@settings(max_examples=600, deadline=None)
@given(text=_agentish())
def test_agent_like_text(text: str) -> None:
    _read_text(text)


def test_deep_nesting_and_huge_values() -> None:
    head = "---\nname: a\ndescription: d\n"
    for depth in (50, 1000, 5000, 100_000):
        for value in ("[" * depth + "]" * depth, "{a: " * depth + "1" + "}" * depth):
            _read_text(f"{head}model_args: {value}\n---\nbody")
            _read_text(f"{head}initialPrompt: {value}\n---\nbody")
        block = "".join(f"{'  ' * i}- \n" for i in range(min(depth, 500)))
        _read_text(f"{head}tools:\n{block}---\nbody")
    for key in ("name", "description", "model", "maxTurns", "permissionMode", "skills"):
        for depth in (200, 900, 999):
            _read_text(f"---\n{key}: {'[' * depth}{']' * depth}\ndescription: d\n---\nb")
    _read_text(f"{head}tools: [{', '.join(['Read'] * 100_000)}]\n---\nbody")
    _read_text(f"{head}tools: {', '.join(f'T{i}' for i in range(100_000))}\n---\nbody")
    _read_text(f"{head}model: {'9' * 100_000}\n---\nbody")


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=200) | _agentish().map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_arbitrary_bytes_through_the_file_reader(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "agent.md"
    path.write_bytes(data)
    result = _outcome(lambda: agent_definition_from_markdown(path, TOOLS, SKILLS))
    if isinstance(result, DefinitionFileError):
        assert result.path == path
    else:
        assert isinstance(result, AgentDefinition)
