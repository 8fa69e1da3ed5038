"""TestProvider: schema-valid arguments, enum fan-out, summaries, usage."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deputy_runtime.chat import (
    DEFAULT_TEST_USAGE,
    AssistantTurn,
    Chat,
    ContentText,
    ModelRequest,
    StreamDelta,
    TestProvider,
    ToolSpec,
    Turn,
    example_arguments,
    stream_request,
)
from deputy_runtime.tools import Tool

pytestmark = pytest.mark.anyio


# -- a small, independent JSON Schema validator for the property test ----------------------


def is_valid(value: Any, schema: Any, root: dict[str, Any]) -> bool:
    if "$ref" in schema:
        name = schema["$ref"].split("/")[-1]
        return is_valid(value, root["$defs"][name], root)
    if "enum" in schema and value not in schema["enum"]:
        return False
    if "anyOf" in schema:
        return any(is_valid(value, option, root) for option in schema["anyOf"])
    kind = schema.get("type")
    if kind == "string":
        return (
            isinstance(value, str)
            and len(value) >= schema.get("minLength", 0)
            and len(value) <= schema.get("maxLength", math.inf)
        )
    if kind in ("integer", "number"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if kind == "integer" and not isinstance(value, int):
            return False
        return bool(
            value >= schema.get("minimum", -math.inf)
            and value <= schema.get("maximum", math.inf)
            and value > schema.get("exclusiveMinimum", -math.inf)
            and value < schema.get("exclusiveMaximum", math.inf)
        )
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if kind == "array":
        return (
            isinstance(value, list)
            and len(value) >= schema.get("minItems", 0)
            and all(is_valid(item, schema.get("items", {}), root) for item in value)
        )
    if kind == "object":
        if not isinstance(value, dict):
            return False
        props = schema.get("properties", {})
        if any(name not in value for name in schema.get("required", [])):
            return False
        if schema.get("additionalProperties") is False and set(value) - set(props):
            return False
        return all(is_valid(v, props[k], root) for k, v in value.items() if k in props)
    return True


# -- random simple schemas ------------------------------------------------------------------

names = st.text("abcdefghij_", min_size=1, max_size=8)
finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


@st.composite
def strings(draw: st.DrawFn) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    low = draw(st.none() | st.integers(0, 12))
    high = draw(st.none() | st.integers(low or 0, 20))
    if low is not None:
        schema["minLength"] = low
    if high is not None:
        schema["maxLength"] = high
    if draw(st.booleans()):  # enum values that satisfy the length bounds
        text = st.text(min_size=low or 0, max_size=high if high is not None else 14)
        schema["enum"] = draw(st.lists(text, min_size=1, max_size=10, unique=True))
    return schema


@st.composite
def numbers(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["integer", "number"]))
    schema: dict[str, Any] = {"type": kind}
    ints = st.integers(-1000, 1000)
    low = draw(st.none() | (ints if kind == "integer" else finite))
    high = draw(st.none() | (ints if kind == "integer" else finite))
    if low is not None and high is not None and low > high:
        low, high = high, low
    exclusive = draw(st.booleans())
    if exclusive and low is not None and high is not None and high - low < 2:
        exclusive = False  # keep the interval non-empty for integers
    if low is not None:
        schema["exclusiveMinimum" if exclusive else "minimum"] = low
    if high is not None:
        schema["exclusiveMaximum" if exclusive else "maximum"] = high
    return schema


scalars = st.one_of(
    strings(),
    numbers(),
    st.just({"type": "boolean"}),
    st.just({"type": "null"}),
    st.builds(lambda s: {"anyOf": [s, {"type": "null"}]}, numbers()),
    st.builds(lambda v: {"type": "string", "default": v}, st.text(max_size=4)),
    st.builds(lambda v: {"type": "integer", "examples": [v]}, st.integers()),
)


def arrays(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(
        lambda items, low: {"type": "array", "items": items, "minItems": low},
        children,
        st.integers(0, 3),
    )


def objects(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        props = draw(st.dictionaries(names, children, max_size=5))
        required = [name for name in props if draw(st.booleans())]
        schema: dict[str, Any] = {"type": "object", "properties": props, "required": required}
        if draw(st.booleans()):
            schema["additionalProperties"] = False
        return schema

    return build()


schemas = st.recursive(
    scalars, lambda children: arrays(children) | objects(children), max_leaves=12
)


@settings(max_examples=200, deadline=None)
@given(objects(schemas))
def test_generated_arguments_validate(schema: dict[str, Any]) -> None:
    arguments = example_arguments(schema)
    assert is_valid(arguments, schema, schema), (schema, arguments)
    # Cross-check with the validator tool calls really go through.
    from deputy_runtime.tools._schema import schema_validator

    schema_validator(schema, "t")(arguments)


def test_refs_examples_defaults_and_formats() -> None:
    schema = {
        "type": "object",
        "properties": {
            "point": {"$ref": "#/$defs/Point"},
            "when": {"type": "string", "format": "date"},
            "mode": {"type": "string", "default": "fast"},
            "count": {"type": "integer", "examples": [7]},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "maybe": {"anyOf": [{"type": "null"}, {"type": "boolean"}]},
            "unused": {"type": "string"},
        },
        "required": ["point", "when", "mode", "count", "tags", "maybe"],
        "$defs": {
            "Point": {
                "type": "object",
                "properties": {"x": {"type": "number", "minimum": 2.5}},
                "required": ["x"],
            }
        },
    }
    assert example_arguments(schema) == {
        "point": {"x": 2.5},
        "when": "2024-01-01",
        "mode": "fast",
        "count": 7,
        "tags": ["test"],
        "maybe": True,
    }


def request(tools: tuple[ToolSpec, ...], *turns: Turn) -> ModelRequest:
    return ModelRequest(None, turns, tools)


async def test_calls_every_tool_once_then_summarises() -> None:
    provider = TestProvider()
    seen: list[dict[str, Any]] = []

    def read(path: str) -> str:
        seen.append({"path": path})
        return "contents of " + path + " " + "x" * 500

    def count(n: int) -> int:
        return n + 1

    path_schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    path_schema["required"] = ["path"]
    count_schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    chat = Chat(
        provider,
        tools=[
            Tool("read", "Read.", path_schema, read),
            Tool("count", "Count.", count_schema, count),
        ],
    )
    answer = await chat.chat_async("Do things")
    assert seen == [{"path": "test"}]
    turns = chat.get_turns()
    assert [t.role for t in turns] == ["user", "assistant", "user", "assistant"]
    calls = turns[1].tool_requests
    assert [(c.name, c.arguments) for c in calls] == [
        ("read", {"path": "test"}),
        ("count", {"n": 1}),
    ]
    assert "read" in answer
    assert "count" in answer
    assert "- count: 2" in answer
    assert "contents of test" in answer
    assert "x" * 201 not in answer  # results are cut to a preview
    assert chat.get_tokens() == [DEFAULT_TEST_USAGE, DEFAULT_TEST_USAGE]
    # A second message starts a new round of calls (deterministic ids differ per turn).
    await chat.chat_async("Again")
    again = chat.get_turns()[5].tool_requests
    assert {c.id for c in again}.isdisjoint({c.id for c in calls})


async def test_enum_property_fans_out_one_call_per_value() -> None:
    agents = [f"agent{i}" for i in range(10)]
    delegate = ToolSpec(
        "delegate_to_agent",
        "Delegate.",
        {
            "type": "object",
            "properties": {
                "agent_name": {"type": "string", "enum": agents},
                "task": {"type": "string"},
            },
            "required": ["agent_name", "task"],
        },
    )
    turn = await TestProvider().complete(request((delegate,), Turn("user", (ContentText("x"),))))
    calls = turn.tool_requests
    assert [c.arguments["agent_name"] for c in calls] == agents[:8]
    assert all(c.arguments["task"] == "test" for c in calls)
    assert len({c.id for c in calls}) == 8
    assert turn.finish_reason == "tool_use"


async def test_no_tools_answers_from_the_last_user_text() -> None:
    provider = TestProvider(usage=DEFAULT_TEST_USAGE)
    turn = await provider.complete(request((), Turn("user", (ContentText("  What is 2+2?  "),))))
    assert turn.text == "Test reply to: What is 2+2?"
    assert turn.usage.requests == 1
    assert (await provider.complete(request(()))).text == "Test reply."
    items = [item async for item in stream_request(provider, request(()))]
    last = items[-1]
    assert isinstance(last, AssistantTurn)
    assert items == [
        StreamDelta(text="Test reply."),
        AssistantTurn(last.contents, last.usage, "stop"),
    ]
    assert provider.with_model("other").model == "other"


async def test_chat_spec_resolves_the_test_provider() -> None:
    from deputy_runtime.chat import chat

    c = chat("test")
    assert isinstance(c.provider, TestProvider)
    assert c.provider.model == "test"
    assert await c.chat_async("hello") == "Test reply to: hello"
