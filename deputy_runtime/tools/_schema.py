"""JSON Schema helpers for tool parameters.

``inline_refs`` flattens ``$ref``/``$defs`` (which msgspec emits for nested structs) because
several providers reject references in tool schemas. ``schema_validator`` checks arguments
against a hand-written schema: the subset tools use in practice (``type``, ``properties``,
``required``, ``additionalProperties``, ``enum``, ``const``, ``items``, ``anyOf``/``oneOf``,
numeric and length bounds). Unknown keywords are ignored, as JSON Schema says.
"""

from __future__ import annotations

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


def _is_type(value: Any, expected: str) -> bool:
    if expected == "string":
        return isinstance(value, str)
    if expected == "integer":
        if isinstance(value, bool):
            return False
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if expected == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if expected == "boolean":
        return isinstance(value, bool)
    if expected == "array":
        return isinstance(value, list | tuple)
    if expected == "object":
        return isinstance(value, Mapping)
    if expected == "null":
        return value is None
    return True  # an unknown type name constrains nothing


class _Invalid(Exception):
    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check(value: Any, schema: Mapping[str, Any], path: str) -> None:
    expected = schema.get("type")
    if expected is not None:
        types = expected if isinstance(expected, list) else [expected]
        if not any(_is_type(value, t) for t in types):
            raise _Invalid(
                path, f"expected {' or '.join(types)}, got {_type_name(value)} {_short(value)}"
            )
    if "enum" in schema and value not in schema["enum"]:
        choices = ", ".join(_short(c) for c in schema["enum"])
        raise _Invalid(path, f"expected one of {choices}, got {_short(value)}")
    if "const" in schema and value != schema["const"]:
        raise _Invalid(path, f"expected {_short(schema['const'])}, got {_short(value)}")
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if options:
            errors = []
            for option in options:
                try:
                    _check(value, option, path)
                    break
                except _Invalid as exc:
                    errors.append(exc.message)
            else:
                raise _Invalid(path, "; or ".join(errors))
    if isinstance(value, int | float) and not isinstance(value, bool):
        _check_number(value, schema, path)
    elif isinstance(value, str):
        _check_length(len(value), schema, path, "minLength", "maxLength", "characters")
    elif isinstance(value, list | tuple):
        _check_length(len(value), schema, path, "minItems", "maxItems", "items")
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                _check(item, items, f"{path}[{i}]")
    elif isinstance(value, Mapping):
        _check_object(value, schema, path)


def _check_number(value: float, schema: Mapping[str, Any], path: str) -> None:
    lo, hi = schema.get("minimum"), schema.get("maximum")
    if lo is not None and value < lo:
        raise _Invalid(path, f"expected a number >= {lo}, got {value}")
    if hi is not None and value > hi:
        raise _Invalid(path, f"expected a number <= {hi}, got {value}")
    xlo, xhi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if isinstance(xlo, int | float) and not isinstance(xlo, bool) and value <= xlo:
        raise _Invalid(path, f"expected a number > {xlo}, got {value}")
    if isinstance(xhi, int | float) and not isinstance(xhi, bool) and value >= xhi:
        raise _Invalid(path, f"expected a number < {xhi}, got {value}")


def _check_length(
    size: int, schema: Mapping[str, Any], path: str, lo_key: str, hi_key: str, unit: str
) -> None:
    lo, hi = schema.get(lo_key), schema.get(hi_key)
    if lo is not None and size < lo:
        raise _Invalid(path, f"expected at least {lo} {unit}, got {size}")
    if hi is not None and size > hi:
        raise _Invalid(path, f"expected at most {hi} {unit}, got {size}")


def _check_object(value: Mapping[str, Any], schema: Mapping[str, Any], path: str) -> None:
    props: Mapping[str, Any] = schema.get("properties") or {}
    for name in schema.get("required") or ():
        if name not in value:
            raise _Invalid(_join(path, name), "missing required argument")
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        sub = props.get(key)
        if sub is not None:
            if isinstance(sub, Mapping):
                _check(item, sub, _join(path, key))
        elif extra is False:
            known = ", ".join(props) or "none"
            raise _Invalid(_join(path, key), f"unexpected argument (expected: {known})")
        elif isinstance(extra, Mapping):
            _check(item, extra, _join(path, key))


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else str(key)


def schema_validator(
    parameters: Mapping[str, Any], tool_name: str = "tool"
) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """A validator for ``Tool.validator`` from a hand-written JSON Schema.

    It returns the arguments as a new dict, or raises :class:`ToolArgumentError` naming
    the bad argument and what was expected.
    """
    schema = inline_refs(parameters) if "$defs" in parameters else dict(parameters)

    def validate(arguments: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(arguments, Mapping):
            raise ToolArgumentError(
                f"Invalid arguments for tool '{tool_name}': expected a JSON object, "
                f"got {_type_name(arguments)}"
            )
        try:
            _check_object(arguments, schema, "")
        except _Invalid as exc:
            where = f"argument '{exc.path}'" if exc.path else "arguments"
            raise ToolArgumentError(
                f"Invalid arguments for tool '{tool_name}': {where}: {exc.message}"
            ) from None
        return dict(arguments)

    return validate
