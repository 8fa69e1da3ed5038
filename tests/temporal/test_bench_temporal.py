"""Smoke test of ``benchmarks/temporal_overhead.py``: correctness, never speed.

Runs the benchmark's quick mode (N = 2, one repetition) as a user runs it, in a
subprocess, against the session's dev server. The benchmark itself checks that every
contender's lead answered ``done:N`` on every run (it exits non-zero otherwise); this test
checks the exit status and that the history counts describe the shape that was asked
for. Timing figures are not asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks" / "temporal_overhead.py"

pytestmark = pytest.mark.slow


def _pydantic_ai_temporal() -> bool:
    """Whether the installed pydantic-ai has the Temporal integration the peer uses."""
    try:
        from pydantic_ai.durable_exec.temporal import TemporalDurability  # noqa: F401
    except ImportError:
        return False
    return True


def test_quick_mode_runs_every_contender_and_counts_histories(
    temporal_address: str, tmp_path: Path
) -> None:
    out = tmp_path / "temporal.json"
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--temporal", temporal_address,
         "--out", str(out), "--no-plot"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    results = json.loads(out.read_text(encoding="utf-8"))
    n = results["meta"]["n"]
    assert n == 2
    summary = results["summary"]
    expected = {"in_process", "deputy_temporal", "temporal_floor"}
    if _pydantic_ai_temporal():
        expected |= {"pai_temporal_child", "pai_temporal_inline"}
    else:
        assert set(results["meta"]["skipped"]) == {"pai_temporal_child", "pai_temporal_inline"}
    assert set(summary["per_delegation_us"]) == expected
    for key in expected:
        walls = results["raw"]["walls"][key]
        assert set(walls) == {"seq 0", f"seq {n}", f"par {n}"}
        assert all(len(v) == 1 for v in walls.values())
    deputy = summary["history_per_delegation"]["deputy_temporal"]
    # One child workflow per delegation; one model request of the child's per delegation,
    # plus the lead's extra request: one per delegation in seq, one for all N in par.
    assert deputy["seq"]["child_workflows"] == deputy["par"]["child_workflows"] == 1
    assert deputy["seq"]["activities"] == 2
    assert deputy["par"]["activities"] == 1 + 1 / n
    assert deputy["empty_run"]["activities"] == 1
    # The same activities and child workflows as bare Temporal. (Workflow tasks and so
    # events are not compared: how many completions one workflow task picks up depends
    # on timing.)
    floor = summary["history_per_delegation"]["temporal_floor"]
    for mode in ("seq", "par"):
        for count in ("activities", "child_workflows"):
            assert deputy[mode][count] == floor[mode][count], (mode, count)
    if "pai_temporal_child" in expected:
        child = summary["history_per_delegation"]["pai_temporal_child"]
        inline = summary["history_per_delegation"]["pai_temporal_inline"]
        assert child["seq"]["child_workflows"] == 1
        assert inline["seq"]["child_workflows"] == 0
        assert "deputy on Temporal / PydanticAI" in done.stdout
