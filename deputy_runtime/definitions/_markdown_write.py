"""Writing AgentDefinitions as markdown agent files, exactly or not at all.

The writer emits frontmatter that every reader of Claude-Code-style agent files (this
package's included) splits and types the same way (no line of it strips to ``---``, no
exotic line separators, strings quoted where YAML 1.1 would retype them, no aliases),
reads its own output back before installing it, and refuses a definition the format
cannot carry instead of writing something that would load differently. Installation is
atomic, as for YAML files.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ..errors import DefinitionError, DefinitionFileError
from ._files import check_path_argument, install_atomically
from ._frontmatter import LINE_BREAKS, MAX_BODY_LINES, MAX_DESCRIPTION_LENGTH
from ._markdown_read import build_definition, parse_markdown
from ._model import FIELD_NAMES, AgentDefinition
from ._registry import (
    SkillRegistry,
    ToolRegistry,
    check_skill_registry,
    check_tool_registry,
    registry_key,
)
from ._yaml import YAML11_BOOL

__all__ = [
    "UNCARRIED_FIELDS",
    "agent_definition_to_markdown",
    "markdown_text",
    "surrounding_whitespace",
    "whitespace_losses",
]

#: AgentDefinition fields a markdown file cannot carry (when not ``None``): Claude Code's
#: ``memory`` key names a memory scope (user/project/local), not memory text.
UNCARRIED_FIELDS = ("memory",)

# deputy permission mode -> the key written (Claude Code's name where one matches exactly).
_PERMISSION_NAMES = {
    "standard": "default",
    "plan": "plan",
    "full": "bypassPermissions",
    "readonly": "readonly",
}
_EXOTIC_BREAKS = LINE_BREAKS.replace("\n", "")


def agent_definition_to_markdown(
    definition: AgentDefinition,
    path: str | os.PathLike[str],
    tools: Mapping[str, Any] | None = None,
    skills: Mapping[str, Any] | None = None,
    overwrite: bool = False,
) -> Path:
    """Write ``definition`` as a markdown agent file, atomically.

    The prompt becomes the body and, like the description, loses surrounding whitespace
    (markdown readers strip it).

    Args:
        definition: The definition to write.
        path: The destination ``.md`` file.
        tools: The registry whose keys name the definition's tools (each object must match
            exactly one entry).
        skills: The registry whose keys name its skills.
        overwrite: Replace an existing file; without it an existing file is never replaced,
            even one created concurrently.

    Returns:
        The path written.

    Raises:
        DefinitionFileError: The format cannot carry the definition exactly (``memory``
            set, a prompt over 1000 lines or with line separators other than ``\\n``, a
            description over 1024 characters; one error names every such field, and nothing
            is written), a tool or skill has no single registry entry, or the file exists.
    """
    dest = check_path_argument(path)
    tool_registry = check_tool_registry(tools, dest)
    skill_registry = check_skill_registry(skills, dest)
    if not isinstance(definition, AgentDefinition):
        raise DefinitionError(
            f"definition: expected an AgentDefinition, got {type(definition).__name__}"
        )
    if not isinstance(overwrite, bool):
        raise DefinitionFileError(f"overwrite must be True or False, got {overwrite!r}", path=dest)
    text = markdown_text(definition, dest, tool_registry, skill_registry)
    return install_atomically(dest, text.encode("utf-8"), overwrite)


def markdown_text(
    definition: AgentDefinition,
    path: Path,
    tool_registry: ToolRegistry,
    skill_registry: SkillRegistry,
    *,
    exact_whitespace: bool = False,
) -> str:
    """The markdown file for ``definition``, checked to read back to the same definition.

    Every field the format cannot carry is named in one DefinitionFileError. The prompt
    and description lose surrounding whitespace (markdown readers strip it) unless
    ``exact_whitespace`` is true: then such whitespace is one more field it cannot carry.
    """
    problems = _uncarried(definition)
    if exact_whitespace:
        for field, reason in whitespace_losses(definition).items():
            problems[field] = f"{problems[field]}; {reason}" if field in problems else reason
    try:
        text = _render(definition, path, tool_registry, skill_registry)
        back = _read_back(text, definition, path, tool_registry, skill_registry)
    except DefinitionFileError:
        if not problems:
            raise
        back = {}  # the fields already found are reason enough; report those
    # A field that cannot be carried also reads back differently; name it once.
    problems |= {field: reason for field, reason in back.items() if field not in problems}
    if problems:
        raise _uncarried_error(problems, path)
    return text


def _render(
    definition: AgentDefinition,
    path: Path,
    tool_registry: ToolRegistry,
    skill_registry: SkillRegistry,
) -> str:
    record: dict[str, Any] = {
        "name": definition.name,
        "description": definition.description.strip(),
        "tools": _Flow(
            _keys(definition.tools, tool_registry, "tools", path) + list(definition.mcp_tools or ())
        ),
    }
    if definition.disallowed_tools is not None:
        record["disallowedTools"] = _Flow(definition.disallowed_tools)
    record["model"] = definition.model
    if definition.permission_mode is not None:
        record["permissionMode"] = _PERMISSION_NAMES[definition.permission_mode]
    if definition.max_requests is not None:
        record["maxTurns"] = definition.max_requests
    if definition.skills:
        record["skills"] = _Flow(_keys(definition.skills, skill_registry, "skills", path))
    if definition.mcp_servers is not None:
        record["mcpServers"] = _Flow(definition.mcp_servers)
    if definition.initial_prompt is not None:
        record["initialPrompt"] = definition.initial_prompt
    if definition.params is not None:
        record["model_args"] = _plain(definition.params)
    if definition.hooks is not None:
        record["hooks"] = _plain(definition.hooks)
    if definition.color is not None:
        record["color"] = definition.color
    if definition.output_schema is not None and not isinstance(definition.output_schema, type):
        record["output_schema"] = _plain(definition.output_schema)
    if definition.output_retries is not None:
        record["output_retries"] = definition.output_retries
    if definition.compact_at is not None:
        record["compact_at"] = definition.compact_at
    frontmatter = yaml.dump(
        record,
        Dumper=_Dumper,
        default_flow_style=False,
        sort_keys=False,
        allow_unicode=True,
        width=2**31 - 1,
        line_break="\n",
    )
    return f"---\n{frontmatter}---\n{definition.prompt.strip()}\n"


def _uncarried(definition: AgentDefinition) -> dict[str, str]:
    """Field -> reason for every field a markdown file cannot carry at all."""
    problems: dict[str, str] = {}
    if definition.memory is not None:
        problems["memory"] = (
            "memory cannot be written to a markdown agent file: Claude Code's 'memory' key "
            "names a memory scope (user, project or local), not memory entries; move the "
            "entries into the prompt, leave memory out (null), or keep this definition in YAML"
        )
    if isinstance(definition.output_schema, type):
        problems["output_schema"] = (
            f"output_schema is the Python type {definition.output_schema.__qualname__}, "
            "which an agent file cannot hold: give the definition a JSON Schema mapping "
            "instead, or keep it in Python"
        )
    prompt = definition.prompt.strip()
    breaks = sorted({f"U+{ord(c):04X}" for c in prompt if c in _EXOTIC_BREAKS})
    lines = len(prompt.splitlines())
    prompt_problems = []
    if breaks:
        prompt_problems.append(
            f"prompt cannot be written to markdown exactly: it contains line separators "
            f"({', '.join(breaks)}) that markdown readers turn into plain newlines; use "
            "plain newlines or keep this definition in YAML"
        )
    if lines > MAX_BODY_LINES:
        prompt_problems.append(
            f"prompt cannot be written to markdown: it has {lines} lines and markdown agent "
            f"files carry at most {MAX_BODY_LINES} (readers truncate the rest); shorten it "
            "or keep this definition in YAML"
        )
    if prompt_problems:
        problems["prompt"] = "; ".join(prompt_problems)
    size = len(definition.description.strip())
    if size > MAX_DESCRIPTION_LENGTH:
        problems["description"] = (
            f"description cannot be written to markdown: it has {size} characters and "
            f"markdown readers keep only the first {MAX_DESCRIPTION_LENGTH}; shorten it or "
            "keep this definition in YAML"
        )
    return problems


def surrounding_whitespace(definition: AgentDefinition) -> dict[str, str]:
    """Field -> what surrounds it (such as ``ends with '\\n'``), for the prompt and the
    description when they have leading or trailing whitespace.

    A prompt's one final line break is not counted: it is what a YAML ``prompt: |``
    block ends with, it means nothing to a model, and a markdown body ends with one too.
    """
    found = {}
    for field in ("prompt", "description"):
        value: str = getattr(definition, field)
        if field == "prompt" and value.endswith("\n") and not value.endswith("\n\n"):
            value = value[:-1]
        lead = value[: len(value) - len(value.lstrip())]
        trail = value[len(value.rstrip()) :]
        ends = [f"starts with {_shown(lead)}"] if lead else []
        ends += [f"ends with {_shown(trail)}"] if trail else []
        if ends:
            found[field] = " and ".join(ends)
    return found


def whitespace_losses(definition: AgentDefinition) -> dict[str, str]:
    """Field -> reason for the prompt and description if they have surrounding whitespace,
    which markdown readers strip (so a markdown file cannot carry it)."""
    losses = {}
    for field, ends in surrounding_whitespace(definition).items():
        what = "the body" if field == "prompt" else "the description"
        losses[field] = (
            f"{field} cannot be written to markdown exactly: it {ends}, and markdown "
            f"readers strip {what}, so that whitespace would be lost; remove it or keep "
            "this definition in YAML"
        )
    return losses


def _shown(whitespace: str) -> str:
    """Whitespace as a short quoted literal, or counted when it is long."""
    if len(whitespace) <= 8:
        return repr(whitespace)
    return f"{len(whitespace)} whitespace characters ({whitespace[:4]!r}...)"


def _uncarried_error(problems: dict[str, str], path: Path) -> DefinitionFileError:
    fields = sorted(problems, key=FIELD_NAMES.index)
    if len(fields) == 1:
        return DefinitionFileError(problems[fields[0]], path=path)
    return DefinitionFileError(
        f"{len(fields)} fields cannot be written to a markdown agent file "
        f"({', '.join(fields)}): " + "; ".join(problems[field] for field in fields),
        path=path,
    )


def _keys(
    objects: tuple[Any, ...], registry: Mapping[str, Any], kind: str, path: Path
) -> list[str]:
    return [registry_key(kind, obj, registry, path) for obj in objects]


def _read_back(
    text: str,
    definition: AgentDefinition,
    path: Path,
    tool_registry: ToolRegistry,
    skill_registry: SkillRegistry,
) -> dict[str, str]:
    """Field -> reason for every field ``text`` would not read back as ``definition`` has it."""
    try:
        back = build_definition(parse_markdown(text, path), tool_registry, skill_registry)
    except DefinitionFileError as exc:
        raise DefinitionFileError(
            f"the definition cannot be written as markdown: it would not read back ({exc.reason})",
            path=path,
        ) from None
    expected = definition.replace(
        description=definition.description.strip(), prompt=definition.prompt.strip()
    )
    return {
        field: (
            f"{field} cannot be written to markdown exactly: it would read back as "
            f"{getattr(back, field)!r} instead of {getattr(expected, field)!r}; change the "
            "value or keep this definition in YAML"
        )
        for field in FIELD_NAMES
        if getattr(back, field) != getattr(expected, field)
    }


class _Flow(list[Any]):
    """A list written in flow style (``[a, b]``), as name lists usually are."""


class _Dumper(yaml.SafeDumper):
    """Block mappings, flow name lists, no aliases, safe string styles."""

    def ignore_aliases(self, data: Any) -> bool:
        return True  # readers reject aliases


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style: str | None = None
    if YAML11_BOOL.fullmatch(value):
        style = "'"  # PyYAML leaves y/n plain; full YAML 1.1 readers make them booleans
    elif any(c in _EXOTIC_BREAKS for c in value):
        style = '"'  # escaped, so the frontmatter's lines split the same everywhere
    elif "\n" in value:
        # A literal block line that strips to '---' would close the frontmatter early.
        style = '"' if any(line.strip() == "---" for line in value.split("\n")) else "|"
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


def _represent_flow(dumper: yaml.SafeDumper, value: _Flow) -> yaml.SequenceNode:
    return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=True)


_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(_Flow, _represent_flow)


def _plain(value: Any) -> Any:
    """Frozen params (mappingproxy, tuples) as plain dicts and lists for the dumper."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    return value
