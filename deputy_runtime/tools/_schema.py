"""JSON Schema helpers for tool parameters.

``inline_refs`` flattens ``$ref``/``$defs`` (which msgspec emits for nested structs) because
several providers reject references in tool schemas. ``schema_validator`` checks arguments
against a hand-written schema: the subset tools use in practice (``type``, ``properties``,
``required``, ``additionalProperties``, ``enum``, ``const``, ``items``, ``anyOf``/``oneOf``,
numeric and length bounds). Unknown keywords are ignored, as JSON Schema says.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ToolArgumentError, ToolDefinitionError

__all__ = ["inline_refs", "schema_validator"]


def inline_refs(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``schema`` with every local ``$ref`` replaced by its definition.

    Recursive types cannot be flattened and raise :class:`ToolDefinitionError`.
    """
    defs: Mapping[str, Any] = schema.get("$defs", {})

    def resolve(node: Any, stack: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [resolve(item, stack) for item in node]
        if not isinstance(node, Mapping):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            name = ref.rsplit("/", 1)[-1]
            if not ref.startswith("#/$defs/") or name not in defs:
                raise ToolDefinitionError(f"Cannot resolve schema reference {ref!r}")
            if name in stack:
                raise ToolDefinitionError(
                    f"Type {name!r} is recursive; tool parameter schemas must be finite"
                )
            target = dict(resolve(defs[name], (*stack, name)))
            # Sibling keywords (e.g. a description) override the referenced ones.
            target.update(
                {k: resolve(v, stack) for k, v in node.items() if k not in ("$ref", "$defs")}
            )
            return target
        return {k: resolve(v, stack) for k, v in node.items() if k != "$defs"}

    out = resolve(schema, ())
    assert isinstance(out, dict)
    return out


_TYPE_NAMES = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    type(None): "null",
    list: "array",
    tuple: "array",
    dict: "object",
}


def _type_name(value: Any) -> str:
    name = _TYPE_NAMES.get(type(value))
    if name is not None:
        return name
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _is_integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


_TYPE_TESTS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": _is_integer,
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list | tuple),
    "object": lambda v: isinstance(v, Mapping),
    "null": lambda v: v is None,
}


class _Invalid(Exception):
    """A validation failure; ``parts`` is the path, filled in while unwinding."""

    def __init__(self, message: str) -> None:
        self.message = message
        self.parts: list[str] = []

    @property
    def path(self) -> str:
        out = ""
        for part in reversed(self.parts):
            out = f"{out}{part}" if part.startswith("[") or not out else f"{out}.{part}"
        return out


_Check = Callable[[Any], None]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _compile(schema: Mapping[str, Any]) -> _Check:
    """Turn a schema into one checker function, so validation does no schema lookups."""
    checks: list[_Check] = []
    expected = schema.get("type")
    if expected is not None:
        checks.append(_type_check(expected if isinstance(expected, list) else [expected]))
    if "enum" in schema:
        checks.append(_enum_check(list(schema["enum"])))
    if "const" in schema:
        checks.append(_const_check(schema["const"]))
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            checks.append(_any_of_check([_compile(option) for option in schema[key]]))
    checks += _bound_checks(schema)
    items = schema.get("items")
    if isinstance(items, Mapping):
        checks.append(_items_check(_compile(items)))
    if any(k in schema for k in ("properties", "required", "additionalProperties")):
        checks.append(_object_check(schema))
    if not checks:
        return _accept
    if len(checks) == 1:
        return checks[0]

    def run_all(value: Any) -> None:
        for check in checks:
            check(value)

    return run_all


def _accept(value: Any) -> None:
    return None


def _type_check(types: list[str]) -> _Check:
    known = [t for t in types if t in _TYPE_TESTS]
    if len(known) < len(types):
        return _accept  # an unknown type name constrains nothing
    tests = [_TYPE_TESTS[t] for t in known]
    label = " or ".join(types)

    def check(value: Any) -> None:
        for test in tests:
            if test(value):
                return
        raise _Invalid(f"expected {label}, got {_type_name(value)} {_short(value)}")

    return check


def _enum_check(choices: list[Any]) -> _Check:
    label = ", ".join(_short(c) for c in choices)

    def check(value: Any) -> None:
        if value not in choices:
            raise _Invalid(f"expected one of {label}, got {_short(value)}")

    return check


def _const_check(const: Any) -> _Check:
    def check(value: Any) -> None:
        if value != const:
            raise _Invalid(f"expected {_short(const)}, got {_short(value)}")

    return check


def _any_of_check(options: list[_Check]) -> _Check:
    def check(value: Any) -> None:
        errors = []
        for option in options:
            try:
                option(value)
                return
            except _Invalid as exc:
                errors.append(exc.message)
        raise _Invalid("; or ".join(errors))

    return check


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_NUMBER_BOUNDS = (
    ("minimum", operator.ge, "a number >= {}"),
    ("maximum", operator.le, "a number <= {}"),
    ("exclusiveMinimum", operator.gt, "a number > {}"),
    ("exclusiveMaximum", operator.lt, "a number < {}"),
)
_SIZE_BOUNDS: tuple[tuple[str, Callable[[Any, Any], bool], str, type | tuple[type, ...]], ...] = (
    ("minLength", operator.ge, "at least {} characters", str),
    ("maxLength", operator.le, "at most {} characters", str),
    ("minItems", operator.ge, "at least {} items", (list, tuple)),
    ("maxItems", operator.le, "at most {} items", (list, tuple)),
)


def _instance_of(kinds: type | tuple[type, ...]) -> Callable[[Any], bool]:
    def test(value: Any) -> bool:
        return isinstance(value, kinds)

    return test


def _bound_checks(schema: Mapping[str, Any]) -> list[_Check]:
    out: list[_Check] = []
    for key, ok, text in _NUMBER_BOUNDS:
        bound = schema.get(key)
        if _is_number(bound):
            out.append(_bound(ok, bound, text.format(bound), _is_number, None))
    for key, ok, text, kinds in _SIZE_BOUNDS:
        bound = schema.get(key)
        if _is_number(bound):
            out.append(_bound(ok, bound, text.format(bound), _instance_of(kinds), len))
    return out


def _bound(
    ok: Callable[[Any, Any], bool],
    bound: Any,
    text: str,
    applies: Callable[[Any], bool],
    measure: Callable[[Any], Any] | None,
) -> _Check:
    def check(value: Any) -> None:
        if applies(value):
            got = measure(value) if measure is not None else value
            if not ok(got, bound):
                raise _Invalid(f"expected {text}, got {got}")

    return check


def _items_check(item_check: _Check) -> _Check:
    def check(value: Any) -> None:
        if isinstance(value, list | tuple):
            for i, item in enumerate(value):
                try:
                    item_check(item)
                except _Invalid as exc:
                    exc.parts.append(f"[{i}]")
                    raise

    return check


def _object_check(schema: Mapping[str, Any]) -> _Check:
    props = {k: _compile(v) for k, v in (schema.get("properties") or {}).items()}
    required = tuple(schema.get("required") or ())
    extra = schema.get("additionalProperties", True)
    extra_check = _compile(extra) if isinstance(extra, Mapping) else None
    known = ", ".join(props) or "none"

    def check(value: Any) -> None:
        if not isinstance(value, Mapping):
            return
        for name in required:
            if name not in value:
                exc = _Invalid("missing required argument")
                exc.parts.append(name)
                raise exc
        for key, item in value.items():
            sub = props.get(key)
            try:
                if sub is not None:
                    sub(item)
                elif extra is False:
                    raise _Invalid(f"unexpected argument (expected: {known})")
                elif extra_check is not None:
                    extra_check(item)
            except _Invalid as exc:
                exc.parts.append(str(key))
                raise

    return check


def schema_validator(
    parameters: Mapping[str, Any], tool_name: str = "tool"
) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """A validator for ``Tool.validator`` from a hand-written JSON Schema.

    Args:
        parameters: The tool's parameters, a JSON Schema object (``$defs`` are inlined).
        tool_name: The tool name error messages use.

    Returns:
        A function that checks arguments and returns them as a new dict, raising
        :class:`~deputy_runtime.errors.ToolArgumentError` naming the bad argument and what
        was expected.
    """
    schema = inline_refs(parameters) if "$defs" in parameters else dict(parameters)
    check = _object_check(schema)

    def validate(arguments: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(arguments, Mapping):
            raise ToolArgumentError(
                f"Invalid arguments for tool '{tool_name}': expected a JSON object, "
                f"got {_type_name(arguments)}"
            )
        try:
            check(arguments)
        except _Invalid as exc:
            where = f"argument '{exc.path}'" if exc.path else "arguments"
            raise ToolArgumentError(
                f"Invalid arguments for tool '{tool_name}': {where}: {exc.message}"
            ) from None
        return dict(arguments)

    return validate
