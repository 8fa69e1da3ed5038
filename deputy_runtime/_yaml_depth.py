"""How deeply a YAML text nests its collections, checked before anything is composed.

libyaml's composer recurses in C once per nesting level, so every reader of YAML in the
package (definition files, markdown frontmatter, skill files) checks the depth on the
event stream first. This module depends only on PyYAML, so all of them can import it.
"""

from __future__ import annotations

from typing import Any

import yaml

try:
    from yaml import CSafeLoader as BaseLoader
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml import SafeLoader as BaseLoader  # type: ignore[assignment]

__all__ = [
    "BaseLoader",
    "Mark",
    "is_libyaml_depth_limit",
    "may_nest_deeper",
    "nesting_problem",
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
