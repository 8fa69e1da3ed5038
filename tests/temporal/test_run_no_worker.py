"""``run --temporal`` on a task queue no worker polls: a hint, exit 1, no workflow started."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.service import RPCError, RPCStatusCode

from deputy_runtime._cli.run_temporal import no_worker_answered
from tests.cli._runhelp import REPO_ROOT, offline_env

pytestmark = pytest.mark.slow  # spawns the CLI, which waits a few seconds for a worker


def test_no_worker_is_a_hint_and_no_run_is_started(temporal_address: str, tmp_path: Path) -> None:
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
    assert "the run was not started" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    # The Temporal: line (with the workflow id) is printed only for a run that started.
    assert "Temporal:" not in done.stdout, done.stdout


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (RPCError("Timeout expired", RPCStatusCode.CANCELLED, b""), True),
        (
            RPCError(
                "query timed out before a worker could process it",
                RPCStatusCode.UNKNOWN,
                b"",
            ),
            True,
        ),
        (RPCError("deadline", RPCStatusCode.DEADLINE_EXCEEDED, b""), True),
        (RPCError("workflow not found", RPCStatusCode.NOT_FOUND, b""), False),
        (RuntimeError("query timed out before a worker could process it"), True),
        (ValueError("bad offset"), False),
    ],
)
def test_a_query_no_worker_took_up_is_told_apart(error: BaseException, expected: bool) -> None:
    # A worker that was polling when the run started and has gone since: the follow
    # query fails in one of these shapes, by server version; only they get the hint.
    assert no_worker_answered(error) is expected
