"""Claude Code plugin folders: where a plugin's agents, skills, commands, hooks and MCP
servers are, read without running anything.

A plugin root holds ``.claude-plugin/plugin.json`` (its manifest; optional, as in Claude
Code: without one the folder's name is the plugin's name) and any of ``agents/*.md``,
``skills/NAME/SKILL.md``, ``commands/*.md``, ``hooks/hooks.json`` and ``.mcp.json``. The
manifest's ``agents``, ``commands`` and ``skills`` paths (one or a list) add to those
folders, and its ``hooks`` and ``mcpServers`` (a path, or the configuration inline)
replace the default files. Every path stays inside the plugin root.

:func:`find_plugins` takes a plugin root, a folder of plugin roots, or a marketplace (a
folder with ``.claude-plugin/marketplace.json``, whose local ``source`` entries are its
plugins). Only a plugin's ``agents`` folders are read for agents: its README and other
markdown never are.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from ..errors import DefinitionFileError
from ._model import AgentDefinition
from ._problems import ProblemLog

__all__ = [
    "PluginFolder",
    "expand_command",
    "find_plugins",
    "is_plugin_root",
    "namespaced",
    "plugin_skills",
    "read_plugin",
]

_MANIFEST = Path(".claude-plugin") / "plugin.json"
_MARKETPLACE = Path(".claude-plugin") / "marketplace.json"
#: The component folders and files a plugin root may hold without a manifest.
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")


class PluginFolder(msgspec.Struct, frozen=True, kw_only=True):
    """One plugin's components, by where they are.

    Attributes:
        name: The plugin's name: agents, skills and commands are namespaced by it
            (``NAME:agent``).
        root: The plugin root (``CLAUDE_PLUGIN_ROOT`` for its hooks and MCP servers).
        agent_files: Its agent markdown files, in code point order of their paths.
        skills: Skill name -> the folder holding its ``SKILL.md``.
        commands: Command name -> its markdown file.
        hooks: Its hooks configuration (``hooks.json`` as parsed), or ``None``.
        hooks_source: The file the hooks came from (the manifest for inline hooks).
        mcp_servers: Its ``.mcp.json`` as parsed (either shape), or ``None``.
        mcp_source: The file the MCP servers came from.
    """

    name: str
    root: Path
    agent_files: tuple[Path, ...] = ()
    skills: Mapping[str, Path] = msgspec.field(default_factory=dict)
    commands: Mapping[str, Path] = msgspec.field(default_factory=dict)
    hooks: Any = None
    hooks_source: Path | None = None
    mcp_servers: Any = None
    mcp_source: Path | None = None


def is_plugin_root(path: Path) -> bool:
    """Whether ``path`` is a plugin root: it has a manifest, or an ``agents`` folder and
    no definition files of its own (a YAML file, or markdown that opens with
    frontmatter; a README is not one). A project's ``.claude`` folder is not a plugin.
    """
    if (path / _MANIFEST).is_file():
        return True
    return path.name != ".claude" and (path / "agents").is_dir() and not _has_definitions(path)


def find_plugins(path: Path) -> tuple[PluginFolder, ...] | None:
    """The plugins at ``path``: a marketplace, a plugin root, or a folder of plugin roots.

    Args:
        path: The folder.

    Returns:
        The plugins in order (a marketplace's order, else code point order of their
        folders), or ``None`` when ``path`` is none of the three (a plain folder of
        definition files).

    Raises:
        DefinitionFileError: A manifest or marketplace file is not valid JSON or not
            shaped as Claude Code reads it, a component path leaves the plugin root, or
            two plugins have one name; the message names the file and the field.
    """
    if not path.is_dir():
        return None
    if (path / _MARKETPLACE).is_file():
        return _unique(_marketplace(path), path)
    if is_plugin_root(path):
        return (read_plugin(path),)
    if _has_definitions(path):
        return None
    roots = [p for p in sorted(path.iterdir()) if p.is_dir() and is_plugin_root(p)]
    return _unique([read_plugin(p) for p in roots], path) if roots else None


def _has_definitions(path: Path) -> bool:
    """Whether ``path`` holds definition files at its top level."""
    for entry in path.iterdir():
        suffix = entry.suffix.lower()
        if entry.name.startswith(".") or not entry.is_file():
            continue
        if suffix in (".yaml", ".yml"):
            return True
        if suffix == ".md":
            try:
                with entry.open("rb") as f:
                    if f.read(3) == b"---":
                        return True
            except OSError:
                continue
    return False


def read_plugin(root: Path) -> PluginFolder:
    """The plugin at ``root`` (see the module docstring)."""
    manifest_file = root / _MANIFEST
    manifest: dict[str, Any] = {}
    if manifest_file.is_file():
        manifest = _json_object(manifest_file)
    name = manifest.get("name", root.resolve().name)
    if not isinstance(name, str) or not name or not set(name.lower()) <= _NAME_CHARS:
        raise DefinitionFileError(
            f"name must be the plugin's name in letters, digits, '-' or '_', got {name!r}",
            path=manifest_file if manifest else root,
        )
    agent_dirs = [root / "agents", *_paths(manifest, "agents", root, manifest_file)]
    agent_files: list[Path] = []
    for place in agent_dirs:
        if place.is_dir():
            agent_files.extend(
                p
                for p in sorted(place.iterdir())
                if p.suffix == ".md" and p.is_file() and not p.name.startswith(".")
            )
        elif place.is_file() and place.suffix == ".md":
            agent_files.append(place)
    skills: dict[str, Path] = {}
    for place in [root / "skills", *_paths(manifest, "skills", root, manifest_file)]:
        if place.is_dir():
            if (place / "SKILL.md").is_file():
                skills[place.name] = place
                continue
            for folder in sorted(place.iterdir()):
                if (folder / "SKILL.md").is_file():
                    skills[folder.name] = folder
    commands: dict[str, Path] = {}
    for place in [root / "commands", *_paths(manifest, "commands", root, manifest_file)]:
        if place.is_dir():
            for file in sorted(place.iterdir()):
                if file.suffix == ".md" and file.is_file():
                    commands[file.stem] = file
        elif place.is_file() and place.suffix == ".md":
            commands[place.stem] = place
    hooks, hooks_source = _config(
        manifest, "hooks", root, manifest_file, root / "hooks" / "hooks.json"
    )
    mcp, mcp_source = _config(manifest, "mcpServers", root, manifest_file, root / ".mcp.json")
    return PluginFolder(
        name=name.lower(),
        root=root,
        agent_files=tuple(dict.fromkeys(agent_files)),
        skills=skills,
        commands=commands,
        hooks=hooks,
        hooks_source=hooks_source,
        mcp_servers=mcp,
        mcp_source=mcp_source,
    )


def _marketplace(path: Path) -> list[PluginFolder]:
    file = path / _MARKETPLACE
    data = _json_object(file)
    entries = data.get("plugins")
    if not isinstance(entries, list):
        raise DefinitionFileError("plugins must be a list of plugin entries", path=file)
    metadata = data.get("metadata")
    base = path
    if isinstance(metadata, dict) and isinstance(metadata.get("pluginRoot"), str):
        base = _inside(path, metadata["pluginRoot"], file, "metadata.pluginRoot")
    plugins = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise DefinitionFileError(f"plugins[{i}] must be a map", path=file)
        source = entry.get("source")
        if not isinstance(source, str):
            # A git or URL source is fetched by Claude Code; nothing is fetched here.
            continue
        root = _inside(
            base if not source.startswith("./") else path, source, file, f"plugins[{i}].source"
        )
        plugin = read_plugin(root)
        listed = entry.get("name")
        if isinstance(listed, str) and listed and not (root / _MANIFEST).is_file():
            plugin = msgspec.structs.replace(plugin, name=listed.lower())
        plugins.append(plugin)
    return plugins


def _unique(
    plugins: list[PluginFolder] | tuple[PluginFolder, ...], where: Path
) -> tuple[PluginFolder, ...]:
    seen: dict[str, Path] = {}
    for plugin in plugins:
        if plugin.name in seen:
            raise DefinitionFileError(
                f"two plugins are named {plugin.name!r}: {seen[plugin.name]} and "
                f"{plugin.root}; plugin names must be unique",
                path=where,
            )
        seen[plugin.name] = plugin.root
    return tuple(plugins)


def _json_object(file: Path) -> dict[str, Any]:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DefinitionFileError(f"could not read it: {exc.strerror or exc}", path=file) from None
    except ValueError as exc:
        raise DefinitionFileError(f"not valid JSON: {exc}", path=file) from None
    if not isinstance(data, dict):
        raise DefinitionFileError(f"expected a JSON object, got {type(data).__name__}", path=file)
    return data


def _paths(manifest: Mapping[str, Any], key: str, root: Path, file: Path) -> list[Path]:
    value = manifest.get(key)
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
        raise DefinitionFileError(f"{key} must be a path or a list of paths", path=file)
    return [_inside(root, v, file, key) for v in items]


def _config(
    manifest: Mapping[str, Any], key: str, root: Path, file: Path, default: Path
) -> tuple[Any, Path | None]:
    value = manifest.get(key)
    if isinstance(value, dict):
        return value, file
    if value is not None and not isinstance(value, str):
        raise DefinitionFileError(
            f"{key} must be a path to a JSON file or the configuration itself", path=file
        )
    place = default if value is None else _inside(root, value, file, key)
    if not place.is_file():
        if value is not None:
            raise DefinitionFileError(f"{key}: {value!r} is not a file", path=file)
        return None, None
    return _json_object(place), place


def _inside(root: Path, relative: str, file: Path, key: str) -> Path:
    place = (root / relative).resolve()
    if not place.is_relative_to(root.resolve()):
        raise DefinitionFileError(
            f"{key}: {relative!r} leaves the plugin folder; paths are relative to it, "
            "e.g. './agents'",
            path=file,
        )
    return place


# -- what the agents of a plugin see ----------------------------------------------------------


def plugin_skills(plugin: PluginFolder, skills: Mapping[str, Any]) -> dict[str, Any]:
    """The skill registry a plugin's agents resolve ``skills:`` names against: the host's,
    with the plugin's own skills (by their folder names) in front of it."""
    return {**skills, **{name: str(folder) for name, folder in plugin.skills.items()}}


def namespaced(
    definition: AgentDefinition, plugin: PluginFolder, log: ProblemLog
) -> AgentDefinition:
    """A plugin agent as the lead knows it: named ``PLUGIN:agent``, its ``initialPrompt``
    command expanded."""
    prompt = definition.initial_prompt
    if prompt is not None and prompt.startswith("/"):
        expanded = expand_command(prompt, plugin)
        if expanded is None:
            log.warn(
                f"initialPrompt {prompt.split()[0]!r} names no command of plugin "
                f"{plugin.name!r} (its commands: {', '.join(plugin.commands) or 'none'}); "
                "it is sent as written",
                field="initialPrompt",
            )
        else:
            prompt = expanded
    return definition.replace(name=f"{plugin.name}:{definition.name}", initial_prompt=prompt)


_ARGUMENT = re.compile(r"\$(ARGUMENTS|[1-9])")


def expand_command(text: str, plugin: PluginFolder) -> str | None:
    """``/command args`` (or ``/PLUGIN:command args``) as the command's text with its
    arguments filled in (``$ARGUMENTS``: all of them, ``$1`` ... ``$9``: each); ``None``
    when the plugin has no such command."""
    head, _, arguments = text[1:].partition(" ")
    prefix, colon, name = head.partition(":")
    if not colon:
        name = prefix
    elif prefix != plugin.name:
        return None
    file = plugin.commands.get(name)
    if file is None:
        return None
    try:
        body = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise DefinitionFileError(f"could not read it: {exc.strerror or exc}", path=file) from None
    body = _without_frontmatter(body).strip()
    words = arguments.split()
    arguments = arguments.strip()

    def fill(match: re.Match[str]) -> str:
        key = match.group(1)
        if key == "ARGUMENTS":
            return arguments
        index = int(key) - 1
        return words[index] if index < len(words) else ""

    filled = _ARGUMENT.sub(fill, body)
    if arguments and "$ARGUMENTS" not in body and not re.search(r"\$[1-9]", body):
        filled = f"{filled}\n\nARGUMENTS: {arguments}"  # unplaced: appended, as Claude Code does
    return filled


def _without_frontmatter(text: str) -> str:
    if not text.startswith("---"):
        return text
    lines = text.splitlines(keepends=True)
    for i in range(1, len(lines)):
        if lines[i].rstrip() == "---":
            return "".join(lines[i + 1 :])
    return text
