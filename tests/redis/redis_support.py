"""The redis-server process the Redis tests run against (see conftest.py)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest


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
