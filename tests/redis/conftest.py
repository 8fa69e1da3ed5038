"""A real redis-server for the Redis lease and ledger tests.

The server runs on a free port on 127.0.0.1 in a temp dir. Without ``redis-server`` on
PATH the tests skip, except under CI (``CI`` set), where they fail: CI installs it.
Without the client library (the redis extra) they are not collected, except under CI.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.redis.redis_support import RedisServer

try:
    import coredis  # noqa: F401
except ImportError:
    if os.environ.get("CI"):  # CI's test extra includes it: its absence is a failure
        raise
    # Without the redis extra only the optional-import tests can run here.
    collect_ignore_glob = ["test_[!o]*.py"]


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One shared server for the session (tests isolate by namespace)."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def restartable_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A server of the test's own, with an fsync'ed append-only file, to restart at will."""
    server = RedisServer(tmp_path, persistent=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    return redis_server.url


@pytest.fixture
def namespace() -> str:
    """A namespace of the test's own, so tests sharing the server never see each other."""
    return f"test-{uuid.uuid4().hex[:12]}"
