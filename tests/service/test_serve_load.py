"""A bounded load: many concurrent runs on the offline model, none lost or incomplete.

Runs ``benchmarks/service_load.py`` (the 200-run load test) with 40 runs per backend so
the suite stays within CI's time on a shared machine; the benchmark checks every run's
events (ids 1..N without a gap, the lead's stop last, ``event: end`` agreeing) and the
test asserts on its report, never on its timings.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "service_load.py"
RUNS = 40


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_concurrent_runs_all_complete_with_every_event(backend: str) -> None:
    argv = [sys.executable, str(SCRIPT), "--runs", str(RUNS), "--backend", backend, "--json"]
    argv += ["--timeout", "240"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout, done.stderr)
    report = json.loads(done.stdout)
    assert report["runs"] == RUNS
    assert report["completed"] == RUNS
    assert report["errors"] == 0, report["error_samples"]
    # the offline model is deterministic: every run has the same, complete, event stream
    assert len(report["events_per_run"]) == 1
    assert report["events_per_run"][0] > 0
    assert set(report["latency_ms"]["run"]) == {"p50", "p90", "p99", "max"}
    assert report["server_exit"] == 0
    assert not report["server_traceback"]
