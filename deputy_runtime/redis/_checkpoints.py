"""A :class:`~deputy_runtime.runtime.CheckpointStore` on Redis.

Each run's checkpoint is one string key, ``<namespace>:checkpoint:<run_id>``, and the run
ids that have one are the set ``<namespace>:checkpoints``; a save or delete changes both
in one script, so the set never lists a run without a checkpoint. ``SET`` replaces the
value atomically: a reader sees the old checkpoint or the new one. The bytes are stored as
base64 text: the connection decodes replies as text, and a store keeps opaque bytes.
Durability is the server's (its ``appendonly`` / ``appendfsync`` settings): a checkpoint
survives a crash of the process that saved it, and a restart of Redis only as far as the
server persists its data.
"""

from __future__ import annotations

import base64
import binascii
from types import TracebackType
from typing import Self

from ..errors import CoordinationError
from ..runtime import check_run_id
from ._connection import RedisConnection, enter_connection
from ._validate import check_name

__all__ = ["RedisCheckpointStore"]

_SAVE = """
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SADD', KEYS[2], ARGV[2])
return 1
"""
_LOAD = "return redis.call('GET', KEYS[1])"
_DELETE = """
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[1])
return 1
"""
_LIST = "return redis.call('SMEMBERS', KEYS[1])"


class RedisCheckpointStore:
    """Keeps lead run checkpoints in Redis (``LeadAgent.run(checkpoints=...)``).

    Open it with ``async with`` (a URL: it owns its connection) or pass an open
    :class:`RedisConnection` shared with leases and budgets.

    Args:
        url: A Redis URL, or an open connection.
        namespace: The key prefix, shared with leases and budgets of the same deployment.

    Raises:
        ValueError: ``url`` is not a Redis URL, or ``namespace`` is empty or has a ``:``.
    """

    def __init__(self, url: str | RedisConnection, *, namespace: str = "deputy") -> None:
        self._owns = not isinstance(url, RedisConnection)
        self.connection = url if isinstance(url, RedisConnection) else RedisConnection(url)
        self.namespace = check_name("namespace", namespace, colon=False)
        self._index = f"{self.namespace}:checkpoints"

    def __repr__(self) -> str:
        return f"RedisCheckpointStore(namespace={self.namespace!r})"

    def key(self, run_id: str) -> str:
        """The Redis key of ``run_id``'s checkpoint.

        Args:
            run_id: The run.

        Returns:
            ``<namespace>:checkpoint:<run_id>``.

        Raises:
            ValueError: ``run_id`` is not a valid run id.
        """
        return f"{self.namespace}:checkpoint:{check_run_id(run_id)}"

    async def __aenter__(self) -> Self:
        await enter_connection(self.connection, owns=self._owns, user="RedisCheckpointStore")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._owns:
            await self.connection.__aexit__(exc_type, exc, tb)

    async def save(self, run_id: str, data: bytes) -> None:
        """Replace the run's checkpoint with ``data`` (one atomic ``SET``).

        Args:
            run_id: The run.
            data: The checkpoint's bytes.

        Raises:
            CoordinationUnavailableError: Redis cannot be reached.
        """
        key = self.key(run_id)
        if not isinstance(data, bytes):
            raise TypeError(f"checkpoint data must be bytes, got {type(data).__name__}")
        text = base64.b64encode(data).decode("ascii")
        await self.connection.run(_SAVE, [key, self._index], [text, run_id])

    async def load(self, run_id: str) -> bytes | None:
        """The run's checkpoint, or ``None`` when there is none.

        Args:
            run_id: The run.

        Returns:
            The bytes saved last, or ``None``.

        Raises:
            CoordinationError: The stored value is not base64 (not written by this store).
            CoordinationUnavailableError: Redis cannot be reached.
        """
        key = self.key(run_id)
        value = await self.connection.run(_LOAD, [key], [])
        if value is None:
            return None
        try:
            return base64.b64decode(str(value), validate=True)
        except binascii.Error:
            raise CoordinationError(
                f"Redis key {key!r} does not hold a checkpoint written by "
                "RedisCheckpointStore (not base64)"
            ) from None

    async def delete(self, run_id: str) -> None:
        """Remove the run's checkpoint, if there is one.

        Args:
            run_id: The run.
        """
        key = self.key(run_id)
        await self.connection.run_retrying(_DELETE, [key, self._index], [run_id])

    async def list(self) -> list[str]:
        """The run ids with a checkpoint in this namespace.

        Returns:
            The run ids, sorted.
        """
        members = await self.connection.run(_LIST, [self._index], [])
        return sorted(str(m) for m in members or ())
