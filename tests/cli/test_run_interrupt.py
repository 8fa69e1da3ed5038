"""Ctrl-C mid-run: exit status 130, every owned resource cleaned, summary, no traceback.

The run uses ``slow_plugin.py``: a model that keeps agents named ``slow*`` waiting, and
owned resources whose factory and cleanup leave marker files, so the test can see that
cleanup ran exactly once for every delegation that was set up (O_EXCL markers).
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli._runhelp import (
    SLOW_PLUGIN,
    cli,
    offline_env,
    read_until,
    tool_free_agents,
    wait_for_markers,
)

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_mid_run_stops_cleanly(tmp_path: Path, backend: str, signum: int) -> None:
    agents = tool_free_agents(tmp_path / "agents", "quick", "slow_one", "slow_two")
    markers = tmp_path / "markers"
    markers.mkdir()
    env = offline_env(SLOW_PLUGIN_MARKERS=str(markers), SLOW_PLUGIN_SECONDS="60")
    argv = cli(
        "run",
        *("--plugin", str(SLOW_PLUGIN), "--model", "slow/v1", "--backend", backend),
        *("--agents", str(agents), "Do everything"),
    )
    process = subprocess.Popen(
        argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        head = read_until(process, r"quick: delegation completed", timeout=30)
        while head.count("delegation started") < 3:
            head += read_until(process, r"delegation started", timeout=30)
        wait_for_markers(markers, "created-", 3)
        started = time.monotonic()
        process.send_signal(signum)
        rest, stderr = process.communicate(timeout=30)
        stop_seconds = time.monotonic() - started
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    out = head + rest
    assert process.returncode == 130, (out, stderr)
    assert "Traceback" not in stderr, stderr
    # The slow model would answer after 60 s; the run stopped long before that.
    assert stop_seconds < 30
    created = {p.name.removeprefix("created-") for p in markers.glob("created-*")}
    cleaned = {p.name.removeprefix("cleaned-") for p in markers.glob("cleaned-*")}
    assert len(created) == 3
    assert cleaned == created
    rows = {
        m.group(1): (m.group(2), m.group(3))
        for m in re.finditer(r"^delegation_\w+\s+(\w+)\s+(\w+)\s+(\w+)", out, re.M)
    }
    assert rows["quick"] == ("completed", "complete")
    assert rows["slow_one"] == ("stopped", "interrupted")
    assert rows["slow_two"] == ("stopped", "interrupted")
    assert "Interrupted: 1 of 3 delegations had completed" in out
    assert re.search(r"lead: run ended \(interrupted\)", out)
