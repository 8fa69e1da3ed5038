"""A real redis-server for the Redis lease and ledger tests.

The server runs on a free port on 127.0.0.1 in a temp dir. Without ``redis-server`` on
PATH the tests skip, except under CI (``CI`` set), where they fail: CI installs it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("coredis", reason="the redis extra (coredis) is not installed")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One redis-server process; ``stop()``/``start()`` restart it on the same port.

    ``persistent`` turns on the append-only file (fsync on every write), so a restart
    keeps the data; otherwise persistence is off and a restart loses everything.
    """

    def __init__(self, directory: Path, *, persistent: bool = False) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            message = "redis-server is not installed (CI installs it: see .ci/run)"
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip(message)
        self.binary = binary
        self.directory = directory
        self.persistent = persistent
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        args = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.directory),
            "--save",
            "",
            "--appendonly",
            "yes" if self.persistent else "no",
            "--appendfsync",
            "always",
            "--daemonize",
            "no",
        ]
        self.process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.directory
        )
        # Wait on the condition (the server answers), with a generous cap for a loaded box.
        deadline = time.monotonic() + 60
        while not _ping(self.port):
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}")
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not answer PING within 60 s")
            time.sleep(0.01)

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()  # SIGTERM: a clean shutdown (flushes the AOF if any)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


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
