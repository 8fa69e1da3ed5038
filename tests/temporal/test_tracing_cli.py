"""``deputy-runtime run --temporal --otlp`` and ``deputy-runtime worker --otlp``: the
spans the worker process exports join the trace the starting process exports."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.service.otlp import running_collector

pytestmark = pytest.mark.slow  # subprocesses

REPO_ROOT = Path(__file__).resolve().parents[2]
AGENTS = REPO_ROOT / "examples" / "agents"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("OPENAI_BASE_URL", None)
    env["PYTHONPATH"] = str(REPO_ROOT)
    return env


def test_the_workers_spans_join_the_starting_process_trace(
    temporal_address: str, tmp_path: Path
) -> None:
    queue = f"deputy-otlp-{uuid.uuid4().hex}"
    with running_collector() as collector:
        log = open(tmp_path / "worker.log", "wb")  # noqa: SIM115 - closed below
        worker = subprocess.Popen(
            [sys.executable, "-m", "deputy_runtime", "worker", "--temporal", temporal_address,
             "--agents", str(AGENTS), "--task-queue", queue, "--otlp", collector.url],
            cwd=REPO_ROOT, env=_env(), stdout=log, stderr=log,
        )  # fmt: skip
        log.close()
        try:
            done = subprocess.run(
                [sys.executable, "-m", "deputy_runtime", "run", "--agents", str(AGENTS),
                 "--model", "test", "--temporal", temporal_address, "--task-queue", queue,
                 "--otlp", collector.url, "Review the examples directory"],
                cwd=REPO_ROOT, env=_env(), capture_output=True, text=True, timeout=300,
                check=False,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
        finally:
            worker.terminate()  # a clean stop flushes the worker's batched spans
            worker.wait(timeout=60)
        assert worker.returncode == 0, (tmp_path / "worker.log").read_text()
        spans = list(collector.spans)
    [start] = [s for s in spans if s.name == "StartWorkflow:DeputyLead"]
    chats = [s for s in spans if s.name.startswith("chat ")]
    tools = [s for s in spans if s.name.startswith("execute_tool ")]
    assert chats, [s.name for s in spans]
    assert tools, [s.name for s in spans]
    assert all(s.trace_id == start.trace_id for s in (*chats, *tools))
    by_id = {s.span_id: s for s in spans}
    for s in (*chats, *tools):
        assert by_id[s.parent_span_id].name.startswith("RunActivity:")
    # Following the run polls a query; those polls are not traced.
    assert not [s for s in spans if s.name.startswith(("QueryWorkflow", "HandleQuery"))]
