"""The working directory of the file tools and the path checks they all share.

Every path argument is resolved with ``realpath`` against the working directory and
refused unless the result lies inside it, so ``..`` traversal, absolute paths elsewhere
and symlinks pointing out are all refused; NUL bytes and over-long names are refused
before touching the file system. Write paths are also refused when any component may
name version-control metadata (see ``_vcs``).
"""

from __future__ import annotations

import os
import re
import stat

from ..errors import ToolArgumentError, ToolDefinitionError
from ._vcs import VCS_DIRS, is_vcs_metadata

__all__ = ["MAX_NAME_BYTES", "MAX_PATH_CHARS", "Root", "open_read", "open_regular", "regular_file"]

MAX_PATH_CHARS = 4096
MAX_NAME_BYTES = 255
_SEPARATORS = re.compile(r"[\\/]")
# O_NOFOLLOW: paths are already resolved, so a symlink met on opening appeared after the
# check; O_NONBLOCK: never hang on a FIFO swapped in after the check.
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


class Root:
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
        for part in _SEPARATORS.split(path):
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
        elif ".." in _SEPARATORS.split(path):
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
        host's next git command, so the file tools never write there, under any
        spelling a file system maps to those directories. The resolved path is checked,
        so a symlink inside the root that leads into ``.git`` is refused too.
        """
        real = self.resolve(path)
        if any(is_vcs_metadata(part) for part in _SEPARATORS.split(self.rel(real))):
            raise ToolArgumentError(
                f"argument 'path': {path!r} is inside version-control metadata "
                f"({', '.join(VCS_DIRS)}, in any letter case or alias); the file tools "
                "do not write there"
            )
        return real

    def rel(self, real: str) -> str:
        rel = os.path.relpath(real, self.root)
        return rel.replace(os.sep, "/")


def regular_file(real: str, shown: str) -> os.stat_result:
    """``os.stat`` of ``real`` if it is a regular file, else a refusal naming ``shown``."""
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


def open_read(real: str, shown: str) -> int:
    """A read-only descriptor of the regular file ``real``, or a refusal naming ``shown``."""
    regular_file(real, shown)
    try:
        fd = os.open(real, _READ_FLAGS)
    except OSError as exc:
        raise ToolArgumentError(f"{shown!r} cannot be opened: {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ToolArgumentError(f"{shown!r} is not a regular file")
    return fd


def open_regular(real: str) -> int | None:
    """A read-only descriptor of ``real`` if it is a regular file right now, else None."""
    try:
        fd = os.open(real, _READ_FLAGS)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd
