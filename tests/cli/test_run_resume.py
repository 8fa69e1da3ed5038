"""``deputy-runtime run --checkpoint-dir`` killed mid-run, then ``--resume``d.

A real process runs the lead on ``steps_plugin.py`` (one delegation per turn, decided
from the conversation) and is killed with SIGKILL while its second delegation waits: its
checkpoint (saved at the turn boundary before that delegation's turn) holds the first
delegation. A second process resumes it: the first delegation is not run again, its record
is intact, and the whole run's usage is the checkpoint's plus what the rest used.
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from deputy_runtime.runtime import AgentUsage, DelegationStatus, decode_checkpoint
from tests.cli._runhelp import cli, offline_env, read_until, run_cli, tool_free_agents

pytestmark = pytest.mark.slow

STEPS_PLUGIN = Path(__file__).resolve().parent / "steps_plugin.py"
# Each reply of the steps model: 1 request, 10 input and 5 output tokens.
STEP = AgentUsage(requests=1, input_tokens=10, output_tokens=5)


def _wait_for(path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not appear within {timeout}s")
        time.sleep(0.02)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_killed_run_resumes_with_records_and_exact_usage(tmp_path: Path, backend: str) -> None:
    agents = tool_free_agents(tmp_path / "agents", "a_first", "hang_second")
    checkpoints = tmp_path / "checkpoints"
    hang = tmp_path / "hanging"
    common = ("--plugin", str(STEPS_PLUGIN), "--model", "steps/v1", "--backend", backend)
    argv = cli("run", *common, "--agents", str(agents), "--checkpoint-dir", str(checkpoints))
    process = subprocess.Popen(
        [*argv, "Do the steps"],
        cwd=tmp_path,
        env=offline_env(STEPS_PLUGIN_HANG=str(hang)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        head = read_until(process, r"^Checkpoint: run ", timeout=60)
        match = re.search(r"Checkpoint: run (\S+) saved in", head)
        assert match is not None, head
        run_id = match.group(1)
        _wait_for(hang)  # the second delegation is mid-request: kill the process now
        saved_bytes = (checkpoints / f"{run_id}.checkpoint").read_bytes()
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == -signal.SIGKILL
    # Nothing was written after the boundary before the second delegation's turn.
    assert (checkpoints / f"{run_id}.checkpoint").read_bytes() == saved_bytes
    saved = decode_checkpoint(saved_bytes, run_id)
    assert [(r.agent_name, r.status) for r in saved.subagents] == [
        ("a_first", DelegationStatus.COMPLETED)
    ]
    # The lead's first request and its delegate call, and a_first's request.
    assert saved.usage == AgentUsage(requests=2, tool_calls=1, input_tokens=20, output_tokens=10)

    resumed = run_cli(
        "run",
        *common,
        *("--agents", str(agents), "--checkpoint-dir", str(checkpoints), "--resume", run_id),
        cwd=tmp_path,
        env=offline_env(),
        timeout=120,
    )
    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)
    out = resumed.stdout
    assert f"Checkpoint: run {run_id} resumed in" in out
    rows = {
        m.group(1): (m.group(2), m.group(3), m.group(4))
        for m in re.finditer(r"^(delegation_\w+)\s+(\w+)\s+(\w+)\s+(\w+)", out, re.M)
    }
    first_id = saved.subagents[0].delegation_id
    by_agent = {
        agent: (short_id, status, reason) for short_id, (agent, status, reason) in rows.items()
    }
    assert len(rows) == 2
    # The first delegation is the saved one (its id, shortened in the table), not run again.
    assert by_agent["a_first"] == (first_id[: len("delegation_") + 8], "completed", "complete")
    assert by_agent["hang_second"][1:] == ("completed", "complete")
    assert "a_first: delegation started" not in out
    # Whole run = checkpoint + the rest: the lead's 2 requests (one with a delegate call)
    # and hang_second's one.
    whole = saved.usage + AgentUsage(requests=3, tool_calls=1, input_tokens=30, output_tokens=15)
    total = re.search(r"^total\s+lead \+ subagents\s+(\d+)\s+(\d+)", out, re.M)
    assert total is not None, out
    assert (int(total.group(1)), int(total.group(2))) == (whole.requests, whole.total_tokens)
    assert "done after 2 steps" in out
    assert list(checkpoints.iterdir()) == []  # completed: nothing left to resume


def test_resume_refuses_bad_options_and_checkpoints(tmp_path: Path) -> None:
    agents = tool_free_agents(tmp_path / "agents", "a_first")
    base = ("run", "--agents", str(agents))
    refused = run_cli(*base, "--resume", "run_x", cwd=tmp_path)
    assert refused.returncode == 2
    assert "--resume needs --checkpoint-dir" in refused.stderr
    ck = tmp_path / "ck"
    ck.mkdir()
    with_task = run_cli(*base, "--checkpoint-dir", str(ck), "--resume", "run_x", "T", cwd=tmp_path)
    assert with_task.returncode == 2
    assert "TASK and --resume do not combine" in with_task.stderr
    missing = run_cli(*base, "--checkpoint-dir", str(ck), "--resume", "run_x", cwd=tmp_path)
    assert missing.returncode == 2
    assert "no checkpoint of that run" in missing.stderr
    (ck / "run_x.checkpoint").write_bytes(b'{"format": "deputy_checkpoint", "version": 1}')
    damaged = run_cli(*base, "--checkpoint-dir", str(ck), "--resume", "run_x", cwd=tmp_path)
    assert damaged.returncode == 2
    assert "is not a checkpoint envelope" in damaged.stderr
    assert "Model:" not in damaged.stdout  # refused before anything was announced
    no_task = run_cli(*base, cwd=tmp_path)
    assert no_task.returncode == 2
    assert "TASK is missing" in no_task.stderr
    durable = run_cli(
        *base, "--checkpoint-dir", str(ck), "--temporal", "127.0.0.1:1", "T", cwd=tmp_path
    )
    assert durable.returncode == 2
    assert "--checkpoint-dir and --temporal do not combine" in durable.stderr
