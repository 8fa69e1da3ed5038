"""A griffe extension for the API reference: Sphinx cross-reference roles become code.

The package's docstrings name other objects with Sphinx roles (:class:`Chat`,
:func:`~deputy_runtime.chat.chat`), which Markdown would show verbatim. This turns each
role into inline code with the name a reader sees (the last component when the target
starts with ``~``), so the docstrings stay readable in an editor and in the site.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|data|attr|mod|exc|obj|const):`([^`]+)`")


def _shown(match: re.Match[str]) -> str:
    target = match.group(1).strip()
    if target.startswith("~"):
        target = target[1:].rsplit(".", 1)[-1]
    return f"`{target}`"


class SphinxRoles(griffe.Extension):
    """Rewrite Sphinx roles in every docstring as the reference loads it."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(_shown, obj.docstring.value)
