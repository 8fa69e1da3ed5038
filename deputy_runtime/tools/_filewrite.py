"""write_file and edit_file: atomic writes, serialised per file across the process.

Each write holds the file's process-wide lock (see ``_pathlock``) from the moment it
looks at the file until its replacement is in place, so concurrent calls on one file,
from one model turn, parallel subagents, other threads or other event loops, apply one
after another and each sees the result of the last. An edit whose ``old_string`` an
earlier write removed fails saying so; it never reports success for text it dropped.

write_file against edit_file on one file: whichever takes the lock first runs first.
write_file replaces the whole file, so an edit that ran before it is overwritten (the
write answers "Overwrote"), and an edit that runs after it applies to the new content
or fails because its text is gone. Writes are atomic: a temporary file in the same
directory, fsync, then rename, so a reader sees the old or the new file, never a mix.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile

from ..errors import ToolArgumentError
from ._fileroot import Root, open_read, regular_file
from ._limits import FileToolLimits
from ._pathlock import path_lock

__all__ = ["edit", "read_for_edit", "write", "write_or_explain"]


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


def read_for_edit(real: str, shown: str, most: int) -> bytes:
    """The bytes of the file an edit changes, refused past ``most`` bytes (checked before
    reading and again on what was read, in case it grew meanwhile)."""
    if regular_file(real, shown).st_size > most:
        raise ToolArgumentError(f"{shown!r} is over the {most}-byte edit limit")
    with os.fdopen(open_read(real, shown), "rb") as handle:
        raw = handle.read(most + 1)
    if len(raw) > most:
        raise ToolArgumentError(f"{shown!r} is over the {most}-byte edit limit")
    return raw


def write_or_explain(real: str, data: bytes, path: str) -> None:
    try:
        _atomic_write(real, data)
    except (NotADirectoryError, FileExistsError):
        raise ToolArgumentError(
            f"argument 'path': a parent of {path!r} is a file, not a directory"
        ) from None
    except OSError as exc:
        raise ToolArgumentError(f"{path!r} cannot be written: {exc.strerror}") from None


def write(root: Root, limits: FileToolLimits, path: str, content: str) -> str:
    data = content.encode("utf-8")
    if len(data) > limits.write_bytes:
        raise ToolArgumentError(
            f"argument 'content': {len(data)} bytes is over the {limits.write_bytes}-byte limit"
        )
    real = root.resolve_for_write(path)
    if real == root.root:
        raise ToolArgumentError(f"argument 'path': {path!r} is a directory")
    with path_lock(real):
        if os.path.isdir(real):
            raise ToolArgumentError(f"argument 'path': {path!r} is a directory")
        if os.path.lexists(real) and not os.path.isfile(real):
            raise ToolArgumentError(f"argument 'path': {path!r} is not a regular file")
        existed = os.path.exists(real)
        write_or_explain(real, data, path)
    verb = "Overwrote" if existed else "Created"
    return f"{verb} {root.rel(real)} ({len(data)} bytes)"


def edit(
    root: Root, limits: FileToolLimits, path: str, old: str, new: str, replace_all: bool
) -> str:
    if not old:
        raise ToolArgumentError(
            "argument 'old_string': must not be empty; use write_file to create a file"
        )
    real = root.resolve_for_write(path)
    shown = root.rel(real)
    with path_lock(real):
        count = _edit_locked(real, shown, path, limits.write_bytes, old, new, replace_all)
    return f"Edited {shown}: replaced {count} occurrence(s)"


def _edit_locked(
    real: str, shown: str, path: str, most: int, old: str, new: str, replace_all: bool
) -> int:
    """Read, replace and write back while holding the file's lock; the count replaced."""
    raw = read_for_edit(real, shown, most)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolArgumentError(
            f"{shown!r} is not UTF-8 text; edit_file cannot change it"
        ) from None
    count = text.count(old)
    if count == 0:
        raise ToolArgumentError(
            f"argument 'old_string': not found in {shown} (if you read it earlier, it has "
            "changed since, possibly by another edit); read_file it again and copy the "
            "exact text, including whitespace"
        )
    if count > 1 and not replace_all:
        raise ToolArgumentError(
            f"argument 'old_string': found {count} times in {shown}; include more "
            "surrounding text to make it unique, or set replace_all"
        )
    updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    data = updated.encode("utf-8")
    if len(data) > most:
        raise ToolArgumentError(f"the edited file would be over {most} bytes")
    write_or_explain(real, data, path)
    return count if replace_all else 1
