"""grep_files: a linear-time search of the text files under a path.

The pattern runs on RE2 (see ``_patterns``), so each line costs time linear in its
length whatever the pattern. Each file is searched up to ``grep_file_bytes`` and the
whole call up to ``grep_scan_bytes``; the answer says when either cap cut the search
short. Files are opened without following symlinks and never block on a FIFO, and the
search checks for cancellation between files and every few thousand lines, so an
abandoned search stops promptly.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from ..errors import ToolArgumentError
from ._cancel import raise_if_cancelled
from ._fileread import BINARY_PROBE_BYTES, walk
from ._fileroot import Root, open_regular
from ._glob import GlobMatcher, compile_glob
from ._limits import FileToolLimits
from ._patterns import LineMatcher, compile_pattern

__all__ = ["GREP_MAX_LINE_CHARS", "grep"]

#: Longest matching line shown (in characters); longer ones end in '...'.
GREP_MAX_LINE_CHARS = 300
_LINES_PER_CHECK = 4096


def grep(
    root: Root,
    limits: FileToolLimits,
    pattern: str,
    path: str,
    glob: str | None,
    ignore_case: bool,
) -> str:
    regex = compile_pattern(pattern, ignore_case)
    names = compile_glob(glob) if glob else None
    real = root.resolve(path)
    files: Iterator[str]
    if os.path.isdir(real):
        files = (os.path.join(d, f) for d, _, found in walk(real) for f in found)
    elif os.path.exists(real):
        files = iter([real])
    else:
        raise ToolArgumentError(f"argument 'path': {path!r} does not exist")
    matches: list[str] = []
    partial: list[str] = []
    budget = limits.grep_scan_bytes
    stopped = (
        f"[stopped after searching {limits.grep_scan_bytes} bytes, the limit of one call; "
        "narrow the path or glob to search the rest]"
    )
    for file in files:
        raise_if_cancelled()
        rel = root.rel(file)
        if names is not None and not _selected(names, rel):
            continue
        if len(matches) >= limits.grep_matches:
            matches.append(f"[stopped after {limits.grep_matches} matches; narrow the search]")
            break
        if budget <= 0:
            matches.append(stopped)
            break
        cap = min(limits.grep_file_bytes, budget)
        searched = _grep_file(regex, file, rel, matches, limits.grep_matches, cap)
        budget -= abs(searched)
        if searched < 0 and cap < limits.grep_file_bytes:  # cut by the call's budget
            matches.append(stopped)
            break
        if searched < 0:
            partial.append(rel)
    matches = matches[: limits.grep_matches + 1]
    if partial:
        shown = ", ".join(partial[:5]) + (
            f" and {len(partial) - 5} more" if len(partial) > 5 else ""
        )
        matches.append(f"[searched only the start of large files: {shown}]")
    if not matches:
        return f"No matches for {pattern!r} in {root.rel(real)}"
    return "\n".join(matches)


def _selected(names: GlobMatcher, rel: str) -> bool:
    return names.matches(os.path.basename(rel)) or names.matches(rel)


def _grep_file(
    regex: LineMatcher, file: str, rel: str, matches: list[str], most: int, cap: int
) -> int:
    """Search the first ``cap`` bytes of ``file``; the bytes read, negative when cut short.

    Symlinks, FIFOs and other non-regular files are skipped, as are binary files (a NUL
    byte near the start).
    """
    fd = open_regular(file)
    if fd is None:
        return 0
    try:
        with os.fdopen(fd, "rb") as handle:
            head = handle.read(min(cap, BINARY_PROBE_BYTES))
            if b"\x00" in head:  # binary: only the probe counts against the budget
                return len(head)
            data = head + handle.read(cap - len(head))
            more = len(data) == cap and bool(handle.read(1))
    except OSError:
        return 0
    lines = data.split(b"\n")
    if (more and len(lines) > 1) or lines[-1] == b"":
        lines.pop()  # half a line cut by the cap, or the empty rest after a final newline
    for no, raw in enumerate(lines, 1):
        if no % _LINES_PER_CHECK == 0:
            raise_if_cancelled()
        line = raw.removesuffix(b"\r")
        if regex.search(line):
            text = line.decode("utf-8", errors="replace")
            if len(text) > GREP_MAX_LINE_CHARS:
                text = text[:GREP_MAX_LINE_CHARS] + "..."
            matches.append(f"{rel}:{no}: {text}")
            if len(matches) >= most:
                break
    return -len(data) if more else len(data)
