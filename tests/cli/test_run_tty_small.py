"""The live view in a terminal shorter than the tree: six rows, eight delegations.

A frame taller than the terminal cannot be redrawn in place: the cursor cannot move above
the top of the screen, so every redraw scrolled a fresh copy of the tree into the
scrollback (an audit counted the header 51 times in tmux at 100x6). Frames now keep to
``rows - 1`` lines and say how many delegations they hide. The pty test checks every raw
frame; the tmux test checks the rendered screen and the whole scrollback.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import shlex
import shutil
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest

from tests.cli._runhelp import SLOW_PLUGIN, cli, offline_env, reap, tool_free_agents

pytestmark = pytest.mark.slow

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_HEADER = re.compile(r"^agent\s+status\s+elapsed\s+requests", re.M)
_NOTE = re.compile(r"^… (\d+) more delegations \((\d+) running\)$", re.M)
# Four that answer at once and four that wait before each reply (see slow_plugin.py), so
# the view has running and finished delegations, more than six rows can show.
_AGENTS = ("quick_a", "quick_b", "quick_c", "quick_d", "slow_a", "slow_b", "slow_c", "slow_d")
ROWS, COLUMNS = 6, 100


def _command(agents: Path) -> list[str]:
    return cli(
        "run", "--plugin", str(SLOW_PLUGIN), "--model", "slow/v1", "--agents", str(agents), "Go"
    )


def _read_all(fd: int, timeout: float) -> bytes:
    """Everything the child writes to the pty until it closes it (bounded by ``timeout``)."""
    output = bytearray()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if not ready:
            continue  # bounded by the deadline even if the child goes quiet
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            return bytes(output)
        if not chunk:
            return bytes(output)
        output.extend(chunk)
    raise AssertionError(
        f"the run did not finish in {timeout}s:\n{output.decode(errors='replace')}"
    )


def test_every_frame_fits_a_six_row_pty(tmp_path: Path) -> None:
    agents = tool_free_agents(tmp_path / "agents", *_AGENTS)
    # Stale LINES/COLUMNS exports: the size must come from the terminal itself.
    env = offline_env(SLOW_PLUGIN_MARKERS="", SLOW_PLUGIN_SECONDS="1", LINES="40", COLUMNS="200")
    argv = _command(agents)
    pid, fd = pty.fork()
    if pid == 0:  # the child: give its terminal 6 rows x 100 columns, then run the CLI
        fcntl.ioctl(1, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
        os.chdir(tmp_path)
        os.execve(argv[0], argv, env)
    try:
        output = _read_all(fd, 60)
    finally:
        status = reap(pid, fd)
        os.close(fd)
    text = output.decode()
    assert os.waitstatus_to_exitcode(status) == 0, text
    assert "Traceback" not in text
    moves = [int(n) for n in re.findall(r"\x1b\[(\d+)F", text)]
    assert moves, "no in-place redraw (cursor up)"
    assert max(moves) <= ROWS - 1
    # Each redraw: hide the cursor, move up, the lines, clear below.
    frames = [chunk.split("\x1b[J")[0] for chunk in text.split("\x1b[?25l")[1:]]
    assert len(frames) >= 5
    notes = []
    for frame in frames:
        lines = _ANSI.sub("", frame).splitlines()
        assert len(lines) <= ROWS - 1, lines
        assert all(len(line) <= COLUMNS - 1 for line in lines), lines
        assert len(_HEADER.findall("\n".join(lines))) == 1, lines
        notes += _NOTE.findall("\n".join(lines))
    assert notes, "no frame said how many delegations were hidden"
    hidden, running = notes[-1]  # the final frame: all eight settled, two shown
    assert (hidden, running) == ("6", "0")
    summary = _ANSI.sub("", text.split("\x1b[?25h")[-1])
    for name in _AGENTS:  # the summary table after the live view still lists every one
        assert re.search(rf"^delegation_\w+\s+{name}\s+completed", summary, re.M), summary


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_a_six_row_tmux_pane_shows_one_tree(tmp_path: Path) -> None:
    agents = tool_free_agents(tmp_path / "agents", *_AGENTS)
    env = offline_env(SLOW_PLUGIN_MARKERS="", SLOW_PLUGIN_SECONDS="1.5", TMUX_TMPDIR=str(tmp_path))
    env.pop("TMUX", None)
    tmux = ["tmux", "-L", "deputy-small"]
    command = shlex.join(_command(agents))
    shell = f"cd {shlex.quote(str(tmp_path))} && {command}; echo EXIT=$?; sleep 60"
    size = ["-x", str(COLUMNS), "-y", str(ROWS)]
    subprocess.run(
        [*tmux, "-f", "/dev/null", "new-session", "-d", *size, "-s", "run", shell],
        env=env,
        check=True,
    )

    def capture(*extra: str) -> str:
        return subprocess.run(
            [*tmux, "capture-pane", "-p", "-t", "run", *extra],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    def wait_for(pattern: str, seen: list[str]) -> str:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            seen.append(capture())
            if re.search(pattern, seen[-1], re.M):
                return seen[-1]
            time.sleep(0.1)
        raise AssertionError(f"{pattern!r} never appeared on screen:\n{seen[-1:]}")

    screens: list[str] = []
    try:
        live = wait_for(r"^… \d+ more delegations \(\d+ running\)", screens)
        assert re.search(r"^(├─|└─) slow_\w\s+running", live, re.M), live
        final = wait_for(r"^EXIT=\d+", screens)
        scrollback = capture("-S", "-400")
    finally:
        subprocess.run([*tmux, "kill-server"], env=env, check=False, capture_output=True)
    assert "EXIT=0" in final, final
    assert len(_HEADER.findall(live)) == 1, live
    for screen in screens:  # never two copies of the tree on screen, mid-redraw or not
        assert len(_HEADER.findall(screen)) <= 1, screen
    # Redrawn in place all along: the whole scrollback holds one tree, the final frame.
    assert len(_HEADER.findall(scrollback)) == 1, scrollback
    assert _NOTE.search(scrollback), scrollback
    assert "Traceback" not in scrollback
