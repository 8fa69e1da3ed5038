"""``deputy-runtime convert IN OUT``: convert a definition between YAML and markdown.

The format of each side comes from its extension (``.yaml``/``.yml`` or
``.md``/``.markdown``, any case; the table validate uses too). The command has no host,
so it has no tool or skill registry: it carries the tool and skill names of IN over to
OUT unchanged, through placeholder registries built from the names IN uses. Every field
both formats carry is kept exactly. A field the target cannot carry is an error naming it,
and nothing is written:

- markdown -> YAML: a markdown file without a ``tools`` key means "every tool the host
  registers", which a YAML definition cannot say (it lists its tools); add ``tools:`` to
  the markdown file first.
- YAML -> markdown: ``memory`` (Claude Code's ``memory`` key means something else), a
  prompt over 1000 lines or with line separators other than newline, a description over
  1024 characters, and leading or trailing whitespace of the prompt or description
  (markdown readers strip both). ``--strip-whitespace`` accepts losing that whitespace;
  each field that loses some is named in a warning.

Frontmatter keys deputy does not read (``color``, ``hooks``, ...) are not carried; the
command names them on stderr, and prints the markdown reader's warnings (an unquoted
``: `` in a value, a dropped ``Agent(...)`` entry, ...) the same way. So it does for a
markdown body over 1000 lines or a description over 1024 characters: the markdown reading
rules cut them, and the converted definition has what a reader gets, so a warning says so
(the exit status stays 0).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NamedTuple

from ..definitions import (
    MAX_BODY_LINES,
    MAX_DESCRIPTION_LENGTH,
    REGISTRY_KEY_PATTERN,
    AgentDefinition,
    ParsedMarkdown,
    ProblemLog,
    YAMLProblem,
    agent_definition_read,
    agent_definition_write,
    build_definition,
    definition_format,
    install_atomically,
    load_yaml,
    markdown_text,
    parse_markdown,
    read_definition_text,
    surrounding_whitespace,
    whitespace_losses,
)
from ..errors import DefinitionFileError, DeputyError
from ..tools import Tool

__all__ = ["convert", "placeholder_registries"]


def convert(args: argparse.Namespace) -> int:
    """Run ``convert``; return 0 on success, 1 for an invalid or uncarried definition,
    2 for an unsupported file extension."""
    source, destination = Path(args.source), Path(args.destination)
    formats = []
    for path in (source, destination):
        kind = definition_format(path)
        if kind is None:
            print(
                f"deputy-runtime convert: {path}: cannot tell the format from the extension "
                f"{path.suffix!r}; use .yaml, .yml, .md or .markdown",
                file=sys.stderr,
            )
            return 2
        formats.append(kind)
    warnings: list[str] = []
    options = _Options(bool(args.overwrite), bool(getattr(args, "strip_whitespace", False)))
    try:
        ignored = _convert(source, formats[0], destination, formats[1], options, warnings)
    except DeputyError as exc:
        _print_warnings(warnings)  # they may explain the error (e.g. a cut prompt)
        print(f"deputy-runtime convert: {exc}", file=sys.stderr)
        return 1
    _print_warnings(warnings)
    if ignored:
        print(
            f"deputy-runtime convert: note: {source}: frontmatter keys deputy does not read "
            f"were not carried over: {', '.join(ignored)}",
            file=sys.stderr,
        )
    print(f"wrote {destination}")
    return 0


class _Options(NamedTuple):
    overwrite: bool
    strip_whitespace: bool


def _print_warnings(warnings: list[str]) -> None:
    for warning in warnings:
        print(f"deputy-runtime convert: warning: {warning}", file=sys.stderr)


def _convert(
    source: Path,
    source_kind: str,
    destination: Path,
    kind: str,
    options: _Options,
    warnings: list[str],
) -> tuple[str, ...]:
    ignored: tuple[str, ...] = ()
    if source_kind == "markdown":
        text = read_definition_text(source, markdown=True)
        log = ProblemLog(source)
        parsed = parse_markdown(text, source, log)
        # The reader's own warnings, except for what it cut: said below in convert's terms.
        for problem in log.warnings:
            if problem.field not in parsed.truncated:
                where = source if problem.line is None else f"{source}:{problem.line}"
                warnings.append(f"{where}: {problem.message}")
        warnings.extend(_truncation_warnings(parsed))
        if parsed.tool_names is None:
            raise DefinitionFileError(
                "tools cannot be carried over: this markdown file has no 'tools' key, which "
                "means every tool the host registers; a definition file must list its tools. "
                "Add 'tools: [name, ...]' (or 'tools: []' for none) and convert again",
                path=source,
                line=1,
            )
        tools, skills = placeholder_registries(parsed.tool_names, parsed.skill_names)
        definition = build_definition(parsed, tools, skills)
        ignored = parsed.ignored_keys
        if kind != "markdown" and definition.hooks is not None:
            # A YAML definition has no hooks: they are named with what was not carried.
            definition = definition.replace(hooks=None)
            ignored = (*ignored, "hooks")
        if kind != "markdown" and definition.color is not None:
            definition = definition.replace(color=None)  # nor a colour
            ignored = (*ignored, "color")
    else:
        tools, skills = placeholder_registries(*_yaml_names(source))
        definition = agent_definition_read(source, tools, skills)
    try:
        if kind == "markdown":
            _write_markdown(definition, destination, tools, skills, options, warnings)
        else:
            agent_definition_write(definition, destination, tools, skills, options.overwrite)
    except DefinitionFileError as exc:
        # The writers speak to Python callers ("pass overwrite=True"); here it is a flag.
        if exc.path == destination and "overwrite=True" in exc.reason:
            reason = exc.reason.replace("pass overwrite=True", "pass --overwrite")
            raise DefinitionFileError(reason, path=destination) from None
        raise
    return ignored


def _write_markdown(
    definition: AgentDefinition,
    destination: Path,
    tools: dict[str, Tool],
    skills: dict[str, str],
    options: _Options,
    warnings: list[str],
) -> None:
    """Write the markdown file; surrounding whitespace of the prompt and description is an
    error naming the field, or with ``--strip-whitespace`` a warning per field."""
    losses = whitespace_losses(definition)
    exact = not options.strip_whitespace
    try:
        text = markdown_text(definition, destination, tools, skills, exact_whitespace=exact)
    except DefinitionFileError as exc:
        if not (exact and losses):
            raise
        fields = " and ".join(losses)
        raise DefinitionFileError(
            f"{exc.reason}. Pass --strip-whitespace to accept losing the surrounding "
            f"whitespace of the {fields}",
            path=exc.path,
        ) from None
    install_atomically(destination, text.encode("utf-8"), options.overwrite)
    if not exact:  # only once written: a warning about a file that was not would mislead
        for field, ends in surrounding_whitespace(definition).items():
            warnings.append(
                f"{destination}: {field} {ends}; markdown readers strip it, so that "
                "whitespace was dropped (--strip-whitespace)"
            )


def _truncation_warnings(parsed: ParsedMarkdown) -> list[str]:
    """Say what the markdown reading rules cut (description and body limits), and where."""
    source, fm, warnings = parsed.path, parsed.frontmatter, []
    if "description" in parsed.truncated:
        warnings.append(
            f"{source}:{fm.line('description')}: the description has "
            f"{parsed.truncated['description']} characters; the markdown reading rules keep "
            f"only the first {MAX_DESCRIPTION_LENGTH}, so the converted description is cut "
            f"there; shorten it to at most {MAX_DESCRIPTION_LENGTH} characters to keep all of it"
        )
    if "prompt" in parsed.truncated:
        warnings.append(
            f"{source}:{fm.body_line}: the body has {parsed.truncated['prompt']} lines; the "
            f"markdown reading rules read at most {MAX_BODY_LINES}, so the converted prompt "
            f"was cut at {MAX_BODY_LINES} lines and ends with a note pointing at this file; "
            f"shorten the body to at most {MAX_BODY_LINES} lines to keep all of it"
        )
    return warnings


def placeholder_registries(
    tool_names: tuple[str, ...] | list[str], skill_names: tuple[str, ...] | list[str]
) -> tuple[dict[str, Tool], dict[str, str]]:
    """Registries that resolve exactly the given names, for carrying names through.

    Each tool name maps to its own inert Tool (the tool's own name is irrelevant: writers
    look objects up by identity and write the registry key); each skill name maps to
    itself as a skill path. Names that are not valid registry keys are left out, so the
    reader reports them as it would with a real registry.
    """
    tools = {
        name: Tool(f"placeholder_{index}", f"stands for {name}", {"type": "object"}, _inert)
        for index, name in enumerate(dict.fromkeys(tool_names))
        if REGISTRY_KEY_PATTERN.match(name)
    }
    skills = {name: name for name in dict.fromkeys(skill_names) if REGISTRY_KEY_PATTERN.match(name)}
    return tools, skills


def _inert() -> None:
    """The function of a placeholder tool; conversion never calls it."""


def _yaml_names(source: Path) -> tuple[list[str], list[str]]:
    """The tool and skill names a YAML file references; empty if it cannot be parsed (the
    real reader then reports the problem)."""
    try:
        value, _ = load_yaml(read_definition_text(source))
    except (DeputyError, YAMLProblem):  # the reader then raises the precise, located error
        return [], []
    if not isinstance(value, dict):
        return [], []
    names: list[list[str]] = []
    for key in ("tools", "skills"):
        item = value.get(key)
        items = [item] if isinstance(item, str) else item if isinstance(item, list) else []
        names.append([entry for entry in items if isinstance(entry, str)])
    return names[0], names[1]
