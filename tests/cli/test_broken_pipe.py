"""A reader that goes away (``deputy-runtime ... | head``) never produces a traceback.

Plain output and ``--json`` both end the command with status 141 (killed by SIGPIPE, as
Unix tools report it): the run is interrupted at its next boundary, so no more model
requests are spent (test_broken_pipe_requests.py counts them at a loopback server)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.cli._runhelp import EXAMPLE_AGENTS, REPO_ROOT, cli, offline_env

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="needs SIGPIPE semantics"),
    pytest.mark.slow,
]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("run", "--agents", str(EXAMPLE_AGENTS), "Review the examples directory"), 141),
        (("run", "--json", "--agents", str(EXAMPLE_AGENTS), "Review the examples"), 141),
        (("list", str(EXAMPLE_AGENTS)), 141),
        (("schema",), 141),
    ],
)
def test_closed_stdout_ends_quietly(args: tuple[str, ...], expected: int) -> None:
    process = subprocess.Popen(
        cli(*args),
        cwd=REPO_ROOT,
        env=offline_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    process.stdout.close()  # the reader is gone before the first line is written
    try:
        stderr = process.stderr.read().decode()
        status = process.wait(timeout=60)
    finally:
        process.kill()
    assert "Traceback" not in stderr
    assert "Exception ignored" not in stderr
    assert status == expected
