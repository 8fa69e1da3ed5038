"""Agent Skills: named instructions an agent loads on demand, plus the tools they bring.

An agent given skills lists their names and descriptions in its system prompt and gets a
``load_skill`` tool that returns a skill's instructions only when the model asks for them,
so unused skills cost no context. Skill paths named in a definition are resolved through
the host's registry and loaded (``skill_load``) only when an agent is built.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec
import yaml

from ._yaml_depth import SCALAR_ERRORS, plain_int, sexagesimal_tag, shape_problem
from .errors import SkillError, ToolArgumentError
from .tools import Tool, schema_validator

__all__ = ["Skill", "skill_load", "skills_prompt_section", "skills_tool"]


class Skill(msgspec.Struct, frozen=True, eq=False):
    """A loaded skill. Compares by identity, like tools."""

    name: str
    description: str
    instructions: str
    tools: tuple[Tool, ...] = ()
    path: Path | None = None


#: Largest SKILL.md read (instructions are meant to be short; resources hold the bulk).
SKILL_MAX_BYTES = 256 * 1024
SKILL_FILE = "SKILL.md"
#: Skill names follow the Agent Skills format: letters, digits, '-', '_' (1-64).
SKILL_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}\Z")
SKILL_DESCRIPTION_MAX = 1024
_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MAX_NESTING = 64


class _Loader(_BaseLoader):  # type: ignore[misc]
    """The safe loader with the definition files' integer rule: plain decimal of at most
    18 digits, so no huge or base-60 int is ever built (see ``plain_int``)."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        return sexagesimal_tag(kind, value, implicit) or super().resolve(kind, value, implicit)


def _plain_int(loader: Any, node: yaml.ScalarNode) -> int:
    return plain_int(node.value)


_Loader.add_constructor("tag:yaml.org,2002:int", _plain_int)


def skill_load(path: str | os.PathLike[str]) -> Skill:
    """Load an Agent Skills directory (or its ``SKILL.md``) into a :class:`Skill`.

    ``SKILL.md`` starts with YAML frontmatter between ``---`` lines holding ``name`` and
    ``description`` (other keys such as ``license`` are allowed and ignored); the rest is the
    instructions.

    Args:
        path: The skill directory, or its ``SKILL.md``.

    Returns:
        The skill.

    Raises:
        SkillError: Any problem (not a regular UTF-8 file of at most 256 KiB, bad
            frontmatter, a missing name or description); the error names the path.
    """
    if "\0" in os.fspath(path):
        raise SkillError(f"{path!r}: a path cannot contain a NUL character")
    given = Path(path)
    file = given / SKILL_FILE if given.is_dir() else given
    text = _read_skill_file(file)
    meta, body = _split_frontmatter(text, file)
    name = meta.get("name")
    if not isinstance(name, str) or not SKILL_NAME_PATTERN.match(name):
        raise SkillError(
            f"{file}: frontmatter 'name' must be 1-64 letters, digits, '-' or '_', got {name!r}"
        )
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise SkillError(f"{file}: frontmatter 'description' must be a non-empty string")
    if len(description) > SKILL_DESCRIPTION_MAX:
        raise SkillError(
            f"{file}: frontmatter 'description' is {len(description)} characters; the "
            f"limit is {SKILL_DESCRIPTION_MAX}"
        )
    instructions = body.strip()
    if not instructions:
        raise SkillError(f"{file}: the instructions after the frontmatter are empty")
    return Skill(
        name=name,
        description=" ".join(description.split()),
        instructions=instructions,
        path=Path(os.path.realpath(file.parent)),
    )


def _read_skill_file(file: Path) -> str:
    try:
        st = os.stat(file)
    except FileNotFoundError:
        raise SkillError(
            f"{file}: skill file not found (expected a directory with {SKILL_FILE})"
        ) from None
    except (OSError, ValueError) as exc:  # ValueError: a name the OS cannot encode
        why = getattr(exc, "strerror", None) or exc
        raise SkillError(f"{file}: cannot read skill file ({why})") from None
    if not stat.S_ISREG(st.st_mode):
        raise SkillError(f"{file}: not a regular file")
    if st.st_size > SKILL_MAX_BYTES:
        raise SkillError(f"{file}: {st.st_size} bytes is over the {SKILL_MAX_BYTES}-byte limit")
    try:
        # O_NONBLOCK: a FIFO swapped in after the stat must not hang the host.
        fd = os.open(file, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise SkillError(f"{file}: not a regular file")
            raw = handle.read(SKILL_MAX_BYTES + 1)
    except OSError as exc:
        raise SkillError(f"{file}: cannot read skill file ({exc.strerror})") from None
    if len(raw) > SKILL_MAX_BYTES:
        raise SkillError(f"{file}: over the {SKILL_MAX_BYTES}-byte limit")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SkillError(f"{file}: not valid UTF-8 (byte {exc.start})") from None


def _split_frontmatter(text: str, file: Path) -> tuple[dict[str, Any], str]:
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillError(f"{file}: must start with '---' YAML frontmatter (name, description)")
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            break
    else:
        raise SkillError(f"{file}: the frontmatter has no closing '---' line")
    frontmatter = "".join(lines[1:i])
    # Checked before loading: libyaml's composer recurses in C, one frame per level, and
    # an oversized list or mapping is refused before its values are built.
    shape = shape_problem(frontmatter, _MAX_NESTING)
    if shape is not None:
        reason, mark = shape
        where = f"line {mark[0] + 1}" if mark else "somewhere"
        if reason is None:
            reason = f"the frontmatter is nested more than {_MAX_NESTING} levels deep"
            raise SkillError(f"{file}: {reason} ({where}); flatten it")
        raise SkillError(f"{file}: frontmatter ({where}): {reason}")
    try:
        meta = yaml.load(frontmatter, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        raise SkillError(f"{file}: invalid YAML frontmatter{where}: {exc}") from None
    except SCALAR_ERRORS as exc:  # an int that is not plain decimal, '!!bool maybe', ...
        detail = f" ({exc})" if str(exc) else ""
        raise SkillError(
            f"{file}: invalid YAML frontmatter: a value could not be read{detail}; quote "
            "values meant as text (integers must be plain decimal of at most 18 digits)"
        ) from None
    if not isinstance(meta, dict):
        raise SkillError(f"{file}: the frontmatter must be a mapping with name and description")
    return meta, "".join(lines[i + 1 :])


def _check_skills(skills: Iterable[Skill]) -> dict[str, Skill]:
    by_name: dict[str, Skill] = {}
    for skill in skills:
        if not isinstance(skill, Skill):
            raise SkillError(f"expected Skill objects, got {type(skill).__name__}")
        if skill.name in by_name:
            raise SkillError(f"two skills are named {skill.name!r}")
        by_name[skill.name] = skill
    return by_name


def skills_tool(skills: Iterable[Skill]) -> Tool:
    """The read-only ``load_skill(name)`` tool returning a skill's instructions.

    An unknown name is a tool error listing the available names, so the model can retry.

    Args:
        skills: The skills the tool can load.

    Returns:
        The ``load_skill`` tool.

    Raises:
        SkillError: Two skills share a name.
    """
    by_name = _check_skills(skills)
    folded = {name.lower(): skill for name, skill in by_name.items()}
    names = sorted(by_name)

    def load_skill(name: str) -> str:
        skill = by_name.get(name) or folded.get(name.strip().lower())
        if skill is None:
            raise ToolArgumentError(
                f"argument 'name': unknown skill {name!r}; available skills: "
                + (", ".join(names) or "none")
            )
        if skill.path is None:
            return skill.instructions
        return (
            f"{skill.instructions}\n\n[Skill directory: {skill.path}. Paths in these "
            "instructions are relative to it.]"
        )

    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "name": {
                "type": "string",
                "description": "The skill to load.",
                **({"examples": names[:1]} if names else {}),
            }
        },
        "required": ["name"],
        "additionalProperties": False,
    }
    return Tool(
        name="load_skill",
        description=(
            "Load a skill's full instructions by name. Load a skill before doing a task "
            "it covers; the available skills are listed in the system prompt."
        ),
        parameters=parameters,
        function=load_skill,
        read_only=True,
        idempotent=True,
        validator=schema_validator(parameters, "load_skill"),
    )


def skills_prompt_section(skills: Iterable[Skill]) -> str:
    """The system-prompt section listing skills by name and description.

    Args:
        skills: The skills an agent has.

    Returns:
        The section's text, or ``""`` when there are no skills.

    Raises:
        SkillError: Two skills share a name.
    """
    by_name = _check_skills(skills)
    if not by_name:
        return ""
    lines = [
        "# Skills",
        "",
        "These skills are available. Before a task a skill covers, call load_skill with "
        "its name to read its instructions.",
        "",
    ]
    lines += [f"- {skill.name}: {skill.description}" for skill in by_name.values()]
    return "\n".join(lines)
