"""``run`` gives agent files that name ``AskUserQuestion`` the ``ask_user`` tool.

On a terminal a delegation's question is asked in place (the live tree pauses) and the
answer goes back to the model; without one (pipes, ``--json``, ``serve``) the call is
answered with a tool error saying no one can answer, and the run goes on. The offline
model calls every tool it is offered once, so its subagent asks the schema's example
question ("Which option should I use?", options A and B).
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import time
from pathlib import Path

import pytest

from deputy_runtime._cli.ask import NO_ONE_TO_ASK
from tests.cli._runhelp import cli, offline_env, reap, run_cli

pytestmark = pytest.mark.slow

_AGENT = """\
---
name: asker
description: Asks the user.
tools: AskUserQuestion
---
Ask when unsure.
"""
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _agents(tmp_path: Path) -> None:
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "asker.md").write_text(_AGENT)


def test_without_a_terminal_the_question_gets_a_tool_error_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    _agents(tmp_path)
    done = run_cli("run", "--json", "--agents", "agents", "Go", cwd=tmp_path, env=offline_env())
    assert done.returncode == 0, done.stderr
    assert ": warning: tools:" not in done.stderr  # AskUserQuestion is honoured
    events = [json.loads(line) for line in done.stdout.splitlines()]
    [end] = [e for e in events if e["type"] == "tool_end" and e["tool_name"] == "ask_user"]
    assert NO_ONE_TO_ASK in str(end["error"])
    [delegation] = [e for e in events if e["type"] == "delegation_end"]
    assert delegation["status"] == "completed"


def _read_until(fd: int, text: str, buffer: bytearray, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if select.select([fd], [], [], 0.1)[0]:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                return False
            if not chunk:
                return False
            buffer.extend(chunk)
        if text in _ANSI.sub("", buffer.decode(errors="replace")):
            return True
    return False


def test_on_a_terminal_the_question_is_asked_and_answered(tmp_path: Path) -> None:
    _agents(tmp_path)
    argv = cli("run", "--agents", "agents", "Go")
    env = offline_env(COLUMNS="120", LINES="30")
    pid, fd = pty.fork()
    if pid == 0:  # the child: its standard input and output are the terminal
        os.chdir(tmp_path)
        os.execve(argv[0], argv, env)
    output = bytearray()
    try:
        assert _read_until(fd, "answer (1-2 or text):", output), output.decode(errors="replace")
        os.write(fd, b"2\n")  # the second option, B
        _read_until(fd, "\x00never", output)  # read to the end
    finally:
        status = reap(pid, fd)
        os.close(fd)
    text = _ANSI.sub("", output.decode(errors="replace"))
    assert os.waitstatus_to_exitcode(status) == 0, text
    assert "asker asks:" in text
    assert "Which option should I use?" in text
    assert "1. A" in text
    assert "2. B" in text
    assert "Traceback" not in text
    # The subagent's answer quotes its tool results, the user's choice among them.
    assert 'asker found: ask_user: {"Which option should I use?":"B"}' in text
