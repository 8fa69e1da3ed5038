"""@tool: JSON Schema from type hints, descriptions from docstrings, definition errors."""

from __future__ import annotations

import datetime
import enum
import json
from typing import Annotated, Any, Literal

import msgspec
import pytest

from deputy_runtime.errors import ToolDefinitionError
from deputy_runtime.tools import Tool, tool
from deputy_runtime.tools._decorator import parse_docstring


class Point(msgspec.Struct):
    """A point."""

    x: int
    y: int = 0


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


def _no_refs(node: Any) -> None:
    """Providers reject $ref/$defs: assert the schema is fully inlined."""
    if isinstance(node, dict):
        assert "$ref" not in node, node
        assert "$defs" not in node, node
        for value in node.values():
            _no_refs(value)
    elif isinstance(node, list):
        for value in node:
            _no_refs(value)


def test_bare_decorator_builds_tool_with_schema_and_description() -> None:
    @tool
    def greet(name: str, times: int = 1) -> str:
        """Greet someone."""
        return name * times

    assert isinstance(greet, Tool)
    assert greet.name == "greet"
    assert greet.description == "Greet someone."
    assert greet.parameters == {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "times": {"type": "integer", "default": 1},
        },
        "required": ["name"],
        "additionalProperties": False,
    }
    assert not greet.read_only
    assert not greet.destructive
    assert not greet.run_in_thread
    assert greet.validator is not None


def test_decorator_with_options_sets_annotations_and_overrides() -> None:
    @tool(
        name="custom-name",
        description="Custom.",
        read_only=True,
        destructive=True,
        idempotent=True,
        open_world=True,
        run_in_thread=True,
    )
    def f() -> None:
        """Ignored docstring."""

    assert (f.name, f.description) == ("custom-name", "Custom.")
    assert f.read_only
    assert f.destructive
    assert f.idempotent
    assert f.open_world
    assert f.run_in_thread
    assert f.parameters == {"type": "object", "properties": {}, "additionalProperties": False}


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (list[str], {"type": "array", "items": {"type": "string"}}),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (Literal["a", "b"], {"enum": ["a", "b"]}),
        (int | None, {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        (datetime.date, {"type": "string", "format": "date"}),
        (Color, {"enum": ["blue", "red"]}),
        (tuple[int, str], {"type": "array", "minItems": 2, "maxItems": 2}),
        (
            Annotated[int, msgspec.Meta(ge=0, le=10, description="n", examples=[3])],
            {"type": "integer", "minimum": 0, "maximum": 10, "description": "n", "examples": [3]},
        ),
    ],
)
def test_schema_for_parameter_types(annotation: Any, expected: dict[str, Any]) -> None:
    def f(value):  # type: ignore[no-untyped-def]
        return value

    f.__annotations__ = {"value": annotation}
    made = tool(f)
    prop = made.parameters["properties"]["value"]
    for key, want in expected.items():
        if key == "enum":
            assert sorted(prop[key]) == sorted(want)
        else:
            assert prop[key] == want, (key, prop)
    assert made.parameters["required"] == ["value"]
    json.dumps(made.parameters)  # JSON-encodable


def test_nested_struct_schema_is_inlined() -> None:
    @tool
    def plot(points: list[Point], origin: Point | None = None) -> int:
        """Plot points."""
        return len(points)

    _no_refs(plot.parameters)
    items = plot.parameters["properties"]["points"]["items"]
    assert items["type"] == "object"
    assert items["required"] == ["x"]
    assert items["properties"]["y"] == {"type": "integer", "default": 0}
    assert plot.parameters["properties"]["origin"]["anyOf"][0]["type"] == "object"


class Node(msgspec.Struct):
    children: list[Node]


def test_recursive_type_is_a_definition_error() -> None:
    def walk(node: Node) -> None:
        pass

    with pytest.raises(ToolDefinitionError, match="recursive"):
        tool(walk)


def test_unannotated_parameter_is_any() -> None:
    def f(x, y: int):  # type: ignore[no-untyped-def]
        return x

    made = tool(f)
    assert made.parameters["properties"]["x"] == {}
    assert made.parameters["required"] == ["x", "y"]


def test_async_function_is_a_tool() -> None:
    @tool
    async def fetch(url: str) -> str:
        """Fetch a URL."""
        return url

    assert fetch.description == "Fetch a URL."
    assert fetch.parameters["required"] == ["url"]


def test_docstring_args_section_documents_parameters() -> None:
    @tool
    def search(query: str, limit: Annotated[int, msgspec.Meta(description="Meta wins.")] = 5):  # type: ignore[no-untyped-def]
        """Search the index for documents.

        Returns ranked hits, best first.

        Args:
            query: What to look for. Long descriptions
                continue on the next line.
            limit (int): Docstring loses to Meta.

        Returns:
            A list of hits.
        """

    assert search.description == (
        "Search the index for documents.\n\nReturns ranked hits, best first."
    )
    props = search.parameters["properties"]
    assert props["query"]["description"] == (
        "What to look for. Long descriptions continue on the next line."
    )
    assert props["limit"]["description"] == "Meta wins."


def test_parse_docstring_sphinx_and_lists() -> None:
    summary, params = parse_docstring(
        "Do things.\n\n- first\n- second\n\n:param a: the a.\n:param int b: the b.\n"
        ":returns: nothing\n"
    )
    assert summary == "Do things.\n\n- first\n- second"
    assert params == {"a": "the a.", "b": "the b."}
    assert parse_docstring("") == ("", {})


def test_no_docstring_gives_empty_description() -> None:
    def bare(x: int) -> int:
        return x

    assert tool(bare).description == ""


def test_closure_local_type_alias_resolves() -> None:
    # With `from __future__ import annotations`, hints are strings; a local alias that
    # the function closes over must still resolve.
    Alias = Annotated[str, msgspec.Meta(examples=["hi"])]

    def echo(text: Alias) -> str:
        return str(Alias) and text

    assert tool(echo).parameters["properties"]["text"]["examples"] == ["hi"]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def f(*args: int) -> None: pass", "args"),
        ("def f(**kw: int) -> None: pass", "kw"),
        ("def f(a: int, /) -> None: pass", "positional-only"),
        ("def f(a: 'Missing') -> None: pass", "type hints"),
        ("def f() -> None:\n    yield 1", "generator"),
        ("async def f() -> None:\n    yield 1", "generator"),
        ("def f(a: object = object()) -> None: pass", "JSON Schema|parameters"),
    ],
)
def test_unsupported_signatures_raise_definition_error(source: str, message: str) -> None:
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    with pytest.raises(ToolDefinitionError, match=message):
        tool(namespace["f"])


def test_invalid_name_and_double_decoration_raise() -> None:
    with pytest.raises(ToolDefinitionError, match="invalid"):
        tool(name="has space")(lambda: None)
    with pytest.raises(ToolDefinitionError, match="invalid"):
        tool(lambda: None)  # '<lambda>' is not a valid tool name

    @tool
    def once() -> None:
        pass

    with pytest.raises(ToolDefinitionError, match="already a Tool"):
        tool(once)  # type: ignore[call-overload]  # a Tool is not a function: the error under test


def test_run_in_thread_rejects_async() -> None:
    async def f() -> None:
        pass

    with pytest.raises(ToolDefinitionError, match="run_in_thread"):
        tool(run_in_thread=True)(f)


def test_tool_spec_round_trips_to_provider_type() -> None:
    @tool
    def ping(host: str) -> str:
        """Ping a host."""
        return host

    spec = ping.spec()
    assert spec.name == "ping"
    assert spec.description == "Ping a host."
    assert spec.parameters is ping.parameters


def test_locally_imported_types_resolve_in_both_forms() -> None:
    # Under `from __future__ import annotations` hints are strings naming locals of this
    # function that the tool function does not close over.
    from typing import Literal as Lit

    @tool
    def bare(m: Lit["x", "y"]) -> None:
        pass

    @tool(read_only=True)
    def configured(m: Lit["x"]) -> None:
        pass

    assert sorted(bare.parameters["properties"]["m"]["enum"]) == ["x", "y"]
    assert configured.parameters["properties"]["m"] == {"enum": ["x"]}
