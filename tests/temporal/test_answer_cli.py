"""``run --temporal --json`` with a delegation that asks the user: the question is printed
(the event on stdout, how to answer on stderr), ``deputy-runtime answer`` lists and
answers it from another process, refuses a bad answer with the run's reason, and the
run completes with the answer in the delegation's conversation."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import select
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from deputy_runtime import QuestionEvent, decode_event
from deputy_runtime.chat import ContentToolResult
from deputy_runtime.runtime import DelegationEnd, StopEvent, ToolEnd
from deputy_runtime.temporal import LeadOutput, LeadWorkflow, data_converter
from tests.temporal import ask_plugin
from tests.temporal.test_run_cli import REPO_ROOT, _env

pytestmark = pytest.mark.slow  # subprocesses

QUESTION = "Which option should I use?"


def _answer_cli(address: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deputy_runtime", "answer", "--temporal", address, *args],
        cwd=REPO_ROOT, env=_env(), capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip


def test_a_question_is_answered_from_another_process(temporal_address: str, tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "asker.yaml").write_text(
        "version: 1\nname: asker\ndescription: Asks the user.\nprompt: You ask.\n"
        "tools: [ask_user]\nmax_requests: 3\n"
    )
    plugin = ["--plugin", ask_plugin.__file__]
    queue = f"deputy-cli-{uuid.uuid4().hex}"
    worker_log = open(tmp_path / "worker.log", "wb")  # noqa: SIM115 - closed below
    worker = subprocess.Popen(
        [sys.executable, "-m", "deputy_runtime", "worker", "--temporal", temporal_address,
         "--agents", str(agents), "--task-queue", queue, *plugin],
        cwd=tmp_path, env=_env(), stdout=worker_log, stderr=worker_log,
    )  # fmt: skip
    worker_log.close()
    notes = tmp_path / "run.stderr"
    with open(notes, "wb") as err:
        runner = subprocess.Popen(
            [sys.executable, "-m", "deputy_runtime", "run", "--agents", str(agents), "--json",
             "--temporal", temporal_address, "--task-queue", queue, *plugin, "Ask away"],
            cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=err,
        )  # fmt: skip
    try:
        assert runner.stdout is not None
        lines: list[bytes] = []
        question = None
        while question is None:  # read the event stream until the question appears
            line = runner.stdout.readline()
            assert line, f"the run ended without asking: {notes.read_text()}"
            lines.append(line)
            event = decode_event(line)
            if isinstance(event, QuestionEvent):
                question = event
        deadline = time.monotonic() + 60
        while "answer it with" not in notes.read_text():  # stderr says how to answer
            assert time.monotonic() < deadline, notes.read_text()
            time.sleep(0.05)  # poll interval of the stderr check
        stderr = notes.read_text()
        [workflow_id] = {w for w in stderr.split() if w.startswith("deputy-run-")}
        assert (
            f"deputy-runtime answer --temporal {temporal_address} {workflow_id} "
            f"{question.question_id} " in stderr
        )
        listed = _answer_cli(temporal_address, workflow_id)
        assert listed.returncode == 0, listed.stderr
        [pending] = [json.loads(line) for line in listed.stdout.splitlines()]
        assert pending["question_id"] == question.question_id
        assert pending["questions"] == [{"question": QUESTION, "options": ["A", "B"]}]
        refused = _answer_cli(
            temporal_address, workflow_id, question.question_id, '{"Not asked?": "x"}'
        )
        assert refused.returncode == 1
        assert "'Not asked?' is not one of the questions asked" in refused.stderr
        bad = _answer_cli(temporal_address, workflow_id, question.question_id, "[1]")
        assert bad.returncode == 2
        assert "ANSWERS must be a JSON object" in bad.stderr
        done = _answer_cli(
            temporal_address, workflow_id, question.question_id, json.dumps({QUESTION: "B"})
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout == '{"Which option should I use?":"B"}\n'
        rest, _ = runner.communicate(timeout=180)
    finally:
        for p in (runner, worker):
            if p.poll() is None:
                p.kill()
            p.wait()
    assert runner.returncode == 0, notes.read_text()
    events = [decode_event(line) for line in [*lines, *rest.splitlines()]]
    [end] = [e for e in events if isinstance(e, DelegationEnd)]
    assert (end.agent_name, end.status, end.stop_reason) == ("asker", "completed", "complete")
    [ask_end] = [
        e
        for e in events
        if isinstance(e, ToolEnd)
        and (e.delegation_id, e.tool_call_id) == (question.delegation_id, question.tool_call_id)
    ]
    assert (ask_end.tool_name, ask_end.error) == ("ask_user", None)
    assert ask_end.result_preview == '{"Which option should I use?":"B"}'
    last = events[-1]
    assert isinstance(last, StopEvent)
    assert (last.delegation_id, last.stop_reason) == (None, "complete")


def _read_until(fd: int, needle: bytes, seen: bytearray, deadline: float) -> None:
    """Read the terminal's output into ``seen`` until it holds ``needle``."""
    while needle not in seen:
        assert time.monotonic() < deadline, seen.decode(errors="replace")[-2000:]
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the command exited and closed the terminal
                chunk = b""
            assert chunk, f"the terminal closed: {seen.decode(errors='replace')[-2000:]}"
            seen.extend(chunk)


def test_on_a_terminal_run_asks_and_sends_the_answer(temporal_address: str, tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "asker.yaml").write_text(
        "version: 1\nname: asker\ndescription: Asks the user.\nprompt: You ask.\n"
        "tools: [ask_user]\nmax_requests: 3\n"
    )
    plugin = ["--plugin", ask_plugin.__file__]
    queue = f"deputy-cli-{uuid.uuid4().hex}"
    worker_log = open(tmp_path / "worker.log", "wb")  # noqa: SIM115 - closed below
    worker = subprocess.Popen(
        [sys.executable, "-m", "deputy_runtime", "worker", "--temporal", temporal_address,
         "--agents", str(agents), "--task-queue", queue, *plugin],
        cwd=tmp_path, env=_env(), stdout=worker_log, stderr=worker_log,
    )  # fmt: skip
    worker_log.close()
    main, side = pty.openpty()
    runner = subprocess.Popen(
        [sys.executable, "-m", "deputy_runtime", "run", "--agents", str(agents),
         "--temporal", temporal_address, "--task-queue", queue, *plugin, "Ask away"],
        cwd=tmp_path, env={**_env(), "NO_COLOR": "1"}, stdin=side, stdout=side,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    os.close(side)
    seen = bytearray()
    try:
        deadline = time.monotonic() + 180
        _read_until(main, b"asker asks:", seen, deadline)
        _read_until(main, b"answer (1-2 or text): ", seen, deadline)
        assert b"    2. B" in seen
        os.write(main, b"2\n")
        _read_until(main, b"\nAnswer:", seen, deadline)
        runner.wait(timeout=180)
        stderr = runner.stderr.read().decode() if runner.stderr else ""
    finally:
        for p in (runner, worker):
            if p.poll() is None:
                p.kill()
            p.wait()
        os.close(main)
    assert runner.returncode == 0, stderr
    [workflow_id] = set(re.findall(r"workflow (deputy-run-\w+)", seen.decode(errors="replace")))
    out = asyncio.run(_result(temporal_address, workflow_id))
    [result] = out.subagent_results
    assert result is not None
    values = [
        c.value
        for t in result.turns
        for c in t.contents
        if isinstance(c, ContentToolResult) and c.value and "Which option" in str(c.value)
    ]
    assert values == ['{"Which option should I use?":"B"}']


async def _result(address: str, workflow_id: str) -> LeadOutput:
    client = await Client.connect(address, data_converter=data_converter)
    out: LeadOutput = await client.get_workflow_handle_for(LeadWorkflow.run, workflow_id).result()
    return out
