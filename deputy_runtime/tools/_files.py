"""Built-in file tools confined to one working directory.

``tools_file(working_dir)`` returns ``read_file``, ``list_files``, ``grep_files`` (all
read-only), ``write_file`` and ``edit_file``. Every path argument is resolved with
``realpath`` against the working directory and refused unless the result lies inside it,
so ``..`` traversal, absolute paths elsewhere and symlinks pointing out are all refused;
NUL bytes and over-long names are refused before touching the file system. Nothing is
ever written inside ``.git``, ``.hg`` or ``.svn`` (a hook there would run on the host's
next version-control command). Writes are atomic (temporary file in the same directory,
then rename). Refusals raise :class:`ToolArgumentError` with a message the model can act
on.

This is a guard against a confused model, not an OS sandbox: a process that can change
the directory tree concurrently can still race the checks.

The parameters' ``examples`` are chosen to be harmless because the offline test provider
calls tools with ``examples[0]``: it reads ``README.md``, lists ``.``, and writes and
edits only ``deputy-scratch.txt``.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from typing import Annotated, BinaryIO

import msgspec

from ..errors import ToolArgumentError, ToolDefinitionError
from ._decorator import tool
from ._patterns import compile_pattern
from ._tool import Tool

__all__ = [
    "GREP_MAX_MATCHES",
    "LIST_MAX_ENTRIES",
    "READ_MAX_BYTES",
    "WRITE_MAX_BYTES",
    "tools_file",
]

READ_MAX_BYTES = 256 * 1024
WRITE_MAX_BYTES = 1024 * 1024
LIST_MAX_ENTRIES = 1000
GREP_MAX_MATCHES = 200
GREP_MAX_FILE_BYTES = 4 * 1024 * 1024
GREP_MAX_LINE_CHARS = 300
MAX_PATH_CHARS = 4096
MAX_NAME_BYTES = 255
_BINARY_PROBE = 8192
#: Directories list_files (recursive) and grep_files skip: version control and caches.
SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv"})
SCRATCH_EXAMPLE = "deputy-scratch.txt"
#: Directories write_file and edit_file never write into.
_PROTECTED_DIRS = frozenset({".git", ".hg", ".svn"})

PathArg = Annotated[
    str,
    msgspec.Meta(
        description="File path relative to the working directory.", examples=["README.md"]
    ),
]
DirArg = Annotated[
    str,
    msgspec.Meta(
        description="Directory (or file) relative to the working directory.", examples=["."]
    ),
]
ScratchArg = Annotated[
    str,
    msgspec.Meta(
        description="File path relative to the working directory.", examples=[SCRATCH_EXAMPLE]
    ),
]


class _Root:
    """The working directory and the path checks every file tool shares."""

    def __init__(self, working_dir: str | os.PathLike[str]) -> None:
        real = os.path.realpath(working_dir)
        if not os.path.isdir(real):
            raise ToolDefinitionError(
                f"tools_file: working directory {os.fspath(working_dir)!r} does not exist "
                "or is not a directory"
            )
        self.root = real
        self._prefix = real.rstrip(os.sep) + os.sep

    def resolve(self, path: str, arg: str = "path") -> str:
        """The real absolute path for a model-supplied ``path``, or a clear refusal."""
        if "\x00" in path:
            raise ToolArgumentError(f"argument '{arg}': the path contains a NUL byte")
        if len(path) > MAX_PATH_CHARS:
            raise ToolArgumentError(
                f"argument '{arg}': the path is {len(path)} characters long; the limit is "
                f"{MAX_PATH_CHARS}"
            )
        for part in re.split(r"[\\/]", path):
            if len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
                raise ToolArgumentError(
                    f"argument '{arg}': the name {part[:40]!r}... is longer than "
                    f"{MAX_NAME_BYTES} bytes"
                )
        real = os.path.realpath(os.path.join(self.root, path or "."))
        if real == self.root or real.startswith(self._prefix):
            return real
        if os.path.isabs(path):
            why = "is an absolute path outside the working directory"
        elif ".." in re.split(r"[\\/]", path):
            why = "uses '..' to leave the working directory"
        else:
            why = "leads through a symbolic link to outside the working directory"
        raise ToolArgumentError(
            f"argument '{arg}': {path!r} {why}; use a path relative to the working "
            "directory that stays inside it"
        )

    def resolve_for_write(self, path: str) -> str:
        """:meth:`resolve`, also refusing paths inside version-control metadata.

        Writing ``.git/hooks/...`` or ``.git/config`` would let a model run code on the
        host's next git command, so the file tools never write there.
        """
        real = self.resolve(path)
        parts = self.rel(real).split("/")
        if any(part in _PROTECTED_DIRS for part in parts[:-1]) or parts[-1] in _PROTECTED_DIRS:
            raise ToolArgumentError(
                f"argument 'path': {path!r} is inside version-control metadata "
                f"({', '.join(sorted(_PROTECTED_DIRS))}); the file tools do not write there"
            )
        return real

    def rel(self, real: str) -> str:
        rel = os.path.relpath(real, self.root)
        return rel.replace(os.sep, "/")


def _regular_file(real: str, shown: str) -> os.stat_result:
    try:
        st = os.stat(real)
    except FileNotFoundError:
        raise ToolArgumentError(f"{shown!r} does not exist") from None
    except OSError as exc:
        raise ToolArgumentError(f"{shown!r} cannot be read: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ToolArgumentError(f"{shown!r} is a directory; use list_files for directories")
    if not stat.S_ISREG(st.st_mode):
        raise ToolArgumentError(f"{shown!r} is not a regular file")
    return st


def _open_read(real: str, shown: str) -> int:
    _regular_file(real, shown)
    # O_NOFOLLOW: the path is already resolved, so a symlink here appeared after the
    # check; O_NONBLOCK: never hang on a FIFO swapped in after the check.
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(real, flags)
    except OSError as exc:
        raise ToolArgumentError(f"{shown!r} cannot be opened: {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ToolArgumentError(f"{shown!r} is not a regular file")
    return fd


def _lines(handle: BinaryIO, cap: int) -> Iterator[tuple[bytes, bool]]:
    """Yield each line (at most ``cap`` bytes, flag set when cut) in bounded memory."""
    while True:
        line = handle.readline(cap + 1)
        if not line:
            return
        if len(line) <= cap:
            yield line, False
            continue
        if not line.endswith(b"\n"):  # skip the rest of an over-long line
            while True:
                more = handle.readline(cap)
                if not more or more.endswith(b"\n"):
                    break
        yield line[:cap], True


def _read_text(root: _Root, path: str, start_line: int, max_lines: int | None) -> str:
    if max_lines is not None and max_lines < 1:
        raise ToolArgumentError("argument 'max_lines': expected a number >= 1")
    real = root.resolve(path)
    shown = root.rel(real)
    fd = _open_read(real, shown)
    chunks: list[bytes] = []
    used = line_no = 0
    truncated = False
    cut_lines: list[int] = []
    with os.fdopen(fd, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if b"\x00" in handle.read(_BINARY_PROBE):
            return f"[{shown} is a binary file ({size} bytes); read_file shows text only]"
        handle.seek(0)
        for line, cut in _lines(handle, READ_MAX_BYTES):
            line_no += 1
            if line_no < start_line:
                continue
            full = max_lines is not None and len(chunks) >= max_lines
            # The first line shown always fits (it is cut to the cap), so every call
            # makes progress and "read on" never repeats itself.
            if chunks and (full or used + len(line) > READ_MAX_BYTES):
                truncated = True
                line_no -= 1
                break
            chunks.append(line)
            used += len(line)
            if cut:
                cut_lines.append(line_no)
    if start_line > 1 and not chunks:
        return f"[{shown} has {line_no} lines; start_line {start_line} is past the end]"
    text = b"".join(chunks).decode("utf-8", errors="replace")
    if cut_lines:
        text += f"\n[line {cut_lines[0]} is longer than {READ_MAX_BYTES} bytes; showed its start]"
    if truncated:
        text += (
            f"\n[truncated: showed lines {start_line}-{line_no} of {shown} ({size} bytes in "
            f"total). Call read_file with start_line={line_no + 1} to read on.]"
        )
    return text


def _walk(top: str) -> Iterator[tuple[str, list[str], list[str]]]:
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS)
        yield dirpath, dirnames, sorted(filenames)


def _list(root: _Root, path: str, recursive: bool) -> str:
    try:
        return _list_unchecked(root, path, recursive)
    except OSError as exc:
        raise ToolArgumentError(f"{path!r} cannot be listed: {exc.strerror or exc}") from None


def _list_unchecked(root: _Root, path: str, recursive: bool) -> str:
    real = root.resolve(path)
    if not os.path.isdir(real):
        if os.path.exists(real):
            return root.rel(real)
        raise ToolArgumentError(f"{path!r} does not exist")
    out: list[str] = []
    truncated = False
    if recursive:
        for dirpath, dirnames, filenames in _walk(real):
            names = [os.path.join(dirpath, d) + "/" for d in dirnames]
            names += [os.path.join(dirpath, f) for f in filenames]
            for name in names:
                if len(out) >= LIST_MAX_ENTRIES:
                    truncated = True
                    break
                out.append(root.rel(name.rstrip("/")) + ("/" if name.endswith("/") else ""))
            if truncated:
                break
    else:
        with os.scandir(real) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                if len(out) >= LIST_MAX_ENTRIES:
                    truncated = True
                    break
                slash = "/" if entry.is_dir(follow_symlinks=False) else ""
                out.append(root.rel(entry.path) + slash)
    if not out:
        return f"[{root.rel(real)} is empty]"
    if truncated:
        out.append(f"[truncated at {LIST_MAX_ENTRIES} entries; list a subdirectory]")
    return "\n".join(out)


def _grep(root: _Root, pattern: str, path: str, glob: str | None, ignore_case: bool) -> str:
    regex = compile_pattern(pattern, ignore_case)
    real = root.resolve(path)
    files: Iterator[str]
    if os.path.isdir(real):
        files = (os.path.join(d, f) for d, _, names in _walk(real) for f in names)
    elif os.path.exists(real):
        files = iter([real])
    else:
        raise ToolArgumentError(f"argument 'path': {path!r} does not exist")
    matches: list[str] = []
    for file in files:
        rel = root.rel(file)
        if glob and not (
            fnmatch.fnmatch(os.path.basename(rel), glob) or fnmatch.fnmatch(rel, glob)
        ):
            continue
        if len(matches) >= GREP_MAX_MATCHES:
            matches.append(f"[stopped after {GREP_MAX_MATCHES} matches; narrow the search]")
            break
        _grep_file(regex, file, rel, matches)
    if not matches:
        return f"No matches for {pattern!r} in {root.rel(real)}"
    return "\n".join(matches[: GREP_MAX_MATCHES + 1])


def _grep_file(regex: re.Pattern[str], file: str, rel: str, matches: list[str]) -> None:
    try:
        st = os.lstat(file)
        if not stat.S_ISREG(st.st_mode) or st.st_size > GREP_MAX_FILE_BYTES:
            return  # symlinks are not followed; huge files are skipped
        with open(file, "rb") as handle:
            data = handle.read()
    except OSError:
        return
    if b"\x00" in data[:_BINARY_PROBE]:
        return
    for no, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if regex.search(line):
            if len(line) > GREP_MAX_LINE_CHARS:
                line = line[:GREP_MAX_LINE_CHARS] + "..."
            matches.append(f"{rel}:{no}: {line}")
            if len(matches) >= GREP_MAX_MATCHES:
                return


def _atomic_write(real: str, data: bytes) -> None:
    parent = os.path.dirname(real)
    os.makedirs(parent, exist_ok=True)
    try:
        mode = stat.S_IMODE(os.stat(real).st_mode)
    except FileNotFoundError:
        mode = 0o644
    fd, tmp = tempfile.mkstemp(dir=parent, prefix="." + os.path.basename(real)[:200], suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _write_or_explain(real: str, data: bytes, path: str) -> None:
    try:
        _atomic_write(real, data)
    except (NotADirectoryError, FileExistsError):
        raise ToolArgumentError(
            f"argument 'path': a parent of {path!r} is a file, not a directory"
        ) from None
    except OSError as exc:
        raise ToolArgumentError(f"{path!r} cannot be written: {exc.strerror}") from None


def _write(root: _Root, path: str, content: str) -> str:
    data = content.encode("utf-8")
    if len(data) > WRITE_MAX_BYTES:
        raise ToolArgumentError(
            f"argument 'content': {len(data)} bytes is over the {WRITE_MAX_BYTES}-byte limit"
        )
    real = root.resolve_for_write(path)
    if real == root.root or os.path.isdir(real):
        raise ToolArgumentError(f"argument 'path': {path!r} is a directory")
    if os.path.lexists(real) and not os.path.isfile(real):
        raise ToolArgumentError(f"argument 'path': {path!r} is not a regular file")
    existed = os.path.exists(real)
    _write_or_explain(real, data, path)
    verb = "Overwrote" if existed else "Created"
    return f"{verb} {root.rel(real)} ({len(data)} bytes)"


def _edit(root: _Root, path: str, old: str, new: str, replace_all: bool) -> str:
    if not old:
        raise ToolArgumentError(
            "argument 'old_string': must not be empty; use write_file to create a file"
        )
    real = root.resolve_for_write(path)
    shown = root.rel(real)
    st = _regular_file(real, shown)
    if st.st_size > WRITE_MAX_BYTES:
        raise ToolArgumentError(f"{shown!r} is over the {WRITE_MAX_BYTES}-byte edit limit")
    fd = _open_read(real, shown)
    with os.fdopen(fd, "rb") as handle:
        raw = handle.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolArgumentError(
            f"{shown!r} is not UTF-8 text; edit_file cannot change it"
        ) from None
    count = text.count(old)
    if count == 0:
        raise ToolArgumentError(
            f"argument 'old_string': not found in {shown}; read_file it and copy the exact "
            "text, including whitespace"
        )
    if count > 1 and not replace_all:
        raise ToolArgumentError(
            f"argument 'old_string': found {count} times in {shown}; include more "
            "surrounding text to make it unique, or set replace_all"
        )
    updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    data = updated.encode("utf-8")
    if len(data) > WRITE_MAX_BYTES:
        raise ToolArgumentError(f"the edited file would be over {WRITE_MAX_BYTES} bytes")
    _write_or_explain(real, data, path)
    return f"Edited {shown}: replaced {count if replace_all else 1} occurrence(s)"


def _meta(description: str, example: object) -> msgspec.Meta:
    return msgspec.Meta(description=description, examples=[example])


def tools_file(working_dir: str | os.PathLike[str]) -> tuple[Tool, ...]:
    """The five file tools, confined to ``working_dir``.

    Reads are capped at 256 KiB per call (with a notice saying how to read on), writes and
    edits at 1 MiB, listings at 1000 entries and searches at 200 matches. The tools run in
    worker threads so file I/O never blocks the event loop. grep_files refuses patterns over
    1000 characters and patterns nesting an unbounded repeat inside another (``(a+)+``), the
    usual exponential-backtracking shapes. Python's ``re`` cannot be interrupted and keeps
    the GIL for a whole match, so a slow pattern the check misses stalls the process
    (cancellation and Ctrl-C included) until that match finishes.

    Args:
        working_dir: The directory the tools are confined to (after resolving symlinks).

    Returns:
        ``(read_file, list_files, grep_files, write_file, edit_file)``.

    Raises:
        ToolDefinitionError: ``working_dir`` does not exist or is not a directory.
    """
    root = _Root(working_dir)
    tools = (*_read_tools(root), *_write_tools(root))
    return tuple(msgspec.structs.replace(t, path_base=root.root) for t in tools)


def _read_tools(root: _Root) -> tuple[Tool, Tool, Tool]:
    @tool(read_only=True, idempotent=True, run_in_thread=True)
    def read_file(
        path: PathArg,
        start_line: Annotated[int, msgspec.Meta(ge=1, description="First line to show.")] = 1,
        max_lines: Annotated[
            int | None, msgspec.Meta(description="Most lines to show (default: no limit).")
        ] = None,
    ) -> str:
        """Read a UTF-8 text file in the working directory.

        Shows at most 256 KiB per call; a notice at the end says how to read on.
        """
        return _read_text(root, path, start_line, max_lines)

    @tool(read_only=True, idempotent=True, run_in_thread=True)
    def list_files(path: DirArg = ".", recursive: bool = False) -> str:
        """List a directory in the working directory (directories end with '/').

        With recursive, lists the whole tree (skipping .git, node_modules and similar),
        up to 1000 entries.
        """
        return _list(root, path, recursive)

    @tool(read_only=True, idempotent=True, run_in_thread=True)
    def grep_files(
        pattern: Annotated[str, _meta("Python regular expression to search for.", "TODO")],
        path: DirArg = ".",
        glob: Annotated[
            str | None, _meta("Only files whose name or path matches this glob.", "*.py")
        ] = None,
        ignore_case: bool = False,
    ) -> str:
        """Search text files under a path for a regular expression.

        Prints 'path:line: text' for each matching line, up to 200 matches. Patterns
        over 1000 characters, and patterns with an unbounded repeat inside another
        (like '(a+)+' or '(.*x)*'), are refused because they can take exponential time.
        A running search cannot be interrupted, so also avoid other heavy backtracking
        such as overlapping alternatives in a repeat ('(a|aa)+').
        """
        # Remaining risk: the nesting check does not catch every slow pattern
        # (overlapping alternatives like '(a|a)+$', bounded inner repeats like
        # '(a{1,2})+$', polynomial '.*.*.*x' on long lines), and a match in Python's re
        # can be neither interrupted nor abandoned: it keeps the GIL, so the event loop
        # cannot even deliver a cancellation until it returns. invoke_tool abandons this
        # read-only tool on cancel, which helps between lines and files, not within one.
        return _grep(root, pattern, path, glob, ignore_case)

    return read_file, list_files, grep_files


def _write_tools(root: _Root) -> tuple[Tool, Tool]:
    @tool(idempotent=True, run_in_thread=True)
    def write_file(
        path: ScratchArg,
        content: Annotated[
            str,
            _meta(
                "The complete new file content.",
                "Scratch file written by deputy_runtime; safe to delete.\n",
            ),
        ],
    ) -> str:
        """Create or overwrite a text file in the working directory (at most 1 MiB).

        Parent directories are created. The write is atomic.
        """
        return _write(root, path, content)

    @tool(run_in_thread=True)
    def edit_file(
        path: ScratchArg,
        old_string: Annotated[
            str, _meta("Exact text to replace (must be unique unless replace_all).", "safe")
        ],
        new_string: Annotated[str, _meta("Replacement text.", "safe")],
        replace_all: bool = False,
    ) -> str:
        """Replace exact text in a file in the working directory.

        old_string must occur exactly once unless replace_all is set; read the file first
        and copy the text exactly.
        """
        return _edit(root, path, old_string, new_string, replace_all)

    return write_file, edit_file
