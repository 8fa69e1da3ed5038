"""``deputy-runtime validate``, ``list`` and ``schema``: definition files from the shell.

The command line has no host registry, so tool and skill references are checked for form
only (any well-formed key resolves to a placeholder); the host's registry is what decides
when the host reads the file.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Mapping, ValuesView
from pathlib import Path
from typing import Any

from ..definitions import (
    AGENT_DEFINITION_SCHEMA,
    REGISTRY_KEY_PATTERN,
    AgentDefinition,
    agent_definition_from_markdown,
    agent_definitions,
    candidate_names,
    definition_format,
    definition_from_yaml,
    read_definition_text,
)
from ..errors import DefinitionFileError
from ..tools import Tool

__all__ = ["ALL_HOST_TOOLS", "list_agents", "schema", "validate"]


#: What ``list`` shows for a definition that takes every tool the host registers (a
#: markdown file without a ``tools`` key).
ALL_HOST_TOOLS = "(all host tools)"


class _OpenRegistry(Mapping[str, Any]):
    """Resolves every well-formed key to a placeholder, remembering what was asked for.

    It lists no keys. A reader takes ``values()`` only to take the whole registry (a
    markdown file without a ``tools`` key gets every host tool), and the command line does
    not know the host's registry, so ``values()`` gives one placeholder standing for all
    of it (made from ``everything``) instead of the keys earlier files happened to ask for.
    """

    def __init__(self, make: Any, everything: str | None = None) -> None:
        self._make = make
        self._items: dict[str, Any] = {}
        self._whole = {} if everything is None else {everything: make(everything)}

    def __getitem__(self, key: str) -> Any:
        if not isinstance(key, str) or not REGISTRY_KEY_PATTERN.match(key):
            raise KeyError(key)
        if key not in self._items:
            self._items[key] = self._make(key)
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def values(self) -> ValuesView[Any]:
        return self._whole.values()

    def key_of(self, item: object) -> str:
        """The key a placeholder was made for (``everything`` for the whole registry's)."""
        found = {**self._whole, **self._items}.items()
        return next(key for key, value in found if value is item)


def _placeholder_tool(key: str) -> Tool:
    name = "".join(c if c.isalnum() or c in "_-" else "_" for c in key)[:64]
    return Tool(name, f"(reference to {key!r})", {"type": "object"}, lambda **_: None)


def _registries() -> tuple[_OpenRegistry, _OpenRegistry]:
    return _OpenRegistry(_placeholder_tool, ALL_HOST_TOOLS), _OpenRegistry(lambda key: key)


def _problem(exc: DefinitionFileError) -> str:
    where = f"{exc.path}:{exc.line}" if exc.line is not None else str(exc.path)
    return f"{where}: {exc.reason}"


def _read(file: Path, out: list[str]) -> AgentDefinition | None:
    """Read one file (markdown by its extension, else YAML); on a problem append it to ``out``."""
    tools, skills = _registries()
    try:
        if definition_format(file) == "markdown":
            return agent_definition_from_markdown(file, tools, skills)
        return definition_from_yaml(read_definition_text(file), file, tools, skills)
    except DefinitionFileError as exc:
        out.append(_problem(exc))
        return None


def _files(path: Path, problems: list[str]) -> list[Path]:
    if not path.is_dir():
        return [path]
    try:
        return [path / name for name in candidate_names(path, markdown=True)]
    except DefinitionFileError as exc:
        problems.append(_problem(exc))
        return []


def validate(args: argparse.Namespace) -> int:
    """Check files and directories; print ``path:line: reason`` per problem; 1 if any."""
    problems: list[str] = []
    checked = 0
    for raw in args.paths:
        path = Path(raw)
        seen: dict[str, Path] = {}
        for file in _files(path, problems):
            checked += 1
            definition = _read(file, problems)
            if definition is None or not path.is_dir():
                continue
            if definition.name in seen:
                problems.append(
                    f"{path}: duplicate agent name {definition.name!r} in "
                    f"{seen[definition.name].name} and {file.name}; names must be unique"
                )
            seen.setdefault(definition.name, file)
    for line in problems:
        print(line)
    status = "no problems" if not problems else f"{len(problems)} problem(s)"
    print(f"checked {checked} file(s): {status}", file=sys.stderr)
    return 1 if problems else 0


def list_agents(args: argparse.Namespace) -> int:
    """Print the definitions in a directory: name, model, tools, permission mode, limit.

    TOOLS is ``-`` for none and ``(all host tools)`` for a markdown file without a
    ``tools`` key, which gets every tool the host registers.
    """
    tools, skills = _registries()
    try:
        found = agent_definitions(args.directory, tools, skills, markdown=True)
    except DefinitionFileError as exc:
        print(_problem(exc), file=sys.stderr)
        return 1
    if not found:
        print(f"no agent definitions in {args.directory}", file=sys.stderr)
        return 0
    rows = [("NAME", "MODEL", "TOOLS", "PERMISSION", "MAX REQUESTS")]
    for definition in found.values():
        rows.append(
            (
                definition.name,
                definition.model,
                ", ".join(tools.key_of(tool) for tool in definition.tools) or "-",
                definition.permission_mode or "(lead's)",
                "-" if definition.max_requests is None else str(definition.max_requests),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
    return 0


def schema(args: argparse.Namespace) -> int:
    """Print the JSON Schema of definition format version 1."""
    print(json.dumps(AGENT_DEFINITION_SCHEMA, indent=2))
    return 0
