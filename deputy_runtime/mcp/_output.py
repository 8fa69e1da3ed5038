"""A tool's ``outputSchema``: compiled once per listing, checked against every result.

The check uses ``jsonschema``, which the MCP SDK itself depends on (and validates with),
so the ``mcp`` extra brings it. Rules:

* The schema's own ``$schema`` picks the draft (2020-12 when absent, as MCP says).
* ``$ref`` resolves within the schema document only: a server's schema never makes the
  host fetch a URL.
* An invalid schema makes the tool unusable (it is not offered; the session reports why).
* A problem is one short line naming where (``structuredContent.a[0].b``) and what was
  expected; it never repeats the offending value, which may be megabytes of base64.
"""

from __future__ import annotations

from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators
from referencing import Registry
from referencing.exceptions import Unresolvable

from ._bound import cut_chars

__all__ = ["OutputSchema"]

_DEFAULT_DRAFT = jsonschema.Draft202012Validator
_JSON_TYPES = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (dict, "object"),
    (type(None), "null"),
)


def _json_type(value: Any) -> str:
    for kind, name in _JSON_TYPES:
        if isinstance(value, kind):
            return name
    return type(value).__name__


class OutputSchema:
    """A compiled ``outputSchema``; build one with :meth:`compile`."""

    __slots__ = ("_validator",)

    def __init__(self, validator: Any) -> None:
        self._validator = validator

    @staticmethod
    def compile(schema: dict[str, Any]) -> OutputSchema | str:
        """The compiled schema, or a line saying why ``schema`` is not a valid JSON Schema."""
        cls: Any = jsonschema.validators.validator_for(schema, default=_DEFAULT_DRAFT)
        try:
            cls.check_schema(schema)
        except jsonschema.exceptions.SchemaError as exc:
            where = "".join(f"[{p!r}]" for p in exc.path)
            return f"its outputSchema is not a valid JSON Schema: {cut_chars(exc.message, 200)}" + (
                f" (at {where})" if where else ""
            )
        return OutputSchema(cls(schema, registry=Registry()))

    def problem(self, value: Any) -> str | None:
        """``None`` when ``value`` conforms, else one line naming where and what is wrong."""
        try:
            error = jsonschema.exceptions.best_match(self._validator.iter_errors(value))
        except Unresolvable as exc:
            why = cut_chars(str(exc), 200)
            return f"its outputSchema has a reference that does not resolve: {why}"
        if error is None:
            return None
        where = "structuredContent" + "".join(
            f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path
        )
        if error.validator == "type":
            expected = error.validator_value
            label = " or ".join(expected) if isinstance(expected, list) else str(expected)
            what = f"expected {label}, got {_json_type(error.instance)}"
        elif error.validator in ("required", "additionalProperties", "dependentRequired"):
            what = cut_chars(error.message, 200)
        else:
            what = f"fails {error.validator!r} ({cut_chars(repr(error.validator_value), 80)})"
        return f"{where}: {what}"
