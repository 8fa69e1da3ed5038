"""Output schemas: what an agent's final answer must be, checked when it is declared.

An output schema is either a JSON Schema mapping in the subset below or a Python type
(a ``msgspec.Struct`` or a dataclass) that msgspec decodes into. Both are checked once,
where they are declared (a definition field, an ``Agent`` argument), so that a schema
the runtime cannot enforce is refused up front instead of at the first answer.

The JSON Schema subset (:data:`JSON_SCHEMA_KEYWORDS`) is what :func:`schema_errors`
enforces; every other keyword is refused, because silently ignoring one (a ``pattern``,
a ``$ref``) would accept answers the author meant to refuse. Annotations
(:data:`ANNOTATION_KEYWORDS`) are allowed and only shown to the model.

A leaf module: the definitions package and the runtime both use it, it imports neither.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, TypeAlias

import msgspec

__all__ = [
    "ANNOTATION_KEYWORDS",
    "DEFAULT_OUTPUT_RETRIES",
    "JSON_SCHEMA_KEYWORDS",
    "JSON_TYPES",
    "MAX_ERRORS",
    "MAX_OUTPUT_RETRIES",
    "MAX_SCHEMA_BYTES",
    "MAX_SCHEMA_DEPTH",
    "OutputSchema",
    "SchemaProblem",
    "json_schema_of",
    "output_retries_value",
    "output_schema_value",
    "schema_errors",
]

#: What an output schema is once checked: a read-only JSON Schema mapping or a type.
OutputSchema: TypeAlias = Mapping[str, Any] | type

#: The JSON types a ``type`` keyword may name.
JSON_TYPES: Final = ("null", "boolean", "integer", "number", "string", "array", "object")
#: The validation keywords the runtime enforces.
JSON_SCHEMA_KEYWORDS: Final = (
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "anyOf",
)
#: Keywords that only describe (shown to the model, never enforced).
ANNOTATION_KEYWORDS: Final = ("$schema", "$comment", "title", "description", "default", "examples")
#: Retries after a final answer that does not match, unless a definition says otherwise.
DEFAULT_OUTPUT_RETRIES: Final = 2
#: The most retries a definition may ask for: every retry is one more model request.
MAX_OUTPUT_RETRIES: Final = 10
#: Nesting of schemas inside schemas (``properties``, ``items``, ``anyOf``), at most.
MAX_SCHEMA_DEPTH: Final = 32
#: The schema's JSON text, at most: it is sent to the model with every request.
MAX_SCHEMA_BYTES: Final = 64 * 1024
#: Mismatches reported per answer: enough to fix it, short enough to send back.
MAX_ERRORS: Final = 10

_KNOWN = frozenset(JSON_SCHEMA_KEYWORDS) | frozenset(ANNOTATION_KEYWORDS)
_COUNTS = ("minItems", "maxItems", "minLength", "maxLength")
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_MAX_VALUE_DEPTH = 64  # nesting of enum/const/default/examples values
_ROOT = "the schema"


class SchemaProblem(ValueError):
    """An output schema that cannot be enforced; ``problem`` says where and why."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


# -- checking a declared schema ------------------------------------------------------------


def output_schema_value(value: object) -> OutputSchema | None:
    """``value`` checked as an output schema: a frozen JSON Schema mapping, a type, or None.

    Raises:
        SchemaProblem: It is neither a supported JSON Schema mapping nor a Struct or
            dataclass type msgspec can describe; the problem names the keyword's place.
    """
    if value is None:
        return None
    if isinstance(value, type):
        return _python_type(value)
    if not isinstance(value, Mapping):
        raise SchemaProblem(
            "expected a JSON Schema mapping (e.g. {'type': 'object', 'properties': ...}) or a "
            f"msgspec.Struct or dataclass type, got {_type_name(value)}"
        )
    frozen = _schema(value, _ROOT, 0)
    assert isinstance(frozen, Mapping)  # the root may not be a boolean schema
    size = len(msgspec.json.encode(_plain(frozen)))
    if size > MAX_SCHEMA_BYTES:
        raise SchemaProblem(
            f"the schema is {size:,} bytes of JSON; at most {MAX_SCHEMA_BYTES:,} are allowed, "
            "since it is sent to the model with every request"
        )
    return frozen


def output_retries_value(value: object, schema: object) -> int | None:
    """``value`` checked as a retry count (``None``: the default) for ``schema``.

    Raises:
        SchemaProblem: It is not an int from 0 to :data:`MAX_OUTPUT_RETRIES`, or it is set
            without an output schema (it would mean nothing).
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise SchemaProblem(
            f"expected an int from 0 to {MAX_OUTPUT_RETRIES} or None, got {_type_name(value)}"
        )
    if not 0 <= value <= MAX_OUTPUT_RETRIES:
        raise SchemaProblem(f"expected an int from 0 to {MAX_OUTPUT_RETRIES}, got {value}")
    if schema is None:
        raise SchemaProblem("is set but there is no output_schema; set both or neither")
    return int(value)


def json_schema_of(schema: OutputSchema) -> dict[str, Any]:
    """The JSON Schema a model is shown for ``schema`` (a type's is msgspec's)."""
    if isinstance(schema, type):
        return dict(msgspec.json.schema(schema))
    plain = _plain(schema)
    assert isinstance(plain, dict)
    return plain


@functools.lru_cache(maxsize=256)
def _python_type(value: type) -> type:
    # Cached: every delegation of a definition builds its subagent with the same type.
    if not (issubclass(value, msgspec.Struct) or dataclasses.is_dataclass(value)):
        raise SchemaProblem(
            f"the type {value.__qualname__} is not a msgspec.Struct or a dataclass; use one "
            "of those, or a JSON Schema mapping"
        )
    try:
        msgspec.json.schema(value)
    except (TypeError, ValueError) as exc:
        raise SchemaProblem(
            f"msgspec cannot describe the type {value.__qualname__} as JSON ({exc})"
        ) from None
    return value


def _schema(value: object, where: str, depth: int) -> Mapping[str, Any] | bool:
    """One (sub)schema checked and frozen; ``where`` is its place, for messages."""
    if isinstance(value, bool) and depth > 0:
        return value  # true: anything, false: nothing
    if not isinstance(value, Mapping):
        raise SchemaProblem(f"{where} is {_type_name(value)}; expected a JSON Schema mapping")
    if depth >= MAX_SCHEMA_DEPTH:
        raise SchemaProblem(f"{where} is nested more than {MAX_SCHEMA_DEPTH} schemas deep")
    frozen: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise SchemaProblem(f"{where} has the key {key!r}; keywords are strings")
        if key not in _KNOWN:
            raise SchemaProblem(
                f"{where} uses the keyword {key!r}, which output schemas do not support; "
                f"supported: {', '.join(JSON_SCHEMA_KEYWORDS)} (and the annotations "
                f"{', '.join(ANNOTATION_KEYWORDS)})"
            )
        frozen[key] = _keyword(key, item, _child(where, key), depth)
    required = frozen.get("required", ())
    properties = frozen.get("properties")
    if required and frozen.get("additionalProperties") is False:
        unknown = [name for name in required if properties is None or name not in properties]
        if unknown:
            raise SchemaProblem(
                f"{_child(where, 'required')} names {', '.join(map(repr, unknown))}, which "
                "additionalProperties: false forbids (not in properties), so no answer "
                "could match"
            )
    return MappingProxyType(frozen)


def _child(where: str, key: str) -> str:
    """The place of ``key`` inside ``where`` (``properties.name.type``)."""
    return key if where == _ROOT else f"{where}.{key}"


def _keyword(key: str, value: object, where: str, depth: int) -> Any:
    if key == "type":
        return _types(value, where)
    if key == "properties":
        if not isinstance(value, Mapping):
            raise SchemaProblem(f"{where} is {_type_name(value)}; expected a mapping")
        props: dict[str, Any] = {}
        for name, sub in value.items():
            if not isinstance(name, str):
                raise SchemaProblem(f"{where} has the key {name!r}; property names are strings")
            props[name] = _schema(sub, _child(where, name), depth + 1)
        return MappingProxyType(props)
    if key == "required":
        names = _list(value, where)
        if not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
            raise SchemaProblem(f"{where} must be a list of distinct strings")
        return tuple(names)
    if key == "additionalProperties":
        return _schema(value, where, depth + 1)
    if key == "items":
        if isinstance(value, Sequence) and not isinstance(value, str):
            raise SchemaProblem(
                f"{where} is a list (the tuple form); output schemas support one items schema"
            )
        return _schema(value, where, depth + 1)
    if key == "anyOf":
        branches = _list(value, where)
        if not branches:
            raise SchemaProblem(f"{where} is empty; expected at least one schema")
        return tuple(_schema(b, f"{where}[{i}]", depth + 1) for i, b in enumerate(branches))
    if key == "enum":
        options = _list(value, where)
        if not options:
            raise SchemaProblem(f"{where} is empty, so no answer could match")
        return tuple(_json(v, f"{where}[{i}]", 0) for i, v in enumerate(options))
    if key in _COUNTS:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise SchemaProblem(f"{where} must be a non-negative integer, got {value!r}")
        return value
    if key in _BOUNDS:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SchemaProblem(f"{where} must be a number, got {_type_name(value)}")
        if isinstance(value, float) and not math.isfinite(value):
            raise SchemaProblem(f"{where} must be a finite number, got {value!r}")
        return value
    if key in ("title", "description", "$comment", "$schema"):
        if not isinstance(value, str):
            raise SchemaProblem(f"{where} must be a string, got {_type_name(value)}")
        return value
    return _json(value, where, 0)  # const, default, examples: any JSON value


def _types(value: object, where: str) -> str | tuple[str, ...]:
    names = [value] if isinstance(value, str) else _list(value, where)
    if not names or len(set(map(str, names))) != len(names):
        raise SchemaProblem(f"{where} must name one type or a list of distinct types")
    for name in names:
        if name not in JSON_TYPES:
            raise SchemaProblem(f"{where} names {name!r}; expected one of {', '.join(JSON_TYPES)}")
    return value if isinstance(value, str) else tuple(names)


def _list(value: object, where: str) -> list[Any]:
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise SchemaProblem(f"{where} is {_type_name(value)}; expected a list")
    return list(value)


def _json(value: object, where: str, depth: int) -> Any:
    """A JSON value (enum option, const, default), frozen."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise SchemaProblem(f"{where} is {value!r}; expected a finite number")
        return value
    if depth >= _MAX_VALUE_DEPTH:
        raise SchemaProblem(f"{where} is nested too deeply")
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise SchemaProblem(f"{where} has the key {key!r}; JSON keys are strings")
            out[key] = _json(item, _child(where, key), depth + 1)
        return MappingProxyType(out)
    if isinstance(value, list | tuple):
        return tuple(_json(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value))
    raise SchemaProblem(
        f"{where} is {_type_name(value)}; expected a JSON value (null, boolean, number, "
        "string, list or mapping)"
    )


def _plain(value: Any) -> Any:
    """A frozen schema as plain dicts and lists (for JSON and for the model)."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    return value


def _type_name(value: object) -> str:
    return "None" if value is None else type(value).__name__


# -- checking an answer --------------------------------------------------------------------


def schema_errors(schema: Mapping[str, Any] | bool, value: object) -> list[str]:
    """Every way ``value`` (decoded JSON) fails ``schema`` (checked by
    :func:`output_schema_value`), as ``"$.path: problem"`` lines; empty when it matches.

    At most :data:`MAX_ERRORS` lines are returned.
    """
    errors: list[str] = []
    _check(schema, value, "$", errors)
    return errors[:MAX_ERRORS]


def _check(schema: Mapping[str, Any] | bool, value: object, path: str, errors: list[str]) -> None:
    if len(errors) >= MAX_ERRORS:
        return
    if schema is True:
        return
    if schema is False:
        errors.append(f"{path}: no value is allowed here")
        return
    assert isinstance(schema, Mapping)
    types = schema.get("type")
    if types is not None:
        names = (types,) if isinstance(types, str) else types
        if not any(_is_type(value, name) for name in names):
            errors.append(f"{path}: expected {' or '.join(names)}, got {_json_kind(value)}")
            return  # the other keywords would only repeat the mismatch
    if "const" in schema and not _equal(value, schema["const"]):
        errors.append(f"{path}: expected {_shown(schema['const'])}, got {_shown(value)}")
    if "enum" in schema and not any(_equal(value, option) for option in schema["enum"]):
        options = ", ".join(_shown(option) for option in schema["enum"])
        errors.append(f"{path}: expected one of {options}, got {_shown(value)}")
    if "anyOf" in schema:
        branch_errors = []
        for branch in schema["anyOf"]:
            found: list[str] = []
            _check(branch, value, path, found)
            if not found:
                break
            branch_errors.append(found[0])
        else:
            errors.append(f"{path}: matches none of anyOf ({'; '.join(branch_errors)})")
    if isinstance(value, str):
        _check_string(schema, value, path, errors)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        _check_number(schema, value, path, errors)
    elif isinstance(value, list):
        _check_array(schema, value, path, errors)
    elif isinstance(value, dict):
        _check_object(schema, value, path, errors)


def _check_string(schema: Mapping[str, Any], value: str, path: str, errors: list[str]) -> None:
    length = len(value)  # code points, as JSON Schema counts
    if "minLength" in schema and length < schema["minLength"]:
        errors.append(f"{path}: expected at least {schema['minLength']} characters, got {length}")
    if "maxLength" in schema and length > schema["maxLength"]:
        errors.append(f"{path}: expected at most {schema['maxLength']} characters, got {length}")


def _check_number(schema: Mapping[str, Any], value: float, path: str, errors: list[str]) -> None:
    for key, words in _BOUND_WORDS:
        if key in schema and not _within(key, value, schema[key]):
            errors.append(f"{path}: expected {words} {schema[key]!r}, got {value!r}")


_BOUND_WORDS = (
    ("minimum", "at least"),
    ("maximum", "at most"),
    ("exclusiveMinimum", "more than"),
    ("exclusiveMaximum", "less than"),
)


def _within(key: str, value: float, bound: float) -> bool:
    if key == "minimum":
        return value >= bound
    if key == "maximum":
        return value <= bound
    if key == "exclusiveMinimum":
        return value > bound
    return value < bound


def _check_array(schema: Mapping[str, Any], value: list[Any], path: str, errors: list[str]) -> None:
    if "minItems" in schema and len(value) < schema["minItems"]:
        errors.append(f"{path}: expected at least {schema['minItems']} items, got {len(value)}")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        errors.append(f"{path}: expected at most {schema['maxItems']} items, got {len(value)}")
    items = schema.get("items")
    if items is not None:
        for index, item in enumerate(value):
            _check(items, item, f"{path}[{index}]", errors)


def _check_object(
    schema: Mapping[str, Any], value: dict[str, Any], path: str, errors: list[str]
) -> None:
    properties: Mapping[str, Any] = schema.get("properties") or {}
    for name in schema.get("required", ()):
        if name not in value:
            errors.append(f"{path}: missing required property {name!r}")
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        where = _member(path, name)
        if name in properties:
            _check(properties[name], item, where, errors)
        elif extra is False:
            allowed = ", ".join(map(repr, properties)) or "none"
            errors.append(f"{path}: property {name!r} is not allowed (allowed: {allowed})")
        elif extra is not True:
            _check(extra, item, where, errors)


def _is_type(value: object, name: str) -> bool:
    if name == "null":
        return value is None
    if name == "boolean":
        return isinstance(value, bool)
    if name == "string":
        return isinstance(value, str)
    if name == "array":
        return isinstance(value, list)
    if name == "object":
        return isinstance(value, dict)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    # JSON Schema: 1.0 is an integer too (a number with no fractional part).
    return name == "number" or isinstance(value, int) or float(value).is_integer()


def _equal(a: object, b: object) -> bool:
    """JSON equality: ``1 == 1.0``, but ``true`` is not ``1`` and ``[1]`` is ``(1,)``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, list | tuple | Mapping) or isinstance(b, list | tuple | Mapping):
        return False
    return type(a) is type(b) and a == b


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _shown(value: object) -> str:
    text = msgspec.json.encode(_plain(value)).decode()
    return text if len(text) <= 80 else f"{text[:77]}..."


def _member(path: str, name: str) -> str:
    if name.isidentifier():
        return f"{path}.{name}"
    return f"{path}[{msgspec.json.encode(name).decode()}]"
