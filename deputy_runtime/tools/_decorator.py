"""The ``@tool`` decorator: a Tool from a typed Python function.

The parameters' type hints become a msgspec Struct type; its JSON Schema (with ``$defs``
inlined, so every provider accepts it) is the tool's ``parameters`` and
``msgspec.convert(arguments, Struct)`` is its validator, so a call is checked and converted
(nested structs, literals, dates, ...) in one fast step. ``Annotated[T,
msgspec.Meta(description=..., examples=[...])]`` documents a parameter; so does an
``Args:`` section in a Google-style docstring. The tool's description is the docstring
text before its first section (``Args:``, ``Returns:``, ...).
"""

from __future__ import annotations

import inspect
import re
import sys
import typing
from collections.abc import Callable, Mapping
from typing import Any, overload

import msgspec

from ..errors import ToolArgumentError, ToolDefinitionError
from ._schema import inline_refs
from ._tool import Tool

__all__ = ["parse_docstring", "tool"]

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Returns?|Raises|"
    r"Yields?|Examples?|Notes?|See Also|Warnings?|Attributes|Todo)\s*:\s*$"
)
_ARG_LINE = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_PARAM = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    destructive: bool = False,
    idempotent: bool = False,
    open_world: bool = False,
    run_in_thread: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    destructive: bool = False,
    idempotent: bool = False,
    open_world: bool = False,
    run_in_thread: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a function into a :class:`Tool`; use as ``@tool`` or ``@tool(...)``.

    The function may be sync or async and takes the model's arguments as keyword
    arguments. Its type hints give the JSON Schema; its docstring gives the description and,
    from an ``Args:`` section, the parameter descriptions.

    Args:
        fn: The function, when used as a bare ``@tool``.
        name: The tool name (default: the function's name).
        description: The description (default: the docstring up to its first section).
        read_only: The tool has no side effects (what the ``readonly`` mode allows).
        destructive: The tool may destroy data (refused in ``standard`` mode).
        idempotent: Calling it twice with the same arguments has the effect of once.
        open_world: It reaches outside the host, e.g. the web.
        run_in_thread: Run a sync function in a worker thread so blocking I/O does not
            stall the event loop.

    Returns:
        The Tool, or (for ``@tool(...)``) a decorator that makes one.

    Raises:
        ToolDefinitionError: The function is already a Tool, is not a function, or its
            signature cannot be described as a JSON Schema.
    """

    def build(func: Callable[..., Any], caller: Mapping[str, Any] | None = None) -> Tool:
        if caller is None:
            caller = sys._getframe(1).f_locals
        return _build_tool(
            func,
            caller=caller,
            name=name,
            description=description,
            read_only=read_only,
            destructive=destructive,
            idempotent=idempotent,
            open_world=open_world,
            run_in_thread=run_in_thread,
        )

    if fn is None:
        return build
    return build(fn, sys._getframe(1).f_locals)


def _build_tool(
    func: Callable[..., Any],
    *,
    caller: Mapping[str, Any],
    name: str | None,
    description: str | None,
    read_only: bool,
    destructive: bool,
    idempotent: bool,
    open_world: bool,
    run_in_thread: bool,
) -> Tool:
    if isinstance(func, Tool):
        raise ToolDefinitionError(f"{func!r} is already a Tool; apply @tool once")
    if not callable(func):
        raise ToolDefinitionError(f"@tool needs a function, got {type(func).__name__}")
    tool_name = name if name is not None else getattr(func, "__name__", "")
    label = f"Tool {tool_name!r}"
    if inspect.isasyncgenfunction(func) or inspect.isgeneratorfunction(func):
        raise ToolDefinitionError(f"{label}: generator functions cannot be tools")
    is_async = inspect.iscoroutinefunction(func)
    if run_in_thread and is_async:
        raise ToolDefinitionError(f"{label}: run_in_thread is only for sync functions")
    summary, param_docs = parse_docstring(inspect.getdoc(func) or "")
    struct_type = _arguments_struct(func, tool_name, label, caller)
    parameters = _parameters_schema(struct_type, param_docs, label)
    return Tool(
        name=tool_name,
        description=description if description is not None else summary,
        parameters=parameters,
        function=func,
        read_only=read_only,
        destructive=destructive,
        idempotent=idempotent,
        open_world=open_world,
        run_in_thread=run_in_thread,
        validator=struct_validator(struct_type, tool_name, parameters),
    )


def _arguments_struct(
    func: Callable[..., Any], tool_name: str, label: str, caller: Mapping[str, Any]
) -> type[Any]:
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"{label}: cannot read the signature ({exc})") from None
    try:
        hints = _type_hints(func, caller)
    except Exception as exc:
        raise ToolDefinitionError(
            f"{label}: cannot resolve type hints ({type(exc).__name__}: {exc})"
        ) from None
    fields: list[Any] = []
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"{label}: parameter {param.name!r}: *args/**kwargs are not supported; "
                "declare each argument"
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise ToolDefinitionError(
                f"{label}: parameter {param.name!r} is positional-only; tools are called "
                "with keyword arguments"
            )
        annotation = hints.get(param.name, Any)
        if param.default is param.empty:
            fields.append((param.name, annotation))
        else:
            fields.append((param.name, annotation, param.default))
    try:
        return msgspec.defstruct(
            f"{tool_name or 'tool'}_arguments",
            fields,
            kw_only=True,
            forbid_unknown_fields=True,
        )
    except Exception as exc:
        raise ToolDefinitionError(f"{label}: invalid parameters ({exc})") from None


def _type_hints(func: Callable[..., Any], caller: Mapping[str, Any]) -> dict[str, Any]:
    """``get_type_hints`` that also sees local names, for ``from __future__ import
    annotations`` in functions defined inside functions: first the closure's variables,
    then (only if that fails) the locals of the frame that applied ``@tool``."""
    target = inspect.unwrap(func)
    localns: dict[str, Any] = {}
    code = getattr(target, "__code__", None)
    closure = getattr(target, "__closure__", None)
    if code is not None and closure:
        for var, cell in zip(code.co_freevars, closure, strict=False):
            try:
                localns[var] = cell.cell_contents
            except ValueError:  # an empty cell
                continue
    try:
        return typing.get_type_hints(target, localns=localns or None, include_extras=True)
    except NameError:
        if caller is getattr(target, "__globals__", None):
            raise
        merged = {**caller, **localns}
        return typing.get_type_hints(target, localns=merged, include_extras=True)


def _parameters_schema(
    struct_type: type[Any], param_docs: Mapping[str, str], label: str
) -> dict[str, Any]:
    try:
        raw = msgspec.json.schema(struct_type)
    except Exception as exc:  # unsupported type or a default that is not JSON
        raise ToolDefinitionError(f"{label}: cannot build a JSON Schema ({exc})") from None
    schema = inline_refs(raw)
    schema.pop("title", None)
    schema["type"] = "object"
    properties: dict[str, Any] = schema.setdefault("properties", {})
    for pname, doc in param_docs.items():
        prop = properties.get(pname)
        if isinstance(prop, dict) and "description" not in prop:
            prop["description"] = doc
    if not schema.get("required"):
        schema.pop("required", None)
    schema["additionalProperties"] = False
    return schema


def struct_validator(
    struct_type: type[Any], tool_name: str, schema: Mapping[str, Any]
) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """A validator that converts tool arguments into ``struct_type`` and back to a dict.

    Args:
        struct_type: The msgspec Struct the arguments must convert into.
        tool_name: The tool's name, for error messages.
        schema: The tool's JSON Schema, used to reword msgspec's messages.

    Returns:
        A callable taking the arguments and returning them as a validated dict; it raises
        ToolArgumentError naming the argument when they do not convert.
    """
    field_names: tuple[str, ...] = struct_type.__struct_fields__
    convert = msgspec.convert
    asdict = msgspec.structs.asdict
    validation_error = msgspec.ValidationError

    def validate(arguments: Mapping[str, Any]) -> dict[str, Any]:
        if type(arguments) is not dict:
            arguments = dict(arguments) if isinstance(arguments, Mapping) else arguments
        try:
            obj = convert(arguments, struct_type)
        except validation_error as exc:
            raise ToolArgumentError(
                f"Invalid arguments for tool '{tool_name}': "
                f"{_explain(str(exc), field_names, schema)}"
            ) from None
        return asdict(obj)

    return validate


_AT = re.compile(r"^(.*) - at `\$(.*)`$")
_FIELD = re.compile(r"^Object (missing required|contains unknown) field `(.*)`$")


_JSON_TYPES = {
    "`int`": "integer",
    "`str`": "string",
    "`float`": "number",
    "`bool`": "boolean",
    "`array`": "array",
    "`object`": "object",
    "`null`": "null",
}
_TYPE_WORD = re.compile(r"`(int|str|float|bool|array|object|null)`")


def _explain(message: str, field_names: tuple[str, ...], schema: Mapping[str, Any]) -> str:
    """Reword a msgspec validation message so it names the argument in JSON terms."""
    message = _TYPE_WORD.sub(lambda m: _JSON_TYPES[m.group(0)], message)
    path = ""
    match = _AT.match(message)
    if match:
        message, path = match.group(1), match.group(2).lstrip(".")
    field = _FIELD.match(message)
    if field:
        kind, name = field.groups()
        full = f"{path}.{name}" if path else name
        if kind == "missing required":
            return f"argument '{full}': missing required argument"
        expected = ", ".join(field_names) if not path else "see the schema"
        return f"argument '{full}': unexpected argument (expected: {expected})"
    if path:
        hint = ""
        prop = schema.get("properties", {}).get(path)
        if message.startswith("Invalid enum value") and isinstance(prop, Mapping):
            choices = prop.get("enum")
            if choices:
                hint = f" (expected one of {', '.join(repr(c) for c in choices)})"
        return f"argument '{path}': {message[0].lower()}{message[1:]}{hint}"
    if message.startswith("Expected object"):
        return f"expected a JSON object of arguments, {message.split(', ', 1)[-1]}"
    return message


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a docstring into the description and per-parameter descriptions.

    The description is the text before the first section header; parameter descriptions
    come from a Google-style ``Args:`` section or Sphinx ``:param name:`` lines.
    """
    lines = inspect.cleandoc(doc).splitlines() if doc else []
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    base_indent: int | None = None
    for line in lines:
        stripped = line.strip()
        header = _SECTION.match(stripped)
        if header and len(line) - len(line.lstrip()) == 0:
            section, current, base_indent = header.group(1), None, None
            continue
        sphinx = _SPHINX_PARAM.match(stripped)
        if sphinx:
            current = sphinx.group(1)
            params[current] = sphinx.group(2).strip()
            section = section or ":param"
            continue
        if stripped.startswith(":") and section == ":param":
            current = None  # :returns:, :raises ...: and the like
            continue
        if section is None:
            summary.append(line)
            continue
        if section not in ("Args", "Arguments", "Parameters", "Params", ":param"):
            continue
        if not stripped:
            current = None
            continue
        indent = len(line) - len(line.lstrip())
        entry = _ARG_LINE.match(stripped)
        if entry and (base_indent is None or indent <= base_indent):
            base_indent = indent
            current = entry.group(1)
            params[current] = entry.group(2).strip()
        elif current is not None:
            params[current] = f"{params[current]} {stripped}".strip()
    return _reflow(summary), {k: v for k, v in params.items() if v}


_BLOCK_START = re.compile(r"^(\s|[-*+] |\d+[.)] |>|```)")


def _reflow(lines: list[str]) -> str:
    """Join hard-wrapped lines of each paragraph; keep lists, indentation and fences."""
    out: list[str] = []
    for line in lines:
        if (
            out
            and out[-1]
            and line
            and not _BLOCK_START.match(line)
            and not out[-1].startswith("```")
        ):
            out[-1] = f"{out[-1]} {line.strip()}"
        else:
            out.append(line.rstrip())
    return "\n".join(out).strip()
