"""read_file and list_files: bounded reads and listings inside the working directory.

read_file reads at most ``read_scan_bytes`` per call, including the lines it skips to
reach ``start_line`` and the rest of over-long lines, so a minified file, a huge log or
a sparse file with gigabytes of holes costs one bounded read, never a scan to its end.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import BinaryIO

from ..errors import ToolArgumentError
from ._cancel import raise_if_cancelled
from ._fileroot import Root, open_read
from ._limits import FileToolLimits

__all__ = ["BINARY_PROBE_BYTES", "SKIPPED_DIRS", "list_dir", "read_text", "walk"]

BINARY_PROBE_BYTES = 8192
#: Directories list_files (recursive) and grep_files skip: version control, virtual
#: environments and tool caches (searching them is slow and never what the task is about).
SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        "node_modules",
        ".venv",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".hypothesis",
        ".tox",
        ".nox",
    }
)
_SKIP_CHUNK = 1024 * 1024
_LINES_PER_CHECK = 4096


class _Scan:
    """Reads from one handle while counting bytes against a budget.

    ``exhausted`` is set when the budget stopped a read while the file had more.
    """

    def __init__(self, handle: BinaryIO, budget: int) -> None:
        self.handle = handle
        self.left = budget
        self.exhausted = False

    def readline(self, size: int) -> bytes:
        if self.left <= 0:
            self.exhausted = self.exhausted or bool(self.handle.read(1))
            return b""
        line = self.handle.readline(min(size, self.left))
        self.left -= len(line)
        return line

    def lines(self, cap: int) -> Iterator[tuple[bytes, bool]]:
        """Each line cut to ``cap`` bytes (flag set when cut), within the budget.

        The rest of a cut line is skipped only when the next line is asked for, so a
        caller that stops at a cut line never pays for reading past it.
        """
        while True:
            line = self.readline(cap + 1)
            if not line:
                return
            if len(line) <= cap:
                yield line, False
                continue
            yield line[:cap], True
            while not line.endswith(b"\n"):
                raise_if_cancelled()
                line = self.readline(_SKIP_CHUNK)
                if not line:
                    return


def read_text(
    root: Root, limits: FileToolLimits, path: str, start_line: int, max_lines: int | None
) -> str:
    if max_lines is not None and max_lines < 1:
        raise ToolArgumentError("argument 'max_lines': expected a number >= 1")
    real = root.resolve(path)
    shown = root.rel(real)
    fd = open_read(real, shown)
    cap = limits.read_bytes
    chunks: list[bytes] = []
    used = line_no = 0
    truncated = False
    cut_lines: list[int] = []
    with os.fdopen(fd, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if b"\x00" in handle.read(BINARY_PROBE_BYTES):
            return f"[{shown} is a binary file ({size} bytes); read_file shows text only]"
        handle.seek(0)
        scan = _Scan(handle, limits.read_scan_bytes)
        for line, cut in scan.lines(cap):
            line_no += 1
            if line_no < start_line:
                if line_no % _LINES_PER_CHECK == 0:
                    raise_if_cancelled()
                continue
            full = max_lines is not None and len(chunks) >= max_lines
            # The first line shown always fits (it is cut to the cap), so every call
            # makes progress and "read on" never repeats itself.
            if chunks and (full or used + len(line) > cap):
                truncated = True
                line_no -= 1
                break
            chunks.append(line)
            used += len(line)
            if cut:
                cut_lines.append(line_no)
    out_of_reach = (
        f"read_file reads at most {limits.read_scan_bytes} bytes of a file per call, so "
        "the rest is out of its reach; use grep_files to find text in it"
    )
    if not chunks and scan.exhausted:
        return f"[{shown} ({size} bytes): line {start_line} is not within the first " + (
            f"{limits.read_scan_bytes} bytes; {out_of_reach}]"
        )
    if start_line > 1 and not chunks:
        return f"[{shown} has {line_no} lines; start_line {start_line} is past the end]"
    text = b"".join(chunks).decode("utf-8", errors="replace")
    if cut_lines:
        text += f"\n[line {cut_lines[0]} is longer than {cap} bytes; showed its start]"
    if truncated:
        text += (
            f"\n[truncated: showed lines {start_line}-{line_no} of {shown} ({size} bytes in "
            f"total). Call read_file with start_line={line_no + 1} to read on.]"
        )
    elif scan.exhausted:
        text += f"\n[stopped in line {line_no} of {shown} ({size} bytes): {out_of_reach}]"
    return text


def walk(top: str) -> Iterator[tuple[str, list[str], list[str]]]:
    """``os.walk`` without following symlinks, skipping SKIPPED_DIRS, in sorted order.

    Checks for cancellation at each directory, so walking a tree of empty directories
    stops promptly too.
    """
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        raise_if_cancelled()
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS)
        yield dirpath, dirnames, sorted(filenames)


def list_dir(root: Root, limits: FileToolLimits, path: str, recursive: bool) -> str:
    try:
        return _list_unchecked(root, limits.list_entries, path, recursive)
    except OSError as exc:
        raise ToolArgumentError(f"{path!r} cannot be listed: {exc.strerror or exc}") from None


def _list_unchecked(root: Root, most: int, path: str, recursive: bool) -> str:
    real = root.resolve(path)
    if not os.path.isdir(real):
        if os.path.exists(real):
            return root.rel(real)
        raise ToolArgumentError(f"{path!r} does not exist")
    out: list[str] = []
    truncated = False
    if recursive:
        for dirpath, dirnames, filenames in walk(real):
            names = [os.path.join(dirpath, d) + "/" for d in dirnames]
            names += [os.path.join(dirpath, f) for f in filenames]
            for name in names:
                if len(out) >= most:
                    truncated = True
                    break
                out.append(root.rel(name.rstrip("/")) + ("/" if name.endswith("/") else ""))
            if truncated:
                break
    else:
        with os.scandir(real) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                if len(out) >= most:
                    truncated = True
                    break
                slash = "/" if entry.is_dir(follow_symlinks=False) else ""
                out.append(root.rel(entry.path) + slash)
    if not out:
        return f"[{root.rel(real)} is empty]"
    if truncated:
        out.append(f"[truncated at {most} entries; list a subdirectory]")
    return "\n".join(out)
