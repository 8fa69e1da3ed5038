"""``run --temporal`` on a task queue no worker polls: a hint, exit 1, no workflow left."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from deputy_runtime.temporal import data_converter
from tests.cli._runhelp import REPO_ROOT, offline_env

# The follow query waits for Temporal's own timeout (about a minute) before giving up.
pytestmark = pytest.mark.slow


async def _status(address: str, workflow_id: str) -> WorkflowExecutionStatus | None:
    client = await Client.connect(address, data_converter=data_converter)
    return (await client.get_workflow_handle(workflow_id).describe()).status


def test_no_worker_is_a_hint_and_the_workflow_is_terminated(
    temporal_address: str, tmp_path: Path
) -> None:
    queue = f"nobody-{uuid.uuid4().hex}"
    done = subprocess.run(
        [sys.executable, "-m", "deputy_runtime", "run", "--agents",
         str(REPO_ROOT / "examples" / "agents"), "--temporal", temporal_address,
         "--task-queue", queue, "Go"],
        cwd=tmp_path, capture_output=True, text=True, env=offline_env(), timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert f"no worker answered on task queue {queue!r}; start one with: " in done.stderr
    assert f"deputy-runtime worker --temporal {temporal_address} --task-queue {queue}" in (
        done.stderr
    )
    assert "the workflow was terminated" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    found = re.search(r"workflow (deputy-run-[0-9a-f]+)", done.stdout)
    assert found is not None, done.stdout
    status = asyncio.run(_status(temporal_address, found[1]))
    assert status == WorkflowExecutionStatus.TERMINATED
