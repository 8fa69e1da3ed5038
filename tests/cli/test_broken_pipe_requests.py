"""When the reader of stdout goes away, the run stops spending model requests.

The "provider" is a loopback OpenAI-compatible server (real sockets, tests/chat) that
plays a lead delegating to three agents and counts every request. The subagents' first
requests are held at the server until the test says so: the test reads the output until
all three have been sent, closes its end of the pipe (the reader going away, as ``| head``
does), then lets the answers through. The next event the command writes finds the pipe
closed, so the lead is interrupted before its second request: the server sees exactly
the four requests already made. A reader that keeps reading sees the lead's fifth.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.chat.agent_server import AgentServer
from tests.chat.loopback import Reply, Seen
from tests.cli._runhelp import cli, offline_env, tool_free_agents

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="needs SIGPIPE semantics"),
]

AGENTS = ("alpha", "beta", "gamma")
TIMEOUT = 60.0


class GatedServer(AgentServer):
    """Holds every subagent request until ``gate`` is set."""

    def __init__(self) -> None:
        super().__init__("openai")
        self.gate = threading.Event()

    def _answer(self, seen: Seen) -> Reply:
        if b"deputy-lead-routing" not in seen.body:
            self.gate.wait(TIMEOUT)
        return super()._answer(seen)


def _subagent_request(line: str, as_json: bool) -> bool:
    if as_json:
        return '"type":"model_request"' in line and '"delegation_id":"delegation_' in line
    return re.search(rf"\] ({'|'.join(AGENTS)}): model request #1", line) is not None


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "plain"])
@pytest.mark.parametrize("reader_leaves", [True, False], ids=["reader-leaves", "reader-stays"])
def test_closed_stdout_interrupts_before_the_next_request(
    tmp_path: Path, as_json: bool, reader_leaves: bool
) -> None:
    agents = tool_free_agents(tmp_path / "agents", *AGENTS)
    with GatedServer() as server:
        env = offline_env(OPENAI_API_KEY="sk-loopback", OPENAI_BASE_URL=server.url + "/v1")
        args = ["run", "--agents", str(agents), "--model", "openai/lead-model"]
        process = subprocess.Popen(
            cli(*args, *(["--json"] if as_json else []), "Do the work"),
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        watchdog = threading.Timer(TIMEOUT, process.kill)  # a hang fails instead of hanging
        watchdog.start()
        try:
            assert process.stdout is not None
            assert process.stderr is not None
            sent = 0
            while sent < len(AGENTS):
                line = process.stdout.readline()
                assert line, f"output ended early; stderr: {process.stderr.read()}"
                sent += _subagent_request(line, as_json)
            if reader_leaves:
                process.stdout.close()
            server.gate.set()
            if not reader_leaves:
                process.stdout.read()
            stderr = process.stderr.read()
            status = process.wait(TIMEOUT)
        finally:
            watchdog.cancel()
            server.gate.set()
            process.kill()
    assert "Traceback" not in stderr
    assert len(server.lead_models) == (1 if reader_leaves else 2), server.models
    assert len(server.models) == len(AGENTS) + len(server.lead_models)
    assert status == (141 if reader_leaves else 0), stderr
