"""The output-schema subset: what is refused where it is declared, and what the validator
accepts, checked against the reference ``jsonschema`` package (a test dependency only: the
core does not depend on it) by property tests."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any

import jsonschema
import msgspec
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from deputy_runtime._outputschema import (
    ANNOTATION_KEYWORDS,
    JSON_SCHEMA_KEYWORDS,
    JSON_TYPES,
    MAX_ERRORS,
    MAX_SCHEMA_BYTES,
    MAX_SCHEMA_DEPTH,
    SchemaProblem,
    json_schema_of,
    output_retries_value,
    output_schema_value,
    schema_errors,
)
from deputy_runtime.runtime._output import OutputContract, OutputMismatch

# -- strategies -------------------------------------------------------------------------------

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-50, 50)
    | st.floats(-50, 50, allow_nan=False, width=32)
    | st.text(max_size=4)
)
json_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)
_names = st.sampled_from(["a", "b", "c", "d"])
_numbers = st.integers(-20, 20) | st.floats(-20, 20, allow_nan=False, width=32)
_counts = st.integers(0, 4)
_types = st.sampled_from(JSON_TYPES) | st.lists(
    st.sampled_from(JSON_TYPES), min_size=1, max_size=3, unique=True
)
_leaf_schemas = st.fixed_dictionaries(
    {},
    optional={
        "type": _types,
        "enum": st.lists(json_values, min_size=1, max_size=3),
        "const": json_values,
        "minimum": _numbers,
        "maximum": _numbers,
        "exclusiveMinimum": _numbers,
        "exclusiveMaximum": _numbers,
        "minLength": _counts,
        "maxLength": _counts,
        "minItems": _counts,
        "maxItems": _counts,
        "description": st.text(max_size=5),
    },
)


def _nested(children: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {},
        optional={
            "type": _types,
            "properties": st.dictionaries(_names, children, max_size=3),
            "required": st.lists(_names, max_size=3, unique=True),
            "additionalProperties": st.booleans() | children,
            "items": children,
            "anyOf": st.lists(children, min_size=1, max_size=3),
        },
    )


schemas = st.recursive(_leaf_schemas, _nested, max_leaves=6)


def _checked(schema: dict[str, Any]) -> Any:
    try:
        return output_schema_value(schema)
    except SchemaProblem as exc:
        # The one kind of schema the checker refuses although it is valid JSON Schema:
        # required names that additionalProperties: false forbids (no value could match).
        if "which additionalProperties: false forbids" not in exc.problem:
            raise
        assume(False)


def _instances(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values likely to come near ``schema``: random JSON and its own enum/const values."""
    near = [json_values]
    if "enum" in schema:
        near.append(st.sampled_from(schema["enum"]))
    if "const" in schema:
        near.append(st.just(schema["const"]))
    return st.one_of(near)


# -- property tests -----------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(data=st.data(), schema=schemas)
def test_the_validator_agrees_with_the_reference_implementation(
    data: st.DataObject, schema: dict[str, Any]
) -> None:
    checked = _checked(schema)
    value = data.draw(_instances(schema))
    reference = jsonschema.Draft202012Validator(schema)
    errors = schema_errors(checked, value)
    assert (errors == []) == reference.is_valid(value), (schema, value, errors)
    assert len(errors) <= MAX_ERRORS


@settings(max_examples=200, deadline=None)
@given(schema=schemas)
def test_a_checked_schema_is_shown_to_the_model_as_written(schema: dict[str, Any]) -> None:
    checked = _checked(schema)
    shown = json_schema_of(checked)
    assert shown == json.loads(json.dumps(schema))
    # The frozen copy cannot be changed through the definition that holds it.
    with pytest.raises(TypeError):
        checked["type"] = "string"


@settings(max_examples=200, deadline=None)
@given(data=st.data(), schema=schemas)
def test_decoding_an_answer_is_validating_its_json(
    data: st.DataObject, schema: dict[str, Any]
) -> None:
    checked = _checked(schema)
    value = data.draw(_instances(schema))
    contract = OutputContract(checked, None)
    text = json.dumps(value)
    if schema_errors(checked, value):
        with pytest.raises(OutputMismatch, match="the JSON does not match the schema: "):
            contract.decode(text)
    else:
        decoded = contract.decode(text)
        assert json.dumps(decoded) == text
        assert json.dumps(contract.decode(f"```json\n{text}\n```")) == text


_UNSUPPORTED = (
    "$ref",
    "$defs",
    "definitions",
    "pattern",
    "patternProperties",
    "propertyNames",
    "format",
    "oneOf",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "prefixItems",
    "contains",
    "uniqueItems",
    "multipleOf",
    "dependentRequired",
    "minProperties",
    "unevaluatedProperties",
)


@settings(max_examples=200, deadline=None)
@given(schema=schemas, keyword=st.sampled_from(_UNSUPPORTED), path=st.lists(_names, max_size=3))
def test_every_unsupported_keyword_is_refused_where_it_is(
    schema: dict[str, Any], keyword: str, path: list[str]
) -> None:
    _checked(schema)  # valid before the keyword is added: the keyword is its one problem
    # Put the keyword inside nested properties, so the message must name the place.
    outer: dict[str, Any] = dict(schema)
    inner = outer
    for name in path:
        inner["properties"] = {**inner.get("properties", {}), name: {}}
        inner = inner["properties"][name]
    inner[keyword] = {}
    with pytest.raises(SchemaProblem) as info:
        output_schema_value(outer)
    place = ".".join(f"properties.{n}" for n in path) or "the schema"
    assert info.value.problem.startswith(f"{place} uses the keyword {keyword!r}"), info.value


# -- examples ---------------------------------------------------------------------------------


def _mapping(schema: dict[str, Any]) -> Mapping[str, Any]:
    """``schema`` checked, as the mapping it must be."""
    checked = output_schema_value(schema)
    assert isinstance(checked, Mapping)
    return checked


def test_the_supported_keywords_are_documented_as_refused_or_enforced() -> None:
    assert not set(JSON_SCHEMA_KEYWORDS) & set(ANNOTATION_KEYWORDS)
    assert not set(_UNSUPPORTED) & (set(JSON_SCHEMA_KEYWORDS) | set(ANNOTATION_KEYWORDS))


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ("object", "expected a JSON Schema mapping (e.g. {'type': 'object', 'properties': "),
        ({"type": "int"}, "type names 'int'; expected one of null, boolean, integer"),
        ({"type": ["string", "string"]}, "type must name one type or a list of distinct types"),
        ({"type": []}, "type must name one type or a list of distinct types"),
        ({"required": "a"}, "required is str; expected a list"),
        ({"required": ["a", "a"]}, "required must be a list of distinct strings"),
        ({"properties": []}, "properties is list; expected a mapping"),
        ({"properties": {"a": 1}}, "properties.a is int; expected a JSON Schema mapping"),
        ({"items": [{}]}, "items is a list (the tuple form); output schemas support one"),
        ({"anyOf": []}, "anyOf is empty; expected at least one schema"),
        ({"enum": []}, "enum is empty, so no answer could match"),
        ({"minLength": -1}, "minLength must be a non-negative integer, got -1"),
        ({"maxItems": True}, "maxItems must be a non-negative integer, got True"),
        ({"minimum": "1"}, "minimum must be a number, got str"),
        ({"maximum": math.inf}, "maximum must be a finite number, got inf"),
        ({"const": math.nan}, "const is nan; expected a finite number"),
        ({"enum": [{1: "a"}]}, "enum[0] has the key 1; JSON keys are strings"),
        ({"default": object()}, "default is object; expected a JSON value"),
        ({"title": 3}, "title must be a string, got int"),
        ({1: {}}, "the schema has the key 1; keywords are strings"),
        (
            {"required": ["a", "b"], "properties": {"a": {}}, "additionalProperties": False},
            "required names 'b', which additionalProperties: false forbids",
        ),
    ],
)
def test_bad_schemas_are_refused_naming_the_place(schema: Any, problem: str) -> None:
    with pytest.raises(SchemaProblem) as info:
        output_schema_value(schema)
    assert info.value.problem.startswith(problem), info.value.problem


def test_depth_and_size_are_bounded() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(MAX_SCHEMA_DEPTH):
        deep = {"items": deep}
    with pytest.raises(SchemaProblem, match=f"nested more than {MAX_SCHEMA_DEPTH} schemas"):
        output_schema_value(deep)
    output_schema_value(deep["items"])  # one level less is fine
    big = {"description": "x" * MAX_SCHEMA_BYTES}
    with pytest.raises(SchemaProblem, match=r"bytes of JSON; at most 65,536 are allowed"):
        output_schema_value(big)


class _Opaque:
    pass


class _Unsupported(msgspec.Struct):
    thing: _Opaque


@dataclasses.dataclass
class _Point:
    x: int
    y: int


def test_python_types() -> None:
    assert output_schema_value(_Point) is _Point
    with pytest.raises(
        SchemaProblem, match=r"the type int is not a msgspec\.Struct or a dataclass"
    ):
        output_schema_value(int)
    with pytest.raises(SchemaProblem, match="msgspec cannot describe the type _Unsupported"):
        output_schema_value(_Unsupported)
    contract = OutputContract(_Point, 0)
    assert contract.decode('{"x": 1, "y": 2}') == _Point(1, 2)
    assert json.loads(contract.json_schema)["$defs"]["_Point"]["required"] == ["x", "y"]


def test_retry_counts() -> None:
    assert output_retries_value(None, None) is None
    assert output_retries_value(0, {}) == 0
    for bad, message in (
        (-1, "expected an int from 0 to 10, got -1"),
        (11, "expected an int from 0 to 10, got 11"),
        (True, "expected an int from 0 to 10 or None, got bool"),
        (1.0, "expected an int from 0 to 10 or None, got float"),
    ):
        with pytest.raises(SchemaProblem, match=message):
            output_retries_value(bad, {})
    with pytest.raises(SchemaProblem, match="is set but there is no output_schema"):
        output_retries_value(1, None)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "the answer is empty; expected one JSON value"),
        ("```\n```", "the answer is empty; expected one JSON value"),
        ('Sure! {"a": 1}', "the answer is not valid JSON (JSON is malformed"),
        ('{"a": 1} and more', "the answer is not valid JSON"),
        ('{"a": "1"}', "the JSON does not match the schema: $.a: expected integer, got string"),
        ('{"a": 1, "z": 2}', "$: property 'z' is not allowed (allowed: 'a')"),
        ("{}", "$: missing required property 'a'"),
    ],
)
def test_answers_that_do_not_match(text: str, problem: str) -> None:
    schema = _mapping(
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "required": ["a"],
            "additionalProperties": False,
        }
    )
    with pytest.raises(OutputMismatch) as info:
        OutputContract(schema, None).decode(text)
    assert problem in str(info.value)


@pytest.mark.parametrize(
    "text",
    ['{"a": 1}', ' {"a": 1}\n', '```json\n{"a": 1}\n```', '```\n{"a": 1}\n```', '```{"a": 1}```'],
)
def test_one_code_fence_around_the_answer_is_accepted(text: str) -> None:
    schema = _mapping({"type": "object"})
    assert OutputContract(schema, None).decode(text) == {"a": 1}


def test_paths_name_the_member_that_failed() -> None:
    schema = _mapping(
        {
            "type": "array",
            "items": {"type": "object", "properties": {"a b": {"type": "string"}, "c": {}}},
        }
    )
    assert schema_errors(schema, [{"a b": "x"}, {"a b": 2}]) == [
        '$[1]["a b"]: expected string, got integer'
    ]
    many = schema_errors(schema, [{"a b": i} for i in range(50)])
    assert len(many) == MAX_ERRORS


def test_json_equality_in_enum_and_const() -> None:
    schema = _mapping({"enum": [1, [True], {"k": 2.0}]})
    assert schema_errors(schema, 1.0) == []
    assert schema_errors(schema, [True]) == []
    assert schema_errors(schema, {"k": 2}) == []
    assert schema_errors(schema, True) != []  # true is not 1
    assert schema_errors(schema, [1]) != []  # nor [1] [true]
    assert schema_errors(_mapping({"const": None}), 0) == ["$: expected null, got 0"]
