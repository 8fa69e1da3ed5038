"""The live view on a real terminal: a pty, and tmux for what a person actually sees.

The pty test reads the raw bytes (frames redrawn in place with ANSI cursor movement) and
sends Ctrl-C through the terminal driver, as a keyboard would. The tmux test captures the
rendered screen, so it checks the result of those escape codes: one tree, updated in
place, not a scroll of frames.
"""

from __future__ import annotations

import os
import pty
import re
import select
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli._runhelp import SLOW_PLUGIN, cli, offline_env, reap, tool_free_agents

pytestmark = pytest.mark.slow

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _read_pty(fd: int, until: str | None, timeout: float, buffer: bytearray) -> bool:
    """Read from the pty master into ``buffer`` until ``until`` shows up (or EOF)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                return until is None
            if not chunk:
                return until is None
            buffer.extend(chunk)
        if until is not None and until in _ANSI.sub("", buffer.decode(errors="replace")):
            return True
    return False


def test_live_view_redraws_in_place_on_a_pty_and_ctrl_c_stops_it(tmp_path: Path) -> None:
    tool_free_agents(tmp_path / "agents", "quick", "slow_one")
    markers = tmp_path / "markers"
    markers.mkdir()
    env = offline_env(SLOW_PLUGIN_MARKERS=str(markers), COLUMNS="120", LINES="30")
    argv = cli(
        "run", "--plugin", str(SLOW_PLUGIN), "--model", "slow/v1", "--agents", "agents", "Go"
    )
    pid, fd = pty.fork()
    if pid == 0:  # the child: a session leader whose controlling terminal is the pty
        os.chdir(tmp_path)
        os.execve(argv[0], argv, env)
    output = bytearray()
    try:
        assert _read_pty(fd, "slow_one", 30, output), output.decode(errors="replace")
        time.sleep(0.6)  # let the ticker redraw the frame at least once more
        _read_pty(fd, "never-printed", 0.2, output)
        os.write(fd, b"\x03")  # Ctrl-C, delivered as SIGINT by the terminal driver
        _read_pty(fd, None, 30, output)
    finally:
        status = reap(pid, fd)
        os.close(fd)
    text = output.decode()
    assert os.waitstatus_to_exitcode(status) == 130, text
    assert "Traceback" not in text
    assert re.search(r"\x1b\[\d+F", text), "no in-place redraw (cursor up)"
    assert "\x1b[?25l" in text
    assert text.rstrip().count("\x1b[?25h") >= 1
    frames = [_ANSI.sub("", f) for f in text.split("\x1b[?25l")[1:]]
    running = [f for f in frames if re.search(r"└─ slow_one\s+running", f)]
    assert running, "no frame showed the slow delegation running"
    frame = running[-1]
    header = r"^agent\s+status\s+elapsed\s+requests\s+tokens\s+cost\s+last tool"
    assert re.search(header, frame, re.M)
    assert re.search(r"^lead\s+running\s+\d+\.\ds\s+\d+/25", frame, re.M)
    quick = r"├─ quick\s+completed\s+\d+\.\ds\s+2/4\s+30\s+-\s+lookup\(query='test'\)"
    assert re.search(quick, frame)
    plain = _ANSI.sub("", text)
    assert re.search(r"^delegation_\w+\s+slow_one\s+stopped\s+interrupted", plain, re.M)
    assert sorted(p.name[:7] for p in markers.iterdir()) == ["cleaned"] * 2 + ["created"] * 2


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_live_view_as_seen_in_tmux(tmp_path: Path) -> None:
    agents = tool_free_agents(tmp_path / "agents", "quick", "slow_one", "slow_two")
    env = offline_env(SLOW_PLUGIN_MARKERS="", TMUX_TMPDIR=str(tmp_path))
    env.pop("TMUX", None)
    command = shlex.join(
        cli(
            "run", "--plugin", str(SLOW_PLUGIN), "--model", "slow/v1", "--agents", str(agents), "Go"
        )
    )
    tmux = ["tmux", "-L", "deputy-test"]
    shell = f"cd {shlex.quote(str(tmp_path))} && {command}; echo EXIT=$?; sleep 60"
    subprocess.run(
        [
            *tmux,
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-x",
            "120",
            "-y",
            "30",
            "-s",
            "run",
            shell,
        ],
        env=env,
        check=True,
    )

    def screen() -> str:
        return subprocess.run(
            [*tmux, "capture-pane", "-p", "-t", "run"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    def wait_for(pattern: str) -> str:
        deadline = time.monotonic() + 30
        shown = ""
        while time.monotonic() < deadline:
            shown = screen()
            if re.search(pattern, shown, re.M):
                return shown
            time.sleep(0.1)
        raise AssertionError(f"{pattern!r} never appeared on screen:\n{shown}")

    try:
        live = wait_for(r"└─ slow_two\s+running")
        time.sleep(0.6)
        live = wait_for(r"└─ slow_two\s+running")  # still one tree after more redraws
        assert len(re.findall(r"^lead\s", live, re.M)) == 1, live
        assert len(re.findall(r"^agent\s+status", live, re.M)) == 1, live
        assert re.search(r"^├─ quick\s+completed", live, re.M), live
        assert re.search(r"^├─ slow_one\s+running\s+\d+\.\ds\s+1/4", live, re.M), live
        subprocess.run([*tmux, "send-keys", "-t", "run", "C-c"], env=env, check=True)
        final = wait_for(r"^EXIT=\d+")
        assert "EXIT=130" in final, final
        assert re.search(r"^└─ slow_two\s+stopped \(interrupted\)", final, re.M), final
        assert "Interrupted" in final
        assert "Traceback" not in final
    finally:
        subprocess.run([*tmux, "kill-server"], env=env, check=False, capture_output=True)
