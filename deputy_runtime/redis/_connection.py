"""One Redis connection pool shared by leases and ledgers, and the error translation.

The client is ``coredis`` (anyio-based, so it runs on asyncio and trio alike). Every
script runs through :meth:`RedisConnection.run`, which turns the client's connection and
timeout failures into :class:`~deputy_runtime.errors.CoordinationUnavailableError`;
:meth:`RedisConnection.run_retrying` retries such failures for a bounded time (for
release and settle, which must land when the server comes back).
"""

from __future__ import annotations

import random
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any, Self

import anyio
import coredis
import coredis.exceptions
from coredis.commands.script import Script
from coredis.retry import NoRetryPolicy

from ..errors import CoordinationError, CoordinationUnavailableError
from ._validate import check_seconds, check_url, redacted

__all__ = ["RedisConnection", "enter_connection"]

# Failures that mean "the server could not be reached or did not answer", as opposed to a
# script error (a bug) or a refused operation.
_UNAVAILABLE: tuple[type[BaseException], ...] = (
    coredis.exceptions.ConnectionError,
    coredis.exceptions.BusyLoadingError,
    ConnectionError,
    TimeoutError,
    OSError,
)


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside ``exc``, exception groups flattened."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _unavailable_cause(exc: BaseException) -> BaseException | None:
    """The connection failure ``exc`` stands for, when it holds nothing else.

    A group that also holds a cancellation or a bug is not "unavailable": it must
    propagate as it is.
    """
    leaves = _leaves(exc)
    if all(isinstance(leaf, _UNAVAILABLE) for leaf in leaves):
        return leaves[0]
    return None


def _refusal(exc: BaseException) -> coredis.exceptions.RedisError | None:
    """The server's error reply ``exc`` stands for (authentication, out of memory, a
    read-only replica...), when it holds nothing else."""
    leaves = _leaves(exc)
    if len(leaves) == 1 and isinstance(leaves[0], coredis.exceptions.RedisError):
        return leaves[0]
    return None


class RedisConnection:
    """A Redis connection pool, opened with ``async with`` (which also pings the server).

    ``connect_timeout`` bounds connecting, ``timeout`` each command; ``retry_for`` is how
    long :meth:`run_retrying` keeps retrying while the server is unreachable.
    """

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float = 5.0,
        timeout: float = 5.0,
        retry_for: float = 30.0,
    ) -> None:
        self.url = check_url(url)
        self.connect_timeout = check_seconds("connect_timeout", connect_timeout)
        self.timeout = check_seconds("timeout", timeout)
        self.retry_for = check_seconds("retry_for", retry_for, zero=True)
        self._client: coredis.Redis[str] | None = None
        self._stack: AsyncExitStack | None = None
        self._scripts: dict[str, Script[str]] = {}

    @property
    def is_open(self) -> bool:
        """Whether the connection is open (entered and not yet left)."""
        return self._client is not None

    async def __aenter__(self) -> Self:
        if self._stack is not None:
            raise CoordinationError(
                f"The Redis connection to {redacted(self.url)} is already open."
            )
        # The client's own retry would rerun a script whose reply was lost; every script
        # here is idempotent, but retries are decided in one place (run_retrying).
        client: coredis.Redis[str] = coredis.Redis.from_url(
            self.url,
            decode_responses=True,
            connect_timeout=self.connect_timeout,
            stream_timeout=self.timeout,
            retry_policy=NoRetryPolicy(),
        )
        stack = AsyncExitStack()
        try:
            await stack.enter_async_context(client)
            await client.ping()
        except BaseException as exc:
            # Closing a pool whose connect failed can raise the same failure again. (The
            # pool's task group must be exited in the scope it was entered in, so this
            # close is not wrapped in a shielded scope of its own.)
            try:
                await stack.aclose()
            except BaseException as close_exc:
                if _unavailable_cause(close_exc) is None and _refusal(close_exc) is None:
                    raise
            cause = _unavailable_cause(exc)
            if cause is not None:
                raise CoordinationUnavailableError(
                    f"Cannot connect to Redis at {redacted(self.url)}: {cause}. Check that "
                    "the server runs and the URL's host and port are right."
                ) from cause
            refusal = _refusal(exc)
            if refusal is not None:
                raise CoordinationError(
                    f"Redis at {redacted(self.url)} refused the connection: {refusal}. "
                    "Check the URL's user, password and database."
                ) from refusal
            raise
        self._client = client
        self._stack = stack
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stack, self._stack, self._client = self._stack, None, None
        self._scripts.clear()
        if stack is None:
            return
        try:
            await stack.aclose()
        except BaseException as close_exc:
            # A pool whose server went away reports that again on close; nothing is left
            # to clean up then.
            if _unavailable_cause(close_exc) is None:
                raise

    def _script(self, source: str) -> Script[str]:
        if self._client is None:
            raise CoordinationError(
                f"The Redis connection to {redacted(self.url)} is not open: use "
                "'async with' on it (or on the leases/budget that own it) first."
            )
        script = self._scripts.get(source)
        if script is None:
            script = self._scripts[source] = self._client.register_script(source)
        return script

    async def run(self, source: str, keys: list[str], args: list[str | int]) -> Any:
        """Run a Lua script once.

        Args:
            source: The script's Lua source (registered once per connection).
            keys: The script's ``KEYS``.
            args: The script's ``ARGV``.

        Returns:
            The script's reply, as the client decodes it.

        Raises:
            CoordinationUnavailableError: Redis cannot be reached or did not answer.
            CoordinationError: The connection is not open, or Redis refused the script
                with an error reply.
        """
        script = self._script(source)
        try:
            return await script(keys, args)
        except Exception as exc:
            cause = _unavailable_cause(exc)
            if cause is not None:
                raise CoordinationUnavailableError(
                    f"Redis at {redacted(self.url)} is unavailable: {cause}"
                ) from cause
            refusal = _refusal(exc)
            if refusal is not None:
                raise CoordinationError(
                    f"Redis at {redacted(self.url)} refused a script: {refusal}"
                ) from refusal
            raise

    async def run_retrying(self, source: str, keys: list[str], args: list[str | int]) -> Any:
        """Run an idempotent script, retrying while the server is unreachable.

        Retries with capped, jittered exponential backoff for ``retry_for`` seconds. Safe
        only for scripts that are idempotent for their holder id (release, settle): a
        retry after a lost reply changes nothing.

        Args:
            source: The script's Lua source.
            keys: The script's ``KEYS``.
            args: The script's ``ARGV``.

        Returns:
            The script's reply, as for :meth:`run`.

        Raises:
            CoordinationUnavailableError: Redis was still unreachable after ``retry_for``
                seconds (the last failure).
            CoordinationError: The connection is not open, or Redis refused the script.
        """
        deadline = anyio.current_time() + self.retry_for
        delay = 0.01
        while True:
            try:
                return await self.run(source, keys, args)
            except CoordinationUnavailableError:
                remaining = deadline - anyio.current_time()
                if remaining <= 0:
                    raise
                await anyio.sleep(min(delay * random.uniform(0.5, 1.0), remaining))
                delay = min(delay * 2, 0.5)


async def enter_connection(connection: RedisConnection, *, owns: bool, user: str) -> None:
    """Open ``connection`` for ``user`` when ``user`` owns it (it was given a URL);
    otherwise check the shared connection it was given is already open.

    Raises:
        CoordinationError: A shared connection that is not open.
    """
    if owns:
        await connection.__aenter__()
    elif not connection.is_open:
        raise CoordinationError(
            f"{user} was given a shared RedisConnection that is not open: open it with "
            "'async with' first."
        )
