"""``deputy-runtime bench`` says how long it takes, and that ``--quick`` exists, first."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from deputy_runtime._bench import _runner
from deputy_runtime._cli.bench import bench, start_message


def test_the_full_run_says_how_long_and_points_at_quick() -> None:
    full = start_message(False, _runner.FULL.reps, _runner.FULL.sizes)
    assert "several minutes" in full
    assert "pass --quick" in full
    assert "10000" in full
    quick = start_message(True, _runner.QUICK.reps, _runner.QUICK.sizes)
    assert "about a minute" in quick
    assert "--quick" not in quick


@pytest.mark.parametrize("quick", [False, True])
def test_the_message_comes_before_the_run_starts(
    quick: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The real full run takes minutes on this shared machine (and the quick one is run by
    # tests/test_bench_smoke.py), so the measuring itself is replaced here: the stand-in
    # records what had been printed when the run started and returns an empty result.
    printed_before: list[str] = []

    def run_benchmarks(config: Any, contenders: Any, progress: Any) -> dict[str, Any]:
        printed_before.append(capsys.readouterr().err)
        assert config is (_runner.QUICK if quick else _runner.FULL)
        return {"errors": []}

    # The command takes them from the deputy_runtime._bench package, so patch them there.
    monkeypatch.setattr("deputy_runtime._bench.run_benchmarks", run_benchmarks)
    monkeypatch.setattr("deputy_runtime._bench.render", lambda results: "tables")
    assert bench(argparse.Namespace(quick=quick, json=False)) == 0
    assert len(printed_before) == 1
    assert printed_before[0].startswith("deputy-runtime bench (")
    assert ("pass --quick" in printed_before[0]) is not quick
