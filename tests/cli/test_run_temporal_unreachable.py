"""``run --temporal`` against a server that is not there: one error line, no workflow line."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.cli._runhelp import REPO_ROOT, run_cli


def _closed_port() -> int:
    # Bind and release a port: nothing listens on it afterwards, so connecting is refused.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_an_unreachable_server_prints_no_workflow_line(tmp_path: Path) -> None:
    address = f"127.0.0.1:{_closed_port()}"
    agents = str(REPO_ROOT / "examples" / "agents")
    done = run_cli("run", "--agents", agents, "--temporal", address, "Go", cwd=tmp_path)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert f"deputy-runtime run: cannot start the run on Temporal at {address}" in done.stderr
    assert "workflow deputy-run-" not in done.stdout + done.stderr
    assert "Model:" not in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
