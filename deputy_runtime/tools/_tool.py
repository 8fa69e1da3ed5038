"""The Tool value type.

A Tool is what an agent can call: a name the model uses, a description, a JSON Schema for
its arguments, the function that runs, and annotations the permission modes read.
Tools compare and hash by identity: two tools with the same name and different functions
are different tools, and definitions store tools by reference.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from .._toolspec import ToolSpec
from ..errors import ToolDefinitionError

__all__ = ["TOOL_NAME_PATTERN", "Tool"]

#: Names every provider accepts for a tool.
TOOL_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")


class Tool(msgspec.Struct, frozen=True, eq=False):
    """A callable tool offered to a model.

    ``function`` takes the arguments as keyword arguments and may be sync or async; its
    return value (any JSON-encodable value, usually a string) is what the model sees.
    ``parameters`` is a JSON Schema object; calls are validated against it before the
    function runs. The annotations follow MCP's hints: ``read_only`` (no side effects),
    ``destructive`` (may destroy data), ``idempotent`` and ``open_world`` (reaches outside
    the host, e.g. the web). ``validator`` is an optional fast argument converter built by
    ``@tool`` from the function's type hints; ``run_in_thread`` runs a sync function in a
    worker thread instead of on the event loop. ``path_base`` is the directory a relative
    ``path`` argument resolves against (set by ``tools_file``), so the permission check
    resolves a write's path exactly as the tool will.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    function: Callable[..., Any]
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False
    run_in_thread: bool = False
    validator: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None
    path_base: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not TOOL_NAME_PATTERN.match(self.name):
            raise ToolDefinitionError(
                f"Tool name {self.name!r} is invalid: expected 1-64 characters of letters, "
                "digits, '_' or '-'"
            )
        if not isinstance(self.description, str):
            raise ToolDefinitionError(f"Tool {self.name!r}: description must be a string")
        if not isinstance(self.parameters, dict) or self.parameters.get("type") != "object":
            raise ToolDefinitionError(
                f"Tool {self.name!r}: parameters must be a JSON Schema dict with 'type': 'object'"
            )
        if not callable(self.function):
            raise ToolDefinitionError(f"Tool {self.name!r}: function must be callable")

    def spec(self) -> ToolSpec:
        """The provider-facing description of this tool.

        Returns:
            The tool's name, description and parameter schema.
        """
        return ToolSpec(self.name, self.description, self.parameters)

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r})"
