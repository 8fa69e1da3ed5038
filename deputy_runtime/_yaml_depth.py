"""The shape and integer checks every YAML reader in the package shares.

libyaml's composer recurses in C once per nesting level, so every reader of YAML in the
package (definition files, markdown frontmatter, skill files) checks the depth, and the
size of every list and mapping, on the event stream first; all of them also read integers
only as plain decimal of bounded length. This module depends only on PyYAML, so all of
them can import it.
"""

from __future__ import annotations

import re
from typing import Any, Final

import yaml
from yaml.nodes import ScalarNode

try:
    from yaml import CSafeLoader as BaseLoader
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml import SafeLoader as BaseLoader  # type: ignore[assignment]

__all__ = [
    "MAX_INT_DIGITS",
    "MAX_ITEMS",
    "MAX_KEYS",
    "SCALAR_ERRORS",
    "BaseLoader",
    "Mark",
    "is_libyaml_depth_limit",
    "may_nest_deeper",
    "nesting_problem",
    "plain_int",
    "sexagesimal_tag",
    "shape_problem",
    "yaml_mark",
]

#: A 1-based (line, column) position in the file.
Mark = tuple[int, int]


def yaml_mark(node_mark: Any) -> Mark | None:
    """The 1-based (line, column) of a PyYAML mark, or ``None`` without one."""
    if node_mark is None:
        return None
    return (node_mark.line + 1, node_mark.column + 1)


#: Characters that open a collection: a flow '[' or '{', a block '-' entry, or the ':' or
#: '?' of a mapping key. Every collection needs at least one of its own.
_OPENERS = "[{-:?"


def may_nest_deeper(text: str, limit: int) -> bool:
    """Whether ``text`` could hold collections nested more than ``limit`` levels deep.

    A cheap, conservative bound (see :data:`_OPENERS`) so that most files skip the
    event-level pass of :func:`nesting_problem`.
    """
    return sum(map(text.count, _OPENERS)) > limit


def nesting_problem(text: str, limit: int) -> Mark | None:
    """Where ``text`` first nests collections more than ``limit`` levels deep, or ``None``.

    libyaml's composer recurses in C once per level (a few hundred bytes of C stack each,
    invisible to Python's recursion limit), so composing a deeply nested document can
    overflow a small thread stack and kill the process. Its parser is iterative, so the
    depth is checked on the event stream before anything is composed, by every reader of
    YAML; most files skip that pass (:func:`may_nest_deeper`). Syntax errors are left for
    the real load to report.
    """
    if not may_nest_deeper(text, limit):
        return None
    parser = BaseLoader(text)
    depth = 0
    try:
        while parser.check_event():
            event = parser.get_event()
            if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                depth += 1
                if depth > limit:
                    return yaml_mark(event.start_mark)
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                depth -= 1
    except yaml.MarkedYAMLError as exc:
        return yaml_mark(exc.problem_mark) if is_libyaml_depth_limit(exc) else None
    except yaml.YAMLError:
        return None
    finally:
        parser.dispose()
    return None


def is_libyaml_depth_limit(exc: yaml.MarkedYAMLError) -> bool:
    """Whether ``exc`` is libyaml refusing a document nested past its own limit.

    libyaml's scanner looks ahead, so past that limit (1000 levels) it fails before the
    parser emits the events that would have shown the depth.
    """
    return "maximum nesting depth" in (exc.problem or "")


_INT_TAG = "tag:yaml.org,2002:int"
# A long plain scalar of digits, ':' and '_' (with an optional fraction): YAML 1.1's
# base-60 number shape, which the resolver's backtracking patterns take many passes over.
_SEXAGESIMAL = re.compile(r"[-+]?[0-9][0-9_:]*:[0-9_:]*(?:\.[0-9_]*)?")
_LONG_SCALAR = 64


def sexagesimal_tag(kind: Any, value: Any, implicit: Any) -> str | None:
    """``!!int`` for a plain scalar longer than 64 characters shaped like a base-60 number,
    which the int constructor then refuses by name, else ``None`` (resolve as usual).

    Resolving such a value the usual way is linear but slow (a megabyte takes a large
    fraction of a second); one simple pattern decides it at once.
    """
    if (
        kind is ScalarNode
        and implicit[0]
        and isinstance(value, str)
        and len(value) > _LONG_SCALAR
        and _SEXAGESIMAL.fullmatch(value)
    ):
        return _INT_TAG
    return None


#: Most digits of an integer in a definition file: every field's range fits (max_requests
#: is at most 2**31 - 1; model parameters are small), and no huge int is ever built.
MAX_INT_DIGITS: Final = 18
_DECIMAL = re.compile(rf"[-+]?(?:0|[1-9][0-9]{{0,{MAX_INT_DIGITS - 1}}})\Z")
_INT_FORMS = (
    (re.compile(r"[-+]?0[xX]"), "hexadecimal notation is not accepted"),
    (re.compile(r"[-+]?0[oO]"), "octal notation is not accepted"),
    (re.compile(r"[-+]?0[bB]"), "binary notation is not accepted"),
    (re.compile(r"[^:]*:"), "YAML 1.1 reads digits separated by ':' as a base-60 number"),
    (re.compile(r"[^_]*_"), "'_' digit separators are not accepted"),
    (re.compile(r"[-+]?0[0-9]"), "YAML 1.1 reads a leading 0 as an octal number"),
)


def plain_int(text: str) -> int:
    """``text`` as an int if it is plain decimal of at most :data:`MAX_INT_DIGITS` digits.

    Anything else (hexadecimal, octal, binary, base-60, ``_`` separators, more digits)
    raises ValueError saying which form it is, after looking at no more than the start of
    the text: time is linear in the text's length and no large int is ever built (base-60
    conversion is quadratic and long ints cannot even be formatted into a message).
    """
    if _DECIMAL.match(text):
        return int(text)
    for pattern, why in _INT_FORMS:
        if pattern.match(text):
            raise ValueError(why)
    digits = text.lstrip("+-")
    if digits.isdigit():
        raise ValueError(f"more than {MAX_INT_DIGITS} digits")
    raise ValueError("")  # not a number at all: the expected form says enough


#: What PyYAML's core scalar constructors raise for a value they cannot read: ValueError
#: (``!!int 1x``, the date 2001-02-30), OverflowError, KeyError (``!!bool maybe``),
#: IndexError (an empty ``!!int`` or ``!!float``) and AttributeError (a ``!!timestamp``
#: that does not match the timestamp pattern).
SCALAR_ERRORS = (ValueError, OverflowError, LookupError, AttributeError)


#: Most entries of one sequence in a definition file (``tools``, ``memory``, a model
#: parameter's list): far more than a model accepts as tools or a prompt can use.
MAX_ITEMS: Final = 1024
#: Most keys of one mapping (the top level, ``params``/``model_args``, or any nested one).
MAX_KEYS: Final = 256
_NODE_EVENTS = (
    yaml.ScalarEvent,
    yaml.SequenceStartEvent,
    yaml.MappingStartEvent,
    yaml.AliasEvent,
)


def shape_problem(
    text: str, depth_limit: int, *, max_items: int = MAX_ITEMS, max_keys: int = MAX_KEYS
) -> tuple[str | None, Mark | None] | None:
    """The first place ``text`` nests deeper than ``depth_limit`` or holds a sequence of
    more than ``max_items`` entries or a mapping of more than ``max_keys`` keys, as a
    (reason, position) pair, where the reason is ``None`` for too deep a nesting (callers
    word that themselves); ``None`` if there is no such place (or the text has a syntax
    error, which the real load then reports).

    Runs on the parser's event stream before anything is composed (see
    :func:`nesting_problem` for why) and stops at the first violation, so an oversized
    list is refused after reading about ``max_items`` of its entries instead of building
    hundreds of thousands of values. Files with few structural characters skip the pass.
    """
    if sum(map(text.count, _OPENERS + ",")) <= min(depth_limit, max_items, max_keys):
        return None
    parser = BaseLoader(text)
    # One [is_mapping, child node count] per open collection.
    stack: list[list[Any]] = []
    top_key: str | None = None
    try:
        while parser.check_event():
            event = parser.get_event()
            if isinstance(event, _NODE_EVENTS) and stack:
                frame = stack[-1]
                frame[1] += 1
                if len(stack) == 1 and frame[0] and frame[1] % 2 == 1:
                    top_key = getattr(event, "value", None)
                problem = _size_problem(frame, len(stack), top_key, max_items, max_keys)
                if problem is not None:
                    return problem, yaml_mark(event.start_mark)
            if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                if len(stack) >= depth_limit:
                    return None, yaml_mark(event.start_mark)
                stack.append([isinstance(event, yaml.MappingStartEvent), 0])
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                stack.pop()
    except yaml.MarkedYAMLError as exc:
        return (None, yaml_mark(exc.problem_mark)) if is_libyaml_depth_limit(exc) else None
    except yaml.YAMLError:
        return None
    finally:
        parser.dispose()
    return None


def _size_problem(
    frame: list[Any], depth: int, top_key: str | None, max_items: int, max_keys: int
) -> str | None:
    is_mapping, count = frame
    if is_mapping and count > 2 * max_keys:
        limit, what = max_keys, "keys"
    elif not is_mapping and count > max_items:
        limit, what = max_items, "entries"
    else:
        return None
    if depth == 1:
        where = "the top-level mapping" if is_mapping else "the document"
    elif top_key is not None:
        where = f"the value of {top_key!r}" if depth == 2 else f"a value inside {top_key!r}"
    else:  # pragma: no cover - a collection below the top level always has a key
        where = "a value"
    return (
        f"{where} has more than {limit:,} {what}; a definition cannot use that many, so the "
        "file is refused before it is read further; shorten it"
    )
