"""Safe reading and atomic installing of definition files (YAML and markdown alike).

Reading never blocks and never reads more than the size limit: the path is checked before
it is opened (following symlinks, as ``open`` would), opened non-blocking, and checked again
on the open descriptor, so a FIFO, device or a file swapped in between is caught. Installing
writes a temporary file next to the destination, fsyncs it and then renames it over the
destination (overwrite) or hard-links it into place (no overwrite, so a file another writer
created meanwhile is never replaced). The destination is only ever the old bytes or the new
bytes.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import secrets
import socket
import stat
import sys
from pathlib import Path

from ..errors import DefinitionFileError
from ._frontmatter import LINE_BREAKS
from ._yaml import YAML_LINE_BREAK

__all__ = [
    "MAX_DEFINITION_BYTES",
    "TEMP_PREFIX",
    "check_path_argument",
    "install_atomically",
    "read_definition_text",
]

#: Largest definition file read or written: 1 MiB.
MAX_DEFINITION_BYTES = 1024 * 1024

#: Prefix of the temporary files written next to a destination (hidden, so discovery skips
#: them).
TEMP_PREFIX = ".deputy-definition-"

_BOM = b"\xef\xbb\xbf"
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_BINARY", 0)
)
_CREATE_FLAGS = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_EXCL
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_BINARY", 0)
)
# The host tag keeps the stale-temp-file sweep from touching files that writers on other
# machines (sharing the directory over a network filesystem) may still be writing.
_HOST_TAG = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
_TEMP_PATTERN = re.compile(re.escape(TEMP_PREFIX) + r"([0-9a-f]{8})-(\d+)-[0-9a-f]+\.tmp\Z")
# Line ends as the markdown reader counts lines (str.splitlines: CRLF is one break).
_MARKDOWN_LINE_BREAK = re.compile("\r\n|[" + re.escape(LINE_BREAKS) + "]")


def check_path_argument(path: object) -> Path:
    """Return ``path`` as a :class:`Path`, or raise DefinitionFileError if it is not one.

    Accepts a non-empty ``str`` or an ``os.PathLike`` of ``str``; anything else (``None``,
    ``bytes``, a list, an empty string, a path containing NUL, which no filesystem call
    accepts) is rejected before the filesystem is touched.
    """
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str) or not path:
        raise DefinitionFileError(
            f"Expected a file path as a non-empty string or os.PathLike, got {path!r}",
            path=repr(path),
        )
    if "\0" in path:
        raise DefinitionFileError(
            f"Expected a file path, but {path!r} contains a NUL character, which no file "
            "name can hold",
            path=path.replace("\0", "\\0"),
        )
    return Path(path)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _check_stat(st: os.stat_result, path: Path) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise DefinitionFileError(
            f"Expected a readable definition file of at most 1 MiB, but the path is "
            f"{_kind(st.st_mode)}; only regular files (or symlinks to them) are read",
            path=path,
        )
    if st.st_size > MAX_DEFINITION_BYTES:
        raise DefinitionFileError(
            f"Expected a definition file of at most 1 MiB (1,048,576 bytes), but it has "
            f"{st.st_size:,} bytes; split it up or shorten the prompt",
            path=path,
        )


def read_definition_text(path: object, *, markdown: bool = False) -> str:
    """Read a definition file safely and return its text (UTF-8, BOM removed).

    Contract, shared by the YAML and markdown readers:

    - ``path`` must be a non-empty ``str`` or ``os.PathLike``; a symlink is followed, but
      the target must be a regular file of at most :data:`MAX_DEFINITION_BYTES` (1 MiB).
    - The type and size are checked before opening; the file is opened with
      ``O_NONBLOCK`` (a FIFO or device swapped in never blocks) and checked again with
      ``fstat`` on the descriptor; at most 1 MiB + 1 bytes are ever read.
    - The bytes must be valid UTF-8; one leading UTF-8 BOM is removed. Line endings are
      left as they are (the YAML parser handles CRLF).
    - Every failure raises :class:`~deputy_runtime.errors.DefinitionFileError` with
      ``path`` set (and ``line``/``column`` for invalid UTF-8, numbered as the reader of
      the format numbers lines: ``markdown`` says which); no other exception escapes.
    """
    file = check_path_argument(path)
    try:
        _check_stat(os.stat(file), file)
        fd = os.open(file, _OPEN_FLAGS)
    except DefinitionFileError:
        raise
    except FileNotFoundError:
        why = "is a dangling symlink" if os.path.islink(file) else "does not exist"
        raise DefinitionFileError(
            f"Expected a readable definition file, but the path {why}", path=file
        ) from None
    except (OSError, ValueError) as exc:  # ValueError: a name the OS cannot encode
        why = str(getattr(exc, "strerror", None) or exc)
        raise DefinitionFileError(
            f"Expected a readable definition file, but it could not be opened: {why}",
            path=file,
        ) from None
    try:
        # Re-check on the descriptor: the path may have been swapped since the stat above.
        _check_stat(os.fstat(fd), file)
        data = _read_limited(fd, file)
    finally:
        os.close(fd)
    return decode_definition_bytes(data, file, markdown=markdown)


def _read_limited(fd: int, path: Path) -> bytes:
    chunks: list[bytes] = []
    remaining = MAX_DEFINITION_BYTES + 1
    try:
        while remaining > 0:
            chunk = os.read(fd, remaining)
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    except OSError as exc:
        raise DefinitionFileError(
            f"Could not read the definition file: {exc.strerror or exc}", path=path
        ) from None
    if remaining <= 0:
        raise DefinitionFileError(
            "Expected a definition file of at most 1 MiB (1,048,576 bytes), but it grew "
            "beyond that while being read",
            path=path,
        )
    return b"".join(chunks)


def decode_definition_bytes(data: bytes, path: Path, *, markdown: bool = False) -> str:
    """Decode file bytes as UTF-8 (one leading BOM removed), or raise DefinitionFileError.

    The error names the line and column (1-based, in characters) of the first bad byte,
    with lines counted as the format's reader counts them for its other errors: CRLF, CR
    and LF (and NEL, LS, PS) for YAML; every :meth:`str.splitlines` boundary for markdown.
    """
    if data.startswith(_BOM):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, column = _position(data[: exc.start], markdown)
        raise DefinitionFileError(
            f"Expected UTF-8 text, but byte 0x{data[exc.start]:02X} at offset {exc.start} "
            "is not valid UTF-8; re-save the file as UTF-8",
            path=path,
            line=line,
            column=column,
        ) from None


def _position(before: bytes, markdown: bool) -> tuple[int, int]:
    """The 1-based (line, column) just after ``before``, the valid UTF-8 ahead of a bad byte."""
    text = before.decode("utf-8")  # valid: the decoder stopped at the first bad byte
    pattern = _MARKDOWN_LINE_BREAK if markdown else YAML_LINE_BREAK
    line, line_start = 1, 0
    for match in pattern.finditer(text):
        line, line_start = line + 1, match.end()
    return line, len(text) - line_start + 1


def install_atomically(path: object, data: bytes, overwrite: bool = False) -> Path:
    """Install ``data`` as the file ``path`` atomically and return the path.

    Contract, shared by the YAML and markdown writers:

    - ``data`` larger than :data:`MAX_DEFINITION_BYTES` is refused before anything is
      written; so is an existing destination when ``overwrite`` is false ("already
      exists"), and a destination that is a directory.
    - The bytes go to a temporary file ``.deputy-definition-*.tmp`` in the destination's
      directory, which is fsynced, then installed with ``os.replace`` (``overwrite=True``)
      or ``os.link`` + unlink (``overwrite=False``: if another writer created the
      destination meanwhile, the link fails and their file is kept). The directory is
      fsynced afterwards where the platform allows it.
    - On any failure the destination is byte-identical to before, this call's temporary
      file is removed, and DefinitionFileError (with ``path``) is raised. Temporary files
      left by writers on this host that were killed mid-write are swept on the next call.
    """
    dest = check_path_argument(path)
    if not isinstance(overwrite, bool):
        raise DefinitionFileError(f"overwrite must be True or False, got {overwrite!r}", path=dest)
    if len(data) > MAX_DEFINITION_BYTES:
        raise DefinitionFileError(
            f"The definition file would have {len(data):,} bytes, which exceeds 1 MiB "
            "(1,048,576 bytes); shorten the prompt or move text elsewhere",
            path=dest,
        )
    _check_destination(dest, overwrite)
    directory = dest.parent
    _sweep_stale_temp_files(directory)
    temp = _write_temp(directory, data, dest)
    try:
        _install(temp, dest, overwrite)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
    _fsync_directory(directory)
    return dest


def _check_destination(dest: Path, overwrite: bool) -> None:
    try:
        st = os.lstat(dest)
    except FileNotFoundError:
        if not dest.parent.is_dir():
            raise DefinitionFileError(
                f"The directory {str(dest.parent)!r} does not exist; create it first",
                path=dest,
            ) from None
        return
    except (OSError, ValueError) as exc:  # ValueError: a name the OS cannot encode
        why = getattr(exc, "strerror", None) or exc
        raise DefinitionFileError(f"Could not inspect the destination: {why}", path=dest) from None
    if not overwrite:
        raise DefinitionFileError(
            "File already exists; pass overwrite=True to replace it", path=dest
        )
    if stat.S_ISDIR(st.st_mode):
        raise DefinitionFileError("The destination is a directory; expected a file path", path=dest)


def _write_temp(directory: Path, data: bytes, dest: Path) -> Path:
    while True:
        name = f"{TEMP_PREFIX}{_HOST_TAG}-{os.getpid()}-{secrets.token_hex(6)}.tmp"
        temp = directory / name
        try:
            fd = os.open(temp, _CREATE_FLAGS, 0o666)
        except FileExistsError:  # pragma: no cover - 48 random bits collided
            continue
        except OSError as exc:
            raise DefinitionFileError(
                f"Could not create a temporary file in {str(directory)!r}: {exc.strerror or exc}",
                path=dest,
            ) from None
        break
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise DefinitionFileError(
            f"Could not write the definition file: {exc.strerror or exc}; the destination "
            "is unchanged",
            path=dest,
        ) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return temp


def _install(temp: Path, dest: Path, overwrite: bool) -> None:
    try:
        if overwrite:
            os.replace(temp, dest)
        else:
            os.link(temp, dest)
    except FileExistsError:
        raise DefinitionFileError(
            "File already exists (another writer created it meanwhile); pass "
            "overwrite=True to replace it",
            path=dest,
        ) from None
    except OSError as exc:
        hint = ""
        if not overwrite and exc.errno in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
            hint = "; writing without overwrite needs a filesystem with hard links"
        raise DefinitionFileError(
            f"Could not install the completed definition file: {exc.strerror or exc}{hint}",
            path=dest,
        ) from None


def _fsync_directory(directory: Path) -> None:
    # Makes the rename durable; not possible on every platform, and not needed for atomicity.
    if sys.platform == "win32":  # pragma: no cover
        return
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def _sweep_stale_temp_files(directory: Path) -> None:
    """Remove temporary files of writers on this host whose process no longer exists."""
    if sys.platform == "win32":  # pragma: no cover - os.kill(pid, 0) would kill there
        return
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        match = _TEMP_PATTERN.match(name)
        if match is None or match.group(1) != _HOST_TAG:
            continue
        pid = int(match.group(2))
        if pid == os.getpid() or _process_alive(pid):
            continue
        with contextlib.suppress(OSError):
            os.unlink(directory / name)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True
