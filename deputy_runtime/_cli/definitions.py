"""``deputy-runtime validate``, ``list`` and ``schema``: definition files from the shell.

``validate`` and ``list`` resolve tool names exactly as ``run`` does: against the file
tools ``run`` gives subagents (scoped to the current directory) plus the tools of every
``--plugin`` (its ``tools`` attribute), so a file that passes ``validate`` loads in
``run``. Skills resolve against the plugins' ``skills`` mappings (none without one).

Shared with ``run`` and ``serve`` (which call them rather than keeping copies):
:func:`import_plugin`, :func:`host_tool_registry`, :func:`host_skill_registry` and
:func:`definitions_path_problem`.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence, ValuesView
from pathlib import Path
from types import ModuleType
from typing import Any

from ..definitions import (
    AGENT_DEFINITION_SCHEMA,
    AgentDefinition,
    DefinitionProblem,
    PluginFolder,
    Severity,
    candidate_names,
    collect_agent_definitions,
    find_plugins,
    validate_definitions,
)
from ..errors import DeputyError
from ..skills import Skill
from ..tools import (
    BashTools,
    Tool,
    ask_user,
    tools_bash,
    tools_file,
    tools_file_extra,
    tools_web,
)

__all__ = [
    "ALL_HOST_TOOLS",
    "DEFAULT_AGENTS_DIR",
    "EXIT_ERRORS",
    "EXIT_OK",
    "EXIT_USAGE",
    "McpSetupError",
    "PluginError",
    "definitions_path_problem",
    "host_shell",
    "host_skill_registry",
    "host_tool_registry",
    "host_web",
    "import_plugin",
    "list_agents",
    "plugin_failure",
    "plugin_tools",
    "read_mcp_servers",
    "schema",
    "validate",
]

#: What ``list`` shows for a definition that takes every tool the host registers (a
#: markdown file without a ``tools`` key).
ALL_HOST_TOOLS = "(all host tools)"
#: The directory ``list`` (and ``run --agents``) reads when none is given; the default of
#: ``agent_definitions()`` too.
DEFAULT_AGENTS_DIR = ".deputy/agents"
EXIT_OK, EXIT_ERRORS, EXIT_USAGE = 0, 1, 2


class PluginError(DeputyError, ValueError):
    """A ``--plugin`` could not be imported or its ``tools`` are malformed."""


class McpSetupError(DeputyError, ValueError):
    """The MCP configuration (``--mcp-config`` or ``.mcp.json``) cannot be used."""


def read_mcp_servers(config: str | None, cwd: Path) -> dict[str, Any]:
    """The MCP servers of ``config``, else of ``.mcp.json`` in ``cwd`` when it exists.

    Args:
        config: The ``--mcp-config`` value, or ``None``.
        cwd: Where ``.mcp.json`` is looked for.

    Returns:
        Each server's name mapped to its configuration, in file order (empty when no
        file is given or found).

    Raises:
        McpSetupError: The file does not exist or is invalid, or the MCP SDK (the
            ``mcp`` extra) is not installed; the message names the file.
    """
    path = Path(config) if config else cwd / ".mcp.json"
    label = f"--mcp-config {config!r}" if config else str(path)
    if not config and not path.exists():
        return {}
    if not path.is_file():
        raise McpSetupError(f"{label}: no such file; point it at a .mcp.json file")
    try:
        from .. import mcp  # the SDK is an extra: imported only when servers are configured
    except ImportError as exc:
        raise McpSetupError(f"{label}: MCP servers need the 'mcp' extra: {exc}") from exc
    try:
        return dict(mcp.load_mcp_config(path))
    except DeputyError as exc:
        raise McpSetupError(str(exc)) from exc


def import_plugin(target: str) -> ModuleType:
    """Import a plugin: a ``.py`` file (or any path with a separator) or a module name.

    Raises :class:`PluginError` naming the plugin for anything that goes wrong; a plugin
    that raises is described by :func:`plugin_failure` (its own file, line and code).
    """
    name: str | None = None
    try:
        if target.endswith(".py") or os.sep in target:
            path = Path(target)
            if not path.is_file():
                raise PluginError(f"--plugin {target!r}: no such file")
            spec = importlib.util.spec_from_file_location(f"deputy_plugin_{path.stem}", path)
            if spec is None or spec.loader is None:
                raise PluginError(f"--plugin {target!r}: not an importable Python file")
            module = importlib.util.module_from_spec(spec)
            name = spec.name
            sys.modules[name] = module
            spec.loader.exec_module(module)
            return module
        return importlib.import_module(target)
    except PluginError:
        raise
    except Exception as exc:
        if name is not None:
            sys.modules.pop(name, None)  # a half-imported plugin is not kept
        raise PluginError(f"--plugin {target!r} failed to load: {plugin_failure(exc)}") from exc


def plugin_failure(exc: BaseException) -> str:
    """``Type: message`` and the plugin's own frames (file:line and code), newest last.

    Frames of the import machinery and of this package are left out: they say nothing
    about the plugin. A syntax error has no plugin frame; its file and line are its own.
    """
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{text}\n  {exc.filename}:{exc.lineno}: {(exc.text or '').strip()}"
    package = str(Path(__file__).resolve().parent.parent)
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith("<")
        and "importlib" not in frame.filename
        and not str(Path(frame.filename).resolve()).startswith(package)
    ]
    lines = [f"  {f.filename}:{f.lineno} in {f.name}: {(f.line or '').strip()}" for f in frames]
    return "\n".join([text, *lines[-5:]])


def _call_attribute(module: ModuleType, attribute: str, function: Callable[[], object]) -> object:
    """Call a plugin's ``tools``/``skills`` function; what it raises is a PluginError."""
    try:
        return function()
    except Exception as exc:
        raise PluginError(
            f"plugin {module.__name__}: {attribute}() failed: {plugin_failure(exc)}"
        ) from exc


def plugin_tools(module: ModuleType) -> tuple[Tool, ...]:
    """The tools a plugin adds to the registry definitions name their tools from: its
    ``tools`` attribute, a sequence of Tool objects or a function returning one."""
    value = getattr(module, "tools", None)
    if value is None:
        return ()
    if callable(value) and not isinstance(value, Tool):
        value = _call_attribute(module, "tools", value)
    if isinstance(value, Tool | str) or not isinstance(value, Sequence):
        raise PluginError(
            f"plugin {module.__name__}: 'tools' must be a sequence of Tool objects (or a "
            f"function returning one), got {type(value).__name__}"
        )
    for index, item in enumerate(value):
        if not isinstance(item, Tool):
            raise PluginError(
                f"plugin {module.__name__}: tools[{index}] is {type(item).__name__}, "
                "expected a Tool"
            )
    return tuple(value)


def host_shell(working_dir: str | os.PathLike[str] | None = None) -> BashTools:
    """The shell tools the command line gives subagents: ``bash``, ``bash_output`` and
    ``kill_shell`` in ``working_dir`` (default: the current directory), sandboxed by
    bubblewrap with no network. Where bubblewrap is missing a ``bash`` call is refused
    with a message saying so; nothing ever runs unsandboxed. The command that runs the
    lead opens it (``async with``) so background commands are killed when it ends."""
    return tools_bash(working_dir or Path.cwd())


def host_web() -> tuple[Tool, ...]:
    """The web tools the command line gives subagents when the ``web`` extra is installed
    (none without it, so ``WebFetch`` and ``WebSearch`` are warned): ``web_fetch`` with the
    default limits, public addresses only, and ``web_search`` with no search backend (a
    call says how a host configures one)."""
    try:
        return tools_web()
    except ImportError:
        return ()


def host_tool_registry(
    plugins: Sequence[ModuleType] = (),
    working_dir: str | os.PathLike[str] | None = None,
    shell: BashTools | None = None,
) -> dict[str, Tool]:
    """The tool registry ``run`` resolves definitions against: the file tools
    (:func:`tools_file` and :func:`tools_file_extra`) confined to ``working_dir``
    (default: the current directory), the shell tools (``shell``, default
    :func:`host_shell`), the web tools (:func:`host_web`), the unbound ``ask_user``
    (Claude Code's ``AskUserQuestion``; a delegation gets it bound to the command's way
    of asking a person), then each plugin's tools. A plugin tool named like a shell, web
    or ``ask_user`` tool replaces it (a plugin may bring its own ``tools_bash`` or
    ``tools_web``); any other name already taken is a :class:`PluginError`."""
    base = working_dir or Path.cwd()
    registry = {tool.name: tool for tool in (*tools_file(base), *tools_file_extra(base))}
    replaceable: set[str] = set()
    shell_tools = (shell if shell is not None else host_shell(base)).tools
    for tool in (*shell_tools, *host_web(), ask_user):
        registry[tool.name] = tool
        replaceable.add(tool.name)
    for module in plugins:
        for tool in plugin_tools(module):
            if tool.name in replaceable:
                replaceable.discard(tool.name)  # the plugin's own shell or web tool wins
            elif tool.name in registry:
                raise PluginError(
                    f"plugin {module.__name__}: a tool named {tool.name!r} is already "
                    "registered; give it another name"
                )
            registry[tool.name] = tool
    return registry


def host_skill_registry(plugins: Sequence[ModuleType] = ()) -> dict[str, Skill | str]:
    """The skills registry: every plugin's ``skills`` attribute (a mapping of name to a
    Skill or an approved skill directory, or a function returning one), merged in order;
    a name two plugins define is a :class:`PluginError`."""
    registry: dict[str, Skill | str] = {}
    for module in plugins:
        value = getattr(module, "skills", None)
        if value is None:
            continue
        if callable(value):
            value = _call_attribute(module, "skills", value)
        if not isinstance(value, Mapping):
            raise PluginError(
                f"plugin {module.__name__}: 'skills' must be a mapping of name to Skill or "
                f"skill directory, got {type(value).__name__}"
            )
        for name, skill in value.items():
            if name in registry:
                raise PluginError(
                    f"plugin {module.__name__}: a skill named {name!r} is already registered"
                )
            registry[name] = skill
    return registry


def definitions_path_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot be read as definitions (it does not exist, or is a directory
    with no definition files at its top level), or ``None``. Commands exit with status 2
    on such a problem, before reading anything."""
    target = Path(path)
    try:
        is_dir, exists = target.is_dir(), target.exists()
    except (OSError, ValueError) as exc:
        return f"{str(target)!r} cannot be read: {exc}"
    if not exists:
        return f"{str(target)!r} does not exist"
    if is_dir:
        try:
            plugins = find_plugins(target)
            if plugins is not None:
                if not any(p.agent_files for p in plugins):
                    shown = ", ".join(p.name for p in plugins)
                    return f"{str(target)!r} holds plugins ({shown}) but none has agents"
                return None
            names = candidate_names(target, markdown=True)
        except DeputyError as exc:
            return str(exc)
        if not names:
            return (
                f"{str(target)!r} holds no definition files (*.yaml, *.yml or *.md at its "
                "top level; hidden files are skipped)"
            )
    return None


class _HostTools(Mapping[str, Tool]):
    """The host registry, except that ``values()`` (what a markdown file without a
    ``tools`` key gets: every host tool) is one placeholder, so that ``list`` can show
    ``(all host tools)`` instead of whatever the registry holds today."""

    def __init__(self, registry: Mapping[str, Tool]) -> None:
        self._registry = registry
        self.everything = Tool(
            "all_host_tools", ALL_HOST_TOOLS, {"type": "object"}, lambda **_: None
        )

    def __getitem__(self, key: str) -> Tool:
        return self._registry[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._registry)

    def __len__(self) -> int:
        return len(self._registry)

    def values(self) -> ValuesView[Tool]:
        return {ALL_HOST_TOOLS: self.everything}.values()

    def shown(self, definition: AgentDefinition) -> str:
        names = []
        for tool in definition.tools:
            if tool is self.everything:
                names.append(ALL_HOST_TOOLS)
            else:
                names.append(next(k for k, v in self._registry.items() if v is tool))
        names += definition.mcp_tools or ()
        return ", ".join(names) or "-"


def _host(
    args: argparse.Namespace, command: str
) -> tuple[_HostTools, dict[str, Skill | str]] | None:
    try:
        plugins = [import_plugin(target) for target in getattr(args, "plugin", None) or ()]
        return _HostTools(host_tool_registry(plugins)), host_skill_registry(plugins)
    except DeputyError as exc:
        print(f"deputy-runtime {command}: {exc}", file=sys.stderr)
        return None


def _line(problem: DefinitionProblem, strict: bool) -> str:
    where = str(problem.path) if problem.line is None else f"{problem.path}:{problem.line}"
    if problem.severity is Severity.WARNING and not strict:
        return f"{where}: warning: {problem.message}"
    return f"{where}: {problem.message}"


def validate(args: argparse.Namespace) -> int:
    """Check files and directories as ``run`` would read them; print every problem.

    Each problem is one line, ``path:line: reason`` for errors and ``path:line: warning:
    reason`` for warnings (with ``--strict`` warnings count as errors and print like
    them); stderr ends with how many files were checked. Exit status 0 without errors,
    1 with errors, 2 for a path that does not exist, a directory without definition
    files, or a plugin that fails.
    """
    usage = [reason for raw in args.paths if (reason := definitions_path_problem(raw))]
    if usage:
        for reason in usage:
            print(f"deputy-runtime validate: {reason}", file=sys.stderr)
        return EXIT_USAGE
    host = _host(args, "validate")
    if host is None:
        return EXIT_USAGE
    try:
        servers = read_mcp_servers(getattr(args, "mcp_config", None), Path.cwd())
    except McpSetupError as exc:
        print(f"deputy-runtime validate: {exc}", file=sys.stderr)
        return EXIT_USAGE
    strict = bool(getattr(args, "strict", False))
    folders: list[PluginFolder] = []
    for raw in args.paths:
        try:
            found = find_plugins(Path(raw)) if Path(raw).is_dir() else None
        except DeputyError:
            found = None  # the definitions' report names a broken manifest
        folders += found or ()
    # A plugin's own servers are known to its agents, as run attaches them.
    known = (*servers, *(name for plugin in folders for name in _server_names(plugin)))
    try:
        report = validate_definitions(args.paths, *host, known_mcp_servers=known)
    except DeputyError as exc:  # a plugin's registry entry the readers refuse
        print(f"deputy-runtime validate: {exc}", file=sys.stderr)
        return EXIT_USAGE
    problems = list(report.problems)
    if folders:
        # A plugin folder's hooks and MCP files are checked as run reads them.
        from .pluginfolders import folder_problems  # it builds on this module

        problems += folder_problems(folders)
    if getattr(args, "mcp_tools", False):
        from .mcpcheck import check_mcp_tools

        problems += check_mcp_tools(report.definitions, servers)
    for problem in problems:
        print(_line(problem, strict))
    errors = sum(1 for p in problems if p.severity is Severity.ERROR)
    warnings = len(problems) - errors
    if strict:
        errors, warnings = errors + warnings, 0
    parts = [f"{errors} error(s)"] if errors else []
    parts += [f"{warnings} warning(s)"] if warnings else []
    print(f"checked {report.files} file(s): {', '.join(parts) or 'no problems'}", file=sys.stderr)
    return EXIT_ERRORS if errors else EXIT_OK


def _server_names(plugin: PluginFolder) -> list[str]:
    """The names of a plugin's MCP servers as its ``.mcp.json`` writes them (either shape)."""
    data = plugin.mcp_servers
    if isinstance(data, Mapping) and isinstance(data.get("mcpServers"), Mapping):
        data = data["mcpServers"]
    return [str(name) for name in data] if isinstance(data, Mapping) else []


def list_agents(args: argparse.Namespace) -> int:
    """Print the definitions in a directory (default ``.deputy/agents``): name, model,
    tools, permission mode, request limit; then every file that did not load, with its
    problems.

    Tools resolve as in ``run`` (file tools plus ``--plugin`` tools). TOOLS is ``-`` for
    none and ``(all host tools)`` for a markdown file without a ``tools`` key. Exit
    status 0, 1 if some file did not load, 2 for a missing directory, one without
    definition files, or a plugin that fails.
    """
    reason = definitions_path_problem(args.directory)
    if reason is None and not Path(args.directory).is_dir():
        reason = f"{args.directory!r} is a file; list takes a directory of definitions"
    if reason is not None:
        print(f"deputy-runtime list: {reason}", file=sys.stderr)
        return EXIT_USAGE
    found_host = _host(args, "list")
    if found_host is None:
        return EXIT_USAGE
    host, skills = found_host
    try:
        found = collect_agent_definitions(args.directory, host, skills, markdown=True)
    except DeputyError as exc:
        print(f"deputy-runtime list: {exc}", file=sys.stderr)
        return EXIT_USAGE
    rows = [("NAME", "MODEL", "TOOLS", "PERMISSION", "MAX REQUESTS")]
    for definition in found.definitions.values():
        rows.append(
            (
                definition.name,
                definition.model,
                host.shown(definition),
                definition.permission_mode or "(lead's)",
                "-" if definition.max_requests is None else str(definition.max_requests),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
    bad = sorted({p.path for p in found.errors})
    if bad:
        print(f"\n{len(bad)} file(s) did not load:")
        for problem in found.problems:
            if problem.path in bad:
                print(f"  {_line(problem, strict=False)}")
    return EXIT_ERRORS if bad else EXIT_OK


def schema(args: argparse.Namespace) -> int:
    """Print the JSON Schema of definition format versions 1 and 2."""
    print(json.dumps(AGENT_DEFINITION_SCHEMA, indent=2))
    return 0
