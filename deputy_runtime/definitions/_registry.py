"""Host registries: the only way a definition file's tool and skill names become objects.

A file names registry keys, never code or paths, so what a file can reach is exactly what
the host passed in. Registries are checked before any file is touched.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from ..errors import DefinitionFileError
from ..skills import Skill
from ..tools import Tool

__all__ = [
    "REGISTRY_KEY_PATTERN",
    "SkillRegistry",
    "ToolRegistry",
    "check_skill_registry",
    "check_tool_registry",
    "registry_key",
]

#: A registry key: case-sensitive, a letter then letters, digits, '_', '.' or '-'.
REGISTRY_KEY_PATTERN: Final = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*\Z")

ToolRegistry = Mapping[str, Tool]
SkillRegistry = Mapping[str, Skill | str]
_EMPTY: Mapping[str, object] = {}


def _check_registry(
    kind: str, registry: object, path: Path, value_ok: type | tuple[type, ...], expected: str
) -> Mapping[str, object]:
    if registry is None:
        return _EMPTY
    if not isinstance(registry, Mapping):
        raise DefinitionFileError(
            f"The {kind} registry must be a mapping of key -> {expected} "
            f"(e.g. {{'read_file': read_file}}), got {type(registry).__name__}",
            path=path,
        )
    for key, value in registry.items():
        if not isinstance(key, str) or not REGISTRY_KEY_PATTERN.match(key):
            raise DefinitionFileError(
                f"The {kind} registry key {key!r} is invalid; expected a letter followed by "
                "letters, digits, '_', '.' or '-' (e.g. 'read_file')",
                path=path,
            )
        if not isinstance(value, value_ok) or (isinstance(value, str) and not value.strip()):
            raise DefinitionFileError(
                f"The {kind} registry entry {key!r} is {type(value).__name__}; expected {expected}",
                path=path,
            )
    return registry


def check_tool_registry(tools: object, path: Path) -> ToolRegistry:
    """Validate a tools registry (``None`` means empty); raise DefinitionFileError if bad."""
    checked = _check_registry("tools", tools, path, Tool, "a Tool object")
    return checked  # type: ignore[return-value]  # values checked above


def check_skill_registry(skills: object, path: Path) -> SkillRegistry:
    """Validate a skills registry (``None`` means empty); raise DefinitionFileError if bad."""
    checked = _check_registry(
        "skills", skills, path, (Skill, str), "a Skill object or a non-empty skill path"
    )
    return checked  # type: ignore[return-value]  # values checked above


def registry_key(kind: str, item: object, registry: Mapping[str, object], path: Path) -> str:
    """The one registry key whose value is ``item``, for writing a definition.

    Tools and Skill objects match by identity; skill path strings match by equality (the
    same path may be a different ``str`` object). No match, or more than one, is an error.
    """
    if isinstance(item, str):
        keys = [key for key, value in registry.items() if value == item]
        shown = repr(item)
    else:
        keys = [key for key, value in registry.items() if value is item]
        shown = repr(item)
    if len(keys) != 1:
        found = "none" if not keys else ", ".join(repr(k) for k in keys)
        raise DefinitionFileError(
            f"Each {kind} object must match exactly one registry entry; {shown} matches "
            f"{found}. Pass a {kind} registry that holds it under one key",
            path=path,
        )
    return keys[0]
