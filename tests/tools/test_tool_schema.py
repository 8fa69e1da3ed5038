"""The hand-written JSON Schema validator and $ref inlining."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deputy_runtime.errors import ToolArgumentError, ToolDefinitionError
from deputy_runtime.tools._schema import inline_refs, schema_validator

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 5},
        "count": {"type": "integer", "minimum": 0, "exclusiveMaximum": 10},
        "ratio": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        "flag": {"type": "boolean"},
        "mode": {"enum": ["a", "b"]},
        "fixed": {"const": 42},
        "maybe": {"type": ["string", "null"]},
        "either": {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 2}]},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
        "nested": {
            "type": "object",
            "properties": {"inner": {"type": "integer"}},
            "required": ["inner"],
            "additionalProperties": False,
        },
        "free": {"type": "object", "additionalProperties": {"type": "integer"}},
    },
    "required": ["name"],
    "additionalProperties": False,
}
validate = schema_validator(SCHEMA, "demo")


def test_valid_arguments_pass_and_are_copied() -> None:
    args = {
        "name": "abc",
        "count": 9,
        "ratio": 0.5,
        "flag": True,
        "mode": "b",
        "fixed": 42,
        "maybe": None,
        "either": "xy",
        "tags": ["t"],
        "nested": {"inner": 1},
        "free": {"k": 3},
    }
    out = validate(args)
    assert out == args
    assert out is not args


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({}, "argument 'name': missing required argument"),
        ({"name": 1}, "argument 'name': expected string, got integer 1"),
        ({"name": ""}, "argument 'name': expected at least 1 characters"),
        ({"name": "toolong"}, "argument 'name': expected at most 5 characters"),
        ({"name": "a", "count": True}, "argument 'count': expected integer, got boolean"),
        ({"name": "a", "count": 1.5}, "argument 'count': expected integer, got number"),
        ({"name": "a", "count": -1}, "argument 'count': expected a number >= 0"),
        ({"name": "a", "count": 10}, "argument 'count': expected a number < 10"),
        ({"name": "a", "ratio": 0}, "argument 'ratio': expected a number > 0"),
        ({"name": "a", "ratio": 2}, "argument 'ratio': expected a number <= 1"),
        ({"name": "a", "flag": "yes"}, "argument 'flag': expected boolean, got string"),
        ({"name": "a", "mode": "c"}, "argument 'mode': expected one of 'a', 'b', got 'c'"),
        ({"name": "a", "fixed": 41}, "argument 'fixed': expected 42, got 41"),
        ({"name": "a", "maybe": 3}, "argument 'maybe': expected string or null"),
        ({"name": "a", "either": "xyz"}, "argument 'either': expected integer"),
        ({"name": "a", "tags": []}, "argument 'tags': expected at least 1 items"),
        ({"name": "a", "tags": ["a", "b", "c"]}, "argument 'tags': expected at most 2 items"),
        ({"name": "a", "tags": ["a", 5]}, "argument 'tags[1]': expected string"),
        ({"name": "a", "nested": {}}, "argument 'nested.inner': missing required argument"),
        ({"name": "a", "nested": {"inner": 1, "x": 1}}, "argument 'nested.x': unexpected"),
        ({"name": "a", "free": {"k": "v"}}, "argument 'free.k': expected integer"),
        ({"name": "a", "zzz": 1}, "argument 'zzz': unexpected argument (expected: name,"),
    ],
)
def test_invalid_arguments_name_argument_and_expectation(
    arguments: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ToolArgumentError) as info:
        validate(arguments)
    assert str(info.value).startswith("Invalid arguments for tool 'demo': ")
    assert expected in str(info.value), str(info.value)


def test_non_object_arguments_are_rejected() -> None:
    with pytest.raises(ToolArgumentError, match="expected a JSON object, got array"):
        validate([1])  # type: ignore[arg-type]


def test_integral_float_counts_as_integer() -> None:
    # JSON decoders may produce 3.0 for an integer-valued number.
    assert validate({"name": "a", "count": 3.0})["count"] == 3.0


def test_unknown_keywords_and_types_are_ignored() -> None:
    loose = schema_validator({"type": "object", "properties": {"x": {"type": "weird"}}})
    assert loose({"x": object(), "y": 1})["y"] == 1


class Inner(msgspec.Struct):
    v: int


class Outer(msgspec.Struct):
    inner: Inner
    many: list[Inner]


def test_inline_refs_resolves_nested_definitions() -> None:
    raw = msgspec.json.schema(Outer)
    assert "$defs" in raw
    flat = inline_refs(raw)
    assert "$defs" not in flat
    assert "$ref" not in str(flat)
    assert flat["properties"]["inner"]["properties"]["v"] == {"type": "integer"}
    assert flat["properties"]["many"]["items"]["required"] == ["v"]


def test_inline_refs_rejects_bad_and_recursive_refs() -> None:
    with pytest.raises(ToolDefinitionError, match="resolve"):
        inline_refs({"$ref": "#/$defs/Missing"})
    with pytest.raises(ToolDefinitionError, match="recursive"):
        inline_refs({"$ref": "#/$defs/A", "$defs": {"A": {"items": {"$ref": "#/$defs/A"}}}})


def test_schema_with_defs_is_inlined_by_validator() -> None:
    v = schema_validator(
        {
            "type": "object",
            "properties": {"p": {"$ref": "#/$defs/P"}},
            "$defs": {"P": {"type": "integer"}},
        }
    )
    with pytest.raises(ToolArgumentError, match="argument 'p': expected integer"):
        v({"p": "x"})


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=6), st.integers() | st.text(max_size=6), max_size=4))
def test_random_objects_pass_or_fail_with_named_argument(arguments: dict[str, Any]) -> None:
    """Any input is either accepted as-is or rejected naming one argument."""
    message = ""
    try:
        assert validate(arguments) == arguments
    except ToolArgumentError as exc:
        message = str(exc)
    if message:
        assert "argument '" in message


# -- the two validators agree ------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-5, 5) | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=2)
    ),
    max_leaves=6,
)


def _typed_tool() -> Any:
    from typing import Literal

    from deputy_runtime.tools import tool

    @tool
    def typed(
        n: int,
        s: str,
        flag: bool = False,
        x: float = 0.0,
        xs: list[int] | None = None,
        mode: Literal["a", "b"] = "a",
        tags: dict[str, str] | None = None,
    ) -> None:
        pass

    return typed


TYPED = _typed_tool()
FROM_SCHEMA = schema_validator(TYPED.parameters, "typed")


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["n", "s", "flag", "x", "xs", "mode", "tags", "other"]),
        json_values,
        max_size=5,
    )
)
def test_schema_validator_agrees_with_msgspec_validator(arguments: dict[str, Any]) -> None:
    """The generic validator, run on @tool's generated schema, accepts exactly what the
    msgspec converter accepts (integral floats aside, which JSON cannot tell apart)."""
    try:
        TYPED.validator(arguments)
        msgspec_ok = True
    except ToolArgumentError:
        msgspec_ok = False
    try:
        FROM_SCHEMA(arguments)
        schema_ok = True
    except ToolArgumentError:
        schema_ok = False
    integral_float = any(
        isinstance(v, float) and v.is_integer()
        for v in _leaves(arguments.get("n"), arguments.get("xs"))
    )
    if not integral_float:
        assert msgspec_ok == schema_ok, arguments


def _leaves(*values: Any) -> list[Any]:
    out: list[Any] = []
    for value in values:
        if isinstance(value, list):
            out += _leaves(*value)
        else:
            out.append(value)
    return out
