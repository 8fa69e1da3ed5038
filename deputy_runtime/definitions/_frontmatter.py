"""Splitting a markdown agent file into YAML frontmatter and body.

The rules are those of the common agent-file frontmatter parsers, so real Claude Code
agent files split the same way here as elsewhere: the text must start with ``---`` at offset
0; lines are split with :meth:`str.splitlines` (so CR, CRLF, VT, FF, FS/GS/RS, NEL,
U+2028 and U+2029 all end a line); the first line and the closing fence are lines whose
whitespace-stripped text is exactly ``---`` (the first such line wins, even inside a YAML
block scalar); frontmatter and body are the lines in between and after, joined with
``\\n``. The frontmatter is loaded with PyYAML's safe loader (YAML 1.1 typing, duplicate
keys: last wins). Where a lenient parser would silently return "no agent", this raises
:class:`~deputy_runtime.errors.DefinitionFileError` with the line; YAML aliases are
rejected too (they let a small file expand without bound when coerced to text).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import DefinitionFileError
from ._problems import ProblemLog
from ._yaml import (
    SCALAR_ERRORS,
    plain_int,
    reader_problem,
    scalar_problem,
    sexagesimal_tag,
    shape_problem,
    tag_problem_message,
)

__all__ = [
    "LINE_BREAKS",
    "MAX_BODY_LINES",
    "MAX_DESCRIPTION_LENGTH",
    "MAX_NESTING",
    "Frontmatter",
    "parse_frontmatter",
]

#: Longest description kept, in code points; longer ones are cut.
MAX_DESCRIPTION_LENGTH = 1024
#: Most body lines read as the prompt; a longer body is cut with a pointer to the file.
MAX_BODY_LINES = 1000
#: Deepest nesting of lists and mappings accepted in frontmatter (the YAML format's limit).
MAX_NESTING = 64
#: Every character :meth:`str.splitlines` treats as a line boundary.
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"

_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):  # type: ignore[misc]
    """PyYAML's safe loader, except that a core scalar its constructor cannot read (such
    as ``!!int 1x`` or ``!!bool maybe``) is a ConstructorError marked at the value, like
    every other YAML error, instead of a bare exception without a position, and that a
    long base-60 shaped scalar is resolved at once (see :func:`sexagesimal_tag`)."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        return sexagesimal_tag(kind, value, implicit) or super().resolve(kind, value, implicit)


def _located(construct: Any) -> Any:
    def build(loader: Any, node: yaml.ScalarNode) -> Any:
        try:
            return construct(loader, node)
        except SCALAR_ERRORS as exc:
            problem = _lower_first(scalar_problem(node.tag, node.value, exc))
            raise yaml.constructor.ConstructorError(None, None, problem, node.start_mark) from None

    return build


def _lower_first(text: str) -> str:
    # The shared messages are sentences; here they follow "invalid YAML in frontmatter: ".
    return text[:1].lower() + text[1:]


def _plain_int(loader: Any, node: yaml.ScalarNode) -> int:
    return plain_int(node.value)


def _wrap_scalar_constructors() -> None:
    for kind in ("bool", "int", "float", "timestamp"):
        tag = "tag:yaml.org,2002:" + kind
        construct = _plain_int if kind == "int" else _BaseLoader.yaml_constructors[tag]
        # add_constructor copies the table first, so PyYAML's own loaders are unchanged.
        _Loader.add_constructor(tag, _located(construct))


_wrap_scalar_constructors()

_CORE = "tag:yaml.org,2002:"
# The tags the safe loader builds (YAML 1.1's standard ones), as an error message lists them.
_SAFE_TAGS = ", ".join(
    "!!" + tag[len(_CORE) :]
    for tag in _Loader.yaml_constructors
    if isinstance(tag, str) and tag.startswith(_CORE)
)


def _undefined_tag(loader: Any, node: yaml.Node) -> Any:
    """Refuse a tag the safe loader has no constructor for, saying which tags it has."""
    problem = tag_problem_message(
        node.tag, where="frontmatter", allowed=f"the standard YAML tags ({_SAFE_TAGS})"
    )
    raise yaml.constructor.ConstructorError(None, None, _lower_first(problem), node.start_mark)


_Loader.add_constructor(None, _undefined_tag)

# Errors the safe loader can raise on hostile input besides YAMLError: a scalar
# constructor's own errors (should one escape the wrapper above), deep nesting in the
# pure-Python loader (RecursionError).
_LOAD_ERRORS = (yaml.YAMLError, *SCALAR_ERRORS, TypeError, RecursionError)


@dataclass(frozen=True)
class Frontmatter:
    """A split and loaded agent file.

    ``data`` is the frontmatter mapping as PyYAML built it; ``lines`` maps each top-level
    key to the 1-based file line of its (last) occurrence and ``item_lines`` maps a key
    whose value is a sequence to the lines of its items; ``body`` is the raw body (lines
    after the closing fence joined with ``\\n``, not yet stripped).
    """

    data: dict[Any, Any]
    body: str
    body_line: int
    lines: dict[str, int] = field(default_factory=dict)
    item_lines: dict[str, list[int]] = field(default_factory=dict)

    def line(self, key: str, index: int | None = None) -> int | None:
        """The file line of ``key`` (or of its ``index``-th item), if known."""
        if index is not None:
            items = self.item_lines.get(key, [])
            if 0 <= index < len(items):
                return items[index]
        return self.lines.get(key)


def _split(text: str, path: Path) -> tuple[str, str, int]:
    """Return (frontmatter text, raw body, 1-based line of the closing fence)."""
    hint = (
        "a markdown agent file must start with a line '---', then YAML frontmatter, then "
        "a closing line '---', then the prompt"
    )
    if not text:
        raise DefinitionFileError(f"no YAML frontmatter: the file is empty; {hint}", path=path)
    lines = text.splitlines()
    if not text.startswith("---") or lines[0].strip() != "---":
        first = lines[0] if lines else ""
        extra = _fence_hint(lines)
        raise DefinitionFileError(
            f"no YAML frontmatter: the first line is {first[:40]!r}, expected '---'{extra}; {hint}",
            path=path,
            line=1,
        )
    for index in range(1, len(lines)):
        if lines[index].strip() == "---":
            return "\n".join(lines[1:index]), "\n".join(lines[index + 1 :]), index + 1
    raise DefinitionFileError(
        "no YAML frontmatter: the '---' on line 1 is never closed; add a line containing "
        "only '---' after the frontmatter (a line such as '--- # note' does not count)",
        path=path,
        line=1,
    )


def _fence_hint(lines: list[str]) -> str:
    """How to fix a file whose ``---`` is not its very first line."""
    fence = next((i for i, line in enumerate(lines[:6]) if line.strip() == "---"), None)
    if fence is None or any(line.strip() for line in lines[:fence]):
        # Most likely not an agent file at all, e.g. a README among the agents.
        return (
            "; if this is not an agent file, move it out of the agents directory or hide "
            "it with a leading '.'"
        )
    fixes = []
    if fence:
        fixes.append("the leading blank line" if fence == 1 else f"the {fence} leading blank lines")
    if lines[fence][:1].isspace():
        fixes.append("the indentation before '---' (and before the frontmatter lines)")
    return (
        f" (remove {' and '.join(fixes)}: the file must start with '---' at its very first "
        "character)"
    )


def _reject_aliases(root: yaml.Node, path: Path, offset: int) -> None:
    # The composer resolves an alias to the very node its anchor names, so a node reached
    # twice is an alias (this also catches recursive anchors). Nodes are visited in
    # document order, iteratively (no recursion limit); an alias is reported at the line of
    # the key (or of the sequence) that refers to it, since its own mark is the anchor's.
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, int]] = [(root, root.start_mark.line)]
    while stack:
        node, line = stack.pop()
        if id(node) in seen:
            raise DefinitionFileError(
                "YAML aliases (*name) are not supported in agent files; write the value out",
                path=path,
                line=line + offset,
            )
        seen.add(id(node))
        children: list[tuple[yaml.Node, int]] = []
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                children += [(key, key.start_mark.line), (value, key.start_mark.line)]
        elif isinstance(node, yaml.SequenceNode):
            children = [(item, line) for item in node.value]
        stack.extend(reversed(children))


def _yaml_error(exc: BaseException, yaml_text: str, path: Path, offset: int) -> DefinitionFileError:
    if isinstance(exc, RecursionError):
        return DefinitionFileError("frontmatter is nested too deeply", path=path)
    if isinstance(exc, yaml.reader.ReaderError):
        reason, mark = reader_problem(exc, yaml_text)
        # The frontmatter's line 1 is the file's line 2 (after the opening fence).
        line, column = (mark[0] + offset - 1, mark[1]) if mark else (None, None)
        return DefinitionFileError(
            f"invalid YAML in frontmatter: {_lower_first(reason)}",
            path=path,
            line=line,
            column=column,
        )
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    line = column = None
    hint = ""
    if mark is not None:
        line, column = mark.line + offset, mark.column + 1
        lines = yaml_text.split("\n")
        # libyaml's messages do not always say the offending character was a tab.
        if mark.line < len(lines) and "\t" in lines[mark.line][: mark.column + 1]:
            hint = " (indent YAML with spaces, not tabs)"
    return DefinitionFileError(
        f"invalid YAML in frontmatter: {problem}{hint}", path=path, line=line, column=column
    )


def _locate(root: yaml.MappingNode, offset: int) -> tuple[dict[str, int], dict[str, list[int]]]:
    lines: dict[str, int] = {}
    item_lines: dict[str, list[int]] = {}
    for key, value in root.value:
        if isinstance(key, yaml.ScalarNode) and isinstance(key.value, str):
            lines[key.value] = key.start_mark.line + offset
            if isinstance(value, yaml.SequenceNode):
                item_lines[key.value] = [item.start_mark.line + offset for item in value.value]
            else:
                item_lines.pop(key.value, None)
    return lines, item_lines


def _check_shape(yaml_text: str, path: Path, offset: int) -> None:
    # Before composing: libyaml's composer recurses in C, one frame per level, and an
    # oversized list or mapping is refused before hundreds of thousands of values are built.
    shape = shape_problem(yaml_text, MAX_NESTING)
    if shape is None:
        return
    reason, mark = shape
    if reason is None:
        reason = f"values are nested more than {MAX_NESTING} levels deep; flatten them"
    raise DefinitionFileError(
        f"frontmatter {reason}" if reason.startswith("values") else f"frontmatter: {reason}",
        path=path,
        line=mark[0] + offset - 1 if mark else None,
        column=mark[1] if mark else None,
    )


def parse_frontmatter(text: str, path: Path, log: ProblemLog | None = None) -> Frontmatter:
    """Split ``text`` (already decoded, BOM removed) and load its frontmatter mapping.

    Frontmatter that is not valid YAML only because a one-line top-level value contains
    ``: `` without quotes (``description: Use when...Triggers on: 'x'``), which Claude
    Code loads, is read again with those values quoted; each such line becomes a warning
    in ``log``. Every other YAML error stays an error.
    """
    yaml_text, body, fence_line = _split(text, path)
    offset = 2  # frontmatter line 0 is file line 2 (line 1 is the opening fence)
    _check_shape(yaml_text, path, offset)
    try:
        root, data = _load(yaml_text, path, offset)
    except DefinitionFileError as original:
        quoted, changed = _quote_unquoted_colons(yaml_text)
        if not changed:
            raise
        try:
            root, data = _load(quoted, path, offset)
        except DefinitionFileError:
            keys = {index + offset: key for index, key in changed}
            if original.line not in keys:
                raise original from None
            key = keys[original.line]
            raise DefinitionFileError(
                f"{original.reason} (the value of {key!r} contains ': ': put it in double "
                f'quotes, {key}: "...")',
                path=path,
                line=original.line,
                column=original.column,
            ) from None
        if log is not None:
            for index, key in changed:
                log.warn(
                    f"the value of {key!r} contains ': ' without quotes, which is not valid "
                    "YAML; it was read as text (as Claude Code reads it); put the value in "
                    f'double quotes ({key}: "...") to make the frontmatter valid YAML',
                    line=index + offset,
                    field=key,
                )
    if root is None or data is None:
        raise DefinitionFileError(
            "frontmatter is empty; expected a YAML mapping such as 'name: reviewer' and "
            "'description: ...' between the '---' lines",
            path=path,
            line=1,
        )
    if not isinstance(data, dict) or not isinstance(root, yaml.MappingNode):
        kind = type(data).__name__
        raise DefinitionFileError(
            f"frontmatter must be a YAML mapping of keys to values, got a {kind}",
            path=path,
            line=offset,
        )
    lines, item_lines = _locate(root, offset)
    return Frontmatter(data, body, fence_line + 1, lines, item_lines)


def _load(yaml_text: str, path: Path, offset: int) -> tuple[Any, Any]:
    loader = _Loader(yaml_text)
    data = None
    try:
        try:
            root = loader.get_single_node()
            if root is not None:
                _reject_aliases(root, path, offset)
                data = loader.construct_document(root)
        except DefinitionFileError:
            raise
        except _LOAD_ERRORS as exc:
            raise _yaml_error(exc, yaml_text, path, offset) from None
    finally:
        loader.dispose()
    return root, data


# A top-level ``key: value`` line whose value is a plain (unquoted) one-line scalar.
_PLAIN_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*):[ \t]+(.*)\Z")
# A value starting with one of these is quoted, a collection, a block, a tag, an anchor or
# an alias, or a comment: not a plain scalar.
_NOT_PLAIN = tuple("\"'[{|>&*!#%@`")


def _quote_unquoted_colons(yaml_text: str) -> tuple[str, list[tuple[int, str]]]:
    """The text with every plain one-line top-level value that contains ``': '`` quoted,
    and the (0-based line, key) of each line changed. Lines whose value continues on an
    indented next line are left alone: they are not one-line values."""
    lines = yaml_text.split("\n")
    changed: list[tuple[int, str]] = []
    for index, line in enumerate(lines):
        match = _PLAIN_LINE.match(line)
        if match is None:
            continue
        key, value = match[1], match[2].rstrip(" \t")
        if value.startswith(_NOT_PLAIN) or value.startswith("- "):
            continue
        if ": " not in value and not value.endswith(":"):
            continue
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if following[:1].isspace() and following.strip():
            continue
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        lines[index] = f'{key}: "{escaped}"'
        changed.append((index, key))
    return "\n".join(lines), changed
