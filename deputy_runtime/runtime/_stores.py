"""Where checkpoints are kept: the :class:`CheckpointStore` protocol and the file store.

A store keeps opaque bytes by run id; it neither reads nor validates them (loading a
checkpoint does, whatever the store). A store's ``save`` must be atomic: a reader (or a
process started after a crash) sees the previous checkpoint or the new one, never a mix.
Run ids name files and keys, so every store accepts only ids of letters, digits, ``_``,
``-`` and ``.`` (1 to 128 characters, not starting with ``.``), the ids the runtime
mints: an id such as ``../x`` can never reach outside the store.
"""

from __future__ import annotations

import builtins
import os
import re
import secrets
from pathlib import Path
from typing import Protocol, runtime_checkable

import anyio.to_thread

__all__ = ["CHECKPOINT_SUFFIX", "CheckpointStore", "FileCheckpointStore", "check_run_id"]

#: The file name suffix of a checkpoint in a :class:`FileCheckpointStore`.
CHECKPOINT_SUFFIX = ".checkpoint"
_RUN_ID = re.compile(r"[A-Za-z0-9_\-][A-Za-z0-9_.\-]{0,127}")


def check_run_id(run_id: object) -> str:
    """``run_id`` if a store may use it as a name.

    Args:
        run_id: The id to check.

    Returns:
        ``run_id``.

    Raises:
        ValueError: It is not 1 to 128 letters, digits, ``_``, ``-`` or ``.`` (not
            starting with ``.``).
    """
    if not isinstance(run_id, str) or _RUN_ID.fullmatch(run_id) is None:
        raise ValueError(
            f"run_id must be 1 to 128 letters, digits, '_', '-' or '.' (not starting with "
            f"'.'), got {run_id!r:.80}"
        )
    return run_id


@runtime_checkable
class CheckpointStore(Protocol):
    """Keeps one checkpoint (opaque bytes) per run id.

    Implementations: :class:`FileCheckpointStore` (the default) and
    ``deputy_runtime.redis.RedisCheckpointStore`` (the ``redis`` extra). Every method
    refuses a run id :func:`check_run_id` refuses (``ValueError``).
    """

    async def save(self, run_id: str, data: bytes) -> None:
        """Replace the run's checkpoint with ``data``, atomically.

        Args:
            run_id: The run.
            data: The checkpoint's bytes.
        """
        ...

    async def load(self, run_id: str) -> bytes | None:
        """The run's checkpoint, or ``None`` when there is none.

        Args:
            run_id: The run.

        Returns:
            The bytes saved last, or ``None``.
        """
        ...

    async def delete(self, run_id: str) -> None:
        """Remove the run's checkpoint (nothing happens when there is none).

        Args:
            run_id: The run.
        """
        ...

    async def list(self) -> builtins.list[str]:
        """The run ids that have a checkpoint.

        Returns:
            The run ids, sorted.
        """
        ...


class FileCheckpointStore:
    """One file per run id (``<run_id>.checkpoint``) in ``directory``.

    A save writes a temporary file next to the checkpoint, flushes it to disk (fsync),
    renames it over the checkpoint (``os.replace``, atomic on POSIX and Windows) and
    syncs the directory, so a crash at any point leaves the old checkpoint or the new
    one. The directory is created on first save (mode 0700); files are mode 0600, as a
    checkpoint holds the conversation. Temporary files a crash left behind start with
    ``.`` and are not listed.

    Args:
        directory: Where the checkpoints are kept.
    """

    __slots__ = ("directory",)

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def __repr__(self) -> str:
        return f"FileCheckpointStore({str(self.directory)!r})"

    def path(self, run_id: str) -> Path:
        """The file of ``run_id``'s checkpoint.

        Args:
            run_id: The run.

        Returns:
            ``<directory>/<run_id>.checkpoint``.

        Raises:
            ValueError: ``run_id`` is not a valid run id.
        """
        return self.directory / (check_run_id(run_id) + CHECKPOINT_SUFFIX)

    async def save(self, run_id: str, data: bytes) -> None:
        """Write ``data`` as the run's checkpoint: temp file, fsync, ``os.replace``.

        Args:
            run_id: The run.
            data: The checkpoint's bytes.
        """
        path = self.path(run_id)
        if not isinstance(data, bytes):
            raise TypeError(f"checkpoint data must be bytes, got {type(data).__name__}")
        await anyio.to_thread.run_sync(_write_atomically, path, data)

    async def load(self, run_id: str) -> bytes | None:
        """The run's checkpoint bytes, or ``None`` when the file does not exist.

        Args:
            run_id: The run.

        Returns:
            The file's bytes, or ``None``.
        """
        path = self.path(run_id)
        return await anyio.to_thread.run_sync(_read, path)

    async def delete(self, run_id: str) -> None:
        """Remove the run's checkpoint file, if there is one.

        Args:
            run_id: The run.
        """
        path = self.path(run_id)
        await anyio.to_thread.run_sync(lambda: path.unlink(missing_ok=True))

    async def list(self) -> builtins.list[str]:
        """The run ids with a checkpoint file here (none if there is no directory).

        Returns:
            The run ids, sorted.
        """
        return await anyio.to_thread.run_sync(self._list)

    def _list(self) -> builtins.list[str]:
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        ids = (n[: -len(CHECKPOINT_SUFFIX)] for n in names if n.endswith(CHECKPOINT_SUFFIX))
        return sorted(i for i in ids if _RUN_ID.fullmatch(i) is not None)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _write_atomically(path: Path, data: bytes) -> None:
    directory = path.parent
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    temp = directory / f".{path.name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    _sync_directory(directory)


def _sync_directory(directory: Path) -> None:
    """Make the rename durable (POSIX); platforms that cannot open a directory skip it."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on a directory; the rename still happened
    finally:
        os.close(fd)
