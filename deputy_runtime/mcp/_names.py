"""Tool names for MCP tools: ``mcp__<server>__<tool>``, always a valid tool name.

Rules (the same for every server, so a name can be written in a definition before the
server runs):

* Characters outside ``A-Z a-z 0-9 _ -`` in the server's tool name become ``_``.
* A name longer than 64 characters is cut and ends in ``_`` plus 8 hex digits of the
  SHA-256 of the server's original tool name, so it stays unique and stable.
* When two of one server's tools would get the same name (after the two rules above, or
  because they differ only in case or punctuation, which the permission lists ignore), every
  tool of the clash but the first in sorted order of original names gets the hash suffix.

``mcp__<server>`` (or ``mcp__<server>__*``) in a tool list stands for every tool of that
server; :func:`expand_mcp_names` turns such entries into concrete names.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from ..tools import TOOL_NAME_PATTERN

__all__ = ["MCP_PREFIX", "expand_mcp_names", "mcp_tool_names", "server_of"]

MCP_PREFIX = "mcp__"
_MAX = 64
_BAD = re.compile(r"[^A-Za-z0-9_-]")
_LOOSE = re.compile(r"[^a-z0-9]+")


def _suffix(original: str) -> str:
    return "_" + hashlib.sha256(original.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def _compose(prefix: str, original: str, hashed: bool) -> str:
    clean = _BAD.sub("_", original) or "_"
    name = prefix + clean
    if not hashed and len(name) <= _MAX:
        return name
    tail = _suffix(original)
    return name[: _MAX - len(tail)] + tail


def _loose(name: str) -> str:
    """The key the permission lists compare names by (case and punctuation ignored)."""
    return _LOOSE.sub("_", name.lower())


def mcp_tool_names(server: str, tool_names: Iterable[str]) -> dict[str, str]:
    """Map each of ``server``'s tool names to its runtime tool name (see module rules).

    Args:
        server: The server's name, the middle part of ``mcp__<server>__<tool>``.
        tool_names: The server's own tool names; duplicates count once.

    Returns:
        Each distinct original name mapped to its runtime name, in sorted order of the
        original names. The runtime names are distinct even when compared ignoring case
        and punctuation.
    """
    prefix = f"{MCP_PREFIX}{server}__"
    originals = sorted(set(tool_names))
    out: dict[str, str] = {}
    taken: set[str] = set()
    for original in originals:
        name = _compose(prefix, original, hashed=False)
        if _loose(name) in taken:
            name = _compose(prefix, original, hashed=True)
        # A second clash means a SHA-256 prefix collision; add more of the hash.
        extra = 0
        while _loose(name) in taken:
            extra += 1
            digest = hashlib.sha256(f"{extra}:{original}".encode()).hexdigest()[:8]
            name = name[: _MAX - 9] + "_" + digest
        assert TOOL_NAME_PATTERN.match(name), name
        taken.add(_loose(name))
        out[original] = name
    return out


def server_of(pattern: str) -> str | None:
    """The server a whole-server entry (``mcp__s`` or ``mcp__s__*``) grants, else ``None``."""
    if not pattern.startswith(MCP_PREFIX):
        return None
    rest = pattern[len(MCP_PREFIX) :]
    if rest.endswith("__*"):
        rest = rest[:-3]
    if not rest or "__" in rest:
        return None
    return rest


def expand_mcp_names(entries: Iterable[str], available: Iterable[str]) -> tuple[str, ...]:
    """``entries`` with each whole-server entry replaced by that server's tools.

    Args:
        entries: Tool list entries; ``mcp__<server>`` and ``mcp__<server>__*`` stand for
            every tool of that server, any other entry stands for itself.
        available: The tool names on offer (for example ``tool.name`` of every tool of
            the running sessions).

    Returns:
        The expanded entries: other entries kept as they are, order kept, duplicates
        dropped. A whole-server entry for a server with no tools on offer expands to
        nothing.
    """
    names = list(available)
    out: dict[str, None] = {}
    for entry in entries:
        server = server_of(entry)
        if server is None:
            out[entry] = None
            continue
        prefix = f"{MCP_PREFIX}{server}__"
        for name in names:
            if name.startswith(prefix):
                out[name] = None
    return tuple(out)
