"""Strict YAML loading and canonical YAML dumping for definition files.

Loading uses libyaml's C composer when available (``CSafeLoader``) and builds Python values
with a small constructor of its own instead of PyYAML's: it knows only the core tags, has
no alias support, rejects duplicate keys at any depth and limits nesting. That is both the
strictness the format needs and faster than PyYAML's generic constructor, so strictness
costs nothing over a bare ``yaml.load``. Typing follows YAML 1.1 as PyYAML resolves it
(unquoted ``yes`` is a boolean, ``123`` an integer).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .._yaml_depth import (
    MAX_INT_DIGITS,
    MAX_ITEMS,
    MAX_KEYS,
    SCALAR_ERRORS,
    Mark,
    may_nest_deeper,
    nesting_problem,
    plain_int,
    sexagesimal_tag,
    shape_problem,
)
from .._yaml_depth import BaseLoader as _BaseLoader
from .._yaml_depth import is_libyaml_depth_limit as _is_libyaml_depth_limit
from .._yaml_depth import yaml_mark as _mark

__all__ = [
    "MAX_INT_DIGITS",
    "MAX_ITEMS",
    "MAX_KEYS",
    "SCALAR_ERRORS",
    "YAML11_BOOL",
    "YAML_LINE_BREAK",
    "Mark",
    "Marks",
    "YAMLProblem",
    "dump_yaml",
    "load_yaml",
    "may_nest_deeper",
    "nesting_problem",
    "plain_int",
    "reader_problem",
    "scalar_problem",
    "sexagesimal_tag",
    "shape_problem",
    "tag_problem_message",
]

_CORE = "tag:yaml.org,2002:"
_STR = _CORE + "str"
_MERGE = _CORE + "merge"
_MAX_DEPTH = 64
_SHOWN_TAGS = "!!str, !!int, !!float, !!bool, !!null, !!seq, !!map"


class YAMLProblem(Exception):
    """A strictness or syntax problem, with the 1-based position where it was found."""

    def __init__(self, message: str, mark: Mark | None) -> None:
        super().__init__(message)
        self.message = message
        self.mark = mark


class StrictLoader(_BaseLoader):
    """A safe loader (libyaml-based when available) that builds values strictly.

    Only :meth:`load_strict` is meant to be used; PyYAML's own construction is bypassed.
    """

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        tag = sexagesimal_tag(kind, value, implicit)
        return tag or super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]

    def load_strict(self) -> tuple[Any, Marks]:
        """Compose the single document and build it; return the value and its marks."""
        node = self.get_single_node()
        if node is None:
            return None, Marks(None)
        if isinstance(node, MappingNode):
            return self._mapping(node, 0), Marks(node)
        return self._build(node, 0), Marks(None)

    def _build(self, node: Node, depth: int) -> Any:
        if isinstance(node, ScalarNode):
            tag = node.tag
            if tag == _STR:
                return node.value
            construct = _SCALAR_CONSTRUCTORS.get(tag)
            if construct is None:
                raise _tag_problem(node)
            try:
                return construct(self, node)
            except SCALAR_ERRORS as exc:  # e.g. the date 2020-13-45 or '!!bool maybe'
                raise YAMLProblem(
                    scalar_problem(tag, node.value, exc), _mark(node.start_mark)
                ) from None
        if depth >= _MAX_DEPTH:
            raise _depth_problem(_mark(node.start_mark))
        if isinstance(node, SequenceNode):
            if node.tag != _CORE + "seq":
                raise _tag_problem(node)
            return [self._build(child, depth + 1) for child in node.value]
        if isinstance(node, MappingNode):
            return self._mapping(node, depth + 1)
        raise _tag_problem(node)  # pragma: no cover - the composer makes only these three

    def _mapping(self, node: MappingNode, depth: int) -> dict[Any, Any]:
        if node.tag != _CORE + "map":
            raise _tag_problem(node)
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                raise YAMLProblem(
                    "Mapping keys must be plain scalars such as 'name', not sequences or mappings",
                    _mark(key_node.start_mark),
                )
            if key_node.tag == _MERGE:
                raise YAMLProblem(
                    "Merge keys ('<<') are not supported; write the keys out in full",
                    _mark(key_node.start_mark),
                )
            key = self._build(key_node, depth)
            if key in result:
                raise _duplicate_problem(node, key_node, key)
            result[key] = self._build(value_node, depth)
        return result


class Marks:
    """Positions in the top-level mapping, looked up only when a problem is reported.

    ``get(key)`` is where the value of top-level ``key`` starts, ``get(("key", key))``
    where the key itself is, and ``get((key, index))`` where element ``index`` of a
    top-level sequence is.
    """

    __slots__ = ("_node",)

    def __init__(self, node: MappingNode | None) -> None:
        self._node = node

    def get(self, at: object) -> Mark | None:
        if self._node is None:
            return None
        if isinstance(at, tuple) and len(at) == 2:
            first, second = at
        else:
            first, second = at, None
        for key_node, value_node in self._node.value:
            if first == "key" and second is not None and key_node.value == second:
                return _mark(key_node.start_mark)
            if key_node.value != first:
                continue
            if second is None:
                return _mark(value_node.start_mark)
            if (
                isinstance(second, int)
                and isinstance(value_node, SequenceNode)
                and 0 <= second < len(value_node.value)
            ):
                return _mark(value_node.value[second].start_mark)
            return _mark(value_node.start_mark)
        return None


def _tag_problem(node: Node) -> YAMLProblem:
    tag = node.tag
    if tag == _MERGE:
        return YAMLProblem(
            "'<<' is a YAML merge key; quote it (\"<<\") if you meant the text",
            _mark(node.start_mark),
        )
    return YAMLProblem(tag_problem_message(tag), _mark(node.start_mark))


def tag_problem_message(
    tag: str,
    *,
    where: str = "definition files",
    allowed: str = f"the core YAML tags ({_SHOWN_TAGS})",
) -> str:
    """Why the tag ``tag`` (a full tag such as ``tag:yaml.org,2002:python/name``) is refused
    and which tags ``where`` may use instead."""
    shown = "!!" + tag[len(_CORE) :] if tag.startswith(_CORE) else tag
    return (
        f"The tag {shown} is not allowed; {where} may only use {allowed}, because other "
        "tags can make loaders run code"
    )


def _duplicate_problem(node: MappingNode, key_node: ScalarNode, key: object) -> YAMLProblem:
    first = next((k for k, _ in node.value if k.value == key_node.value), None)
    where = _mark(first.start_mark) if first is not None and first is not key_node else None
    at = f" (first at line {where[0]})" if where else ""
    return YAMLProblem(
        f"Duplicate key {key!r}{at}; each key may appear only once in a mapping",
        _mark(key_node.start_mark),
    )


def _construct_plain_int(loader: Any, node: ScalarNode) -> int:
    return plain_int(node.value)


_S = yaml.constructor.SafeConstructor
_SCALAR_CONSTRUCTORS: dict[str, Callable[[Any, ScalarNode], Any]] = {
    _CORE + "null": _S.construct_yaml_null,
    _CORE + "bool": _S.construct_yaml_bool,
    _CORE + "int": _construct_plain_int,
    _CORE + "float": _S.construct_yaml_float,
    # Implicitly resolved dates are built so the field check can say "quote it".
    _CORE + "timestamp": _S.construct_yaml_timestamp,
}


_EXPECTED = {
    "bool": "true or false (YAML 1.1 also reads yes/no and on/off)",
    "int": f"a plain decimal whole number such as 42 or -7 (at most {MAX_INT_DIGITS} digits)",
    "float": "a number such as 1.5, -2e3 or .inf",
    "timestamp": "a date such as 2001-12-14 or a date and time such as 2001-12-14 21:59:43",
}


def scalar_problem(tag: str, value: str, exc: BaseException) -> str:
    """One line saying that ``value`` is not a valid ``tag`` value and what would be."""
    kind = tag[len(_CORE) :] if tag.startswith(_CORE) else tag
    # Only ValueError/OverflowError say something useful ("day is out of range for
    # month"); KeyError('maybe') or "string index out of range" would only confuse.
    detail = f" ({exc})" if isinstance(exc, ValueError | OverflowError) and str(exc) else ""
    expected = _EXPECTED.get(kind, f"a valid !!{kind} value")
    shown = repr(value) if len(value) <= 40 else f"{value[:32]!r}... ({len(value):,} characters)"
    return (
        f"The value {shown} could not be read as !!{kind}{detail}; expected {expected}; "
        f"to keep it as text, quote it and drop any !!{kind} tag"
    )


#: Line breaks as YAML readers count them for their marks (YAML 1.1 includes NEL, LS, PS).
YAML_LINE_BREAK = re.compile("\r\n|[\n\r\x85\u2028\u2029]")
_C0_NAMES = (
    "NUL", "SOH", "STX", "ETX", "EOT", "ENQ", "ACK", "BEL", "BS", "TAB", "LF", "VT", "FF",
    "CR", "SO", "SI", "DLE", "DC1", "DC2", "DC3", "DC4", "NAK", "SYN", "ETB", "CAN", "EM",
    "SUB", "ESC", "FS", "GS", "RS", "US",
)  # fmt: skip
_CONTROL_NAMES = {**dict(enumerate(_C0_NAMES)), 0x7F: "DEL"}


def reader_problem(exc: yaml.reader.ReaderError, text: str) -> tuple[str, Mark | None]:
    """A one-line reason and the 1-based position for a character YAML does not allow.

    PyYAML's own text spans two lines and names only an offset ("position N", counted in
    characters by the pure-Python reader and in UTF-8 bytes by libyaml).
    """
    if not isinstance(exc.character, int):  # pragma: no cover - only for bytes input
        return f"The file is not valid YAML: {exc.reason}", None
    code = exc.character
    if code < 0xA0:
        name = _CONTROL_NAMES.get(code)
        what = f"control character U+{code:04X}" + (f" ({name})" if name else "")
        why = "control characters are not allowed, only tab and line breaks"
    else:  # U+FFFE, U+FFFF or a lone surrogate
        what, why = f"character U+{code:04X}", "it is not a printable character"
    reason = (
        f"The {what} is not allowed in YAML ({why}); remove it, or write the escape "
        f'"\\u{code:04X}" inside a double-quoted string'
    )
    index = _reader_index(exc.position, chr(code), text)
    if index is None:  # pragma: no cover - the reader found the character in this text
        return reason, None
    breaks = list(YAML_LINE_BREAK.finditer(text, 0, index))
    line_start = breaks[-1].end() if breaks else 0
    return reason, (len(breaks) + 1, index - line_start + 1)


def _reader_index(position: int, char: str, text: str) -> int | None:
    # Either reader stops at the first occurrence of the character, so the offset is
    # checked against the text (as characters, then as UTF-8 bytes) with a search as the
    # fallback.
    as_bytes = len(text.encode("utf-8", "surrogatepass")[:position].decode("utf-8", "ignore"))
    for index in (position, as_bytes):
        if 0 <= index < len(text) and text[index] == char:
            return index
    found = text.find(char)
    return found if found >= 0 else None


def _reject_anchors(text: str) -> None:
    # An anchor needs a '&', so most files skip this second, event-level pass entirely.
    parser = _BaseLoader(text)
    try:
        while parser.check_event():
            event = parser.get_event()
            assert event is not None  # check_event() said there is one
            anchor = getattr(event, "anchor", None)
            if anchor is not None:
                kind = "alias" if isinstance(event, yaml.AliasEvent) else "anchor"
                raise YAMLProblem(
                    f"YAML {kind}s (&{anchor} / *{anchor}) are not supported; write the "
                    "value out in full",
                    _mark(event.start_mark),
                )
    finally:
        parser.dispose()


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def _depth_problem(mark: Mark | None) -> YAMLProblem:
    return YAMLProblem(f"Values are nested more than {_MAX_DEPTH} levels deep; flatten them", mark)


def load_yaml(text: str) -> tuple[Any, Marks]:
    """Load one strict YAML document; raise :class:`YAMLProblem` on any violation.

    Rejected: syntax errors, more than one document, anchors and aliases, tags other than
    the core ones, merge keys, non-scalar keys, duplicate keys at any depth, and nesting
    deeper than 64 levels. Returns the value and its :class:`Marks`.
    """
    try:
        # The builder counts from the root mapping's values (event depth 2 is its depth
        # 0), so this stops at the very node the builder would report.
        shape = shape_problem(text, _MAX_DEPTH + 1)
        if shape is not None:
            reason, mark = shape
            raise _depth_problem(mark) if reason is None else YAMLProblem(_sentence(reason), mark)
        if "&" in text:
            _reject_anchors(text)
        loader = StrictLoader(text)
        try:
            return loader.load_strict()
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        if _is_libyaml_depth_limit(exc):
            raise _depth_problem(_mark(exc.problem_mark)) from None
        raise _syntax_problem(exc, text) from None
    except yaml.reader.ReaderError as exc:
        raise YAMLProblem(*reader_problem(exc, text)) from None
    except yaml.YAMLError as exc:
        raise YAMLProblem(f"The file is not valid YAML: {exc}", None) from None


def _syntax_problem(exc: yaml.MarkedYAMLError, text: str) -> YAMLProblem:
    mark = _mark(exc.problem_mark) or _mark(exc.context_mark)
    problem = exc.problem or "invalid YAML"
    index = getattr(exc.problem_mark, "index", None)
    if isinstance(index, int) and 0 <= index < len(text) and text[index] == "\t":
        problem += " (a tab; YAML indentation must use spaces)"
    if "expected a single document" in (exc.context or "") or "another document" in problem:
        return YAMLProblem(
            "Expected exactly one YAML document, but the file has more ('---' starts a new "
            "document); keep one definition per file",
            mark,
        )
    if "alias" in problem:
        return YAMLProblem(
            f"YAML aliases are not supported ({problem}); write the value out in full", mark
        )
    context = f" {exc.context}" if exc.context else ""
    return YAMLProblem(f"The file is not valid YAML:{context} {problem}".strip(), mark)


class _CanonicalDumper(yaml.SafeDumper):
    """Block style, literal block scalars for multi-line text, keys in the given order.

    The pure-Python dumper is used on purpose: its output does not depend on whether
    libyaml is installed, so the same definition always gives the same bytes.
    """


#: Every string YAML 1.1 reads as a boolean when unquoted (https://yaml.org/type/bool.html).
#: PyYAML's resolver leaves out y/Y/n/N, but full YAML 1.1 readers type them as booleans
#: too, so the writers quote all of them and every reader gets the same string.
YAML11_BOOL = re.compile(
    r"y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF"
)

# Line breaks other than LF are folded or normalised by YAML readers in every style but
# double-quoted, where they are escaped (\N, \L, \P, \r).
_OTHER_BREAKS = frozenset("\r\x85\u2028\u2029")


def _style(value: str, literal: bool) -> str | None:
    if YAML11_BOOL.fullmatch(value):
        # PyYAML would leave y/n plain (its resolver does not know them); quote them all.
        return "'"
    if not _OTHER_BREAKS.isdisjoint(value):
        return '"'
    if "\n" in value:
        # The emitter itself falls back to a quoted style when a literal block cannot hold
        # the text exactly; the writer's round-trip check verifies the result either way.
        return "|" if literal else '"'
    return None


def _literal_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar(_STR, value, style=_style(value, True))


def _quoted_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar(_STR, value, style=_style(value, False))


_CanonicalDumper.add_representer(str, _literal_str)


class _QuotedDumper(_CanonicalDumper):
    """Fallback used when a literal block would not read back identically."""


_QuotedDumper.add_representer(str, _quoted_str)


def dump_yaml(record: dict[str, Any], *, literal: bool = True) -> str:
    """Dump ``record`` as canonical block YAML text (LF line endings, no folding)."""
    return yaml.dump(
        record,
        Dumper=_CanonicalDumper if literal else _QuotedDumper,
        default_flow_style=False,
        sort_keys=False,
        allow_unicode=True,
        width=2**31 - 1,
        line_break="\n",
        explicit_start=False,
    )
