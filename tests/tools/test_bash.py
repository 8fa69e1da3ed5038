"""The bash tool: real commands in the real bubblewrap sandbox, on both backends.

Without ``bwrap`` on PATH the sandboxed tests skip, except under CI (``CI`` set), where
they fail: CI installs bubblewrap.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from deputy_runtime import SandboxUnavailableError, ToolArgumentError
from deputy_runtime.tools import BashLimits, BashSandbox, BashTools, tools_bash

pytestmark = pytest.mark.anyio

if shutil.which("bwrap") is None and not os.environ.get("CI"):
    pytest.skip("bubblewrap (bwrap) is not installed", allow_module_level=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0): read its state.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


async def _gone(pid: int) -> bool:
    """Whether ``pid`` is gone once SIGKILL has been delivered; a killed process takes a
    moment to exit on a loaded machine (the bound only guards against a hang)."""
    with anyio.move_on_after(30):
        while _alive(pid):
            await anyio.sleep(0.01)
    return not _alive(pid)


@pytest.fixture
def listener() -> Iterator[int]:
    """A loopback TCP server the sandbox must not reach (its port)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        server.close()


async def test_a_command_runs_in_the_working_directory(tmp_path: Path) -> None:
    bash = tools_bash(tmp_path)
    out = await bash.bash("echo hello > made.txt && cat made.txt && pwd")
    assert out.splitlines() == ["hello", str(tmp_path.resolve())]
    assert (tmp_path / "made.txt").read_text() == "hello\n"


async def test_the_exit_code_and_stderr_reach_the_model(tmp_path: Path) -> None:
    out = await tools_bash(tmp_path).bash("echo out; echo err >&2; exit 3")
    assert out.splitlines() == ["out", "err", "Exit code 3"]


async def test_writing_outside_the_working_directory_fails(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    outside = tmp_path / "outside.txt"
    out = await tools_bash(work).bash(f"echo x > {outside}; echo x > /etc/deputy-test")
    assert "Read-only file system" in out
    assert not outside.exists()
    assert not Path("/etc/deputy-test").exists()


async def test_tmp_is_private(tmp_path: Path) -> None:
    marker = Path("/tmp") / f"deputy-bash-{os.getpid()}-{tmp_path.name}"
    try:
        out = await tools_bash(tmp_path).bash(f"echo inside > {marker} && cat {marker}")
        assert out == "inside"
        assert not marker.exists()  # it went to the sandbox's own /tmp
    finally:
        marker.unlink(missing_ok=True)


async def test_the_network_is_off_unless_allowed(tmp_path: Path, listener: int) -> None:
    probe = f"exec 3<>/dev/tcp/127.0.0.1/{listener} && echo connected"
    refused = await tools_bash(tmp_path).bash(probe)
    assert "connected" not in refused
    assert "Exit code 1" in refused
    allowed = await tools_bash(tmp_path, network=True).bash(probe)
    assert allowed == "connected"


async def test_the_environment_is_small(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    bash = tools_bash(tmp_path, env={"GREETING": "hi"})
    out = await bash.bash('echo "[$OPENAI_API_KEY] $GREETING $HOME"')
    assert out == f"[] hi {tmp_path.resolve()}"


async def test_permission_rules_refuse_before_anything_runs(tmp_path: Path) -> None:
    bash = tools_bash(tmp_path, allow=["Bash(echo:*)"], deny=["Bash(rm:*)"])
    assert await bash.bash("echo fine") == "fine"
    with pytest.raises(ToolArgumentError, match="not allowed by the Bash allow rules"):
        await bash.bash("echo fine; touch sneaky")
    with pytest.raises(ToolArgumentError, match="refused by the Bash deny rule"):
        await bash.bash("echo $(rm -rf x)")
    assert not (tmp_path / "sneaky").exists()


async def test_endless_output_is_capped(tmp_path: Path) -> None:
    bash = tools_bash(tmp_path, limits=BashLimits(output_bytes=1000, timeout=5))
    out = await bash.bash("head -c 5000000 /dev/zero | tr '\\0' y")
    first, dropped = out.split("\n", 1)
    assert first == "y" * 1000
    assert dropped == "[4999000 more bytes of stdout were dropped]"


async def test_the_time_limit_kills_the_whole_command(tmp_path: Path) -> None:
    bash = tools_bash(tmp_path, sandbox=BashSandbox.NONE)
    # Two seconds leave a loaded machine time to write both pids before the limit.
    out = await bash.bash("echo $$ > pid; sleep 300 & echo $! > child; wait", timeout=2000)
    assert "timed out after 2 s" in out
    for name in ("pid", "child"):
        assert await _gone(int((tmp_path / name).read_text()))


async def test_a_cancelled_call_leaves_no_process(tmp_path: Path) -> None:
    bash = tools_bash(tmp_path, sandbox=BashSandbox.NONE)
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(bash.bash, "echo $$ > pid; sleep 300 & echo $! > child; wait")
            while not (tmp_path / "child").exists() or not (tmp_path / "child").read_text():
                await anyio.sleep(0.01)
            scope.cancel()
    for name in ("pid", "child"):
        assert await _gone(int((tmp_path / name).read_text()))


async def test_a_sandboxed_command_that_left_a_child_behind_returns(tmp_path: Path) -> None:
    # The child holds stdout open; it dies with the command's PID namespace.
    out = await tools_bash(tmp_path).bash("sleep 300 & echo started")
    assert out == "started"


async def test_background_commands_are_read_stopped_and_cleaned_up(tmp_path: Path) -> None:
    async with tools_bash(tmp_path, sandbox=BashSandbox.NONE) as shell:
        started = await shell.bash(
            "echo $$ > pid; echo one; exec sleep 300", run_in_background=True
        )
        assert started.startswith("Started in the background with id bash_1")
        seen: list[str] = []
        while "one" not in seen:
            lines = (await shell.bash_output("bash_1")).splitlines()
            assert lines[0] == "bash_1: running"
            seen += lines[1:]
            await anyio.sleep(0.01)
        assert seen == ["one"]  # each read hands out only what is new
        second = await shell.bash_output("bash_1")
        assert second == "bash_1: running"  # nothing new since the last read
        assert await shell.kill_shell("bash_1") == "bash_1 was stopped"
        assert await _gone(int((tmp_path / "pid").read_text()))
        assert (await shell.bash_output("bash_1")).startswith("bash_1: exited with code -9")

        await shell.bash("echo $$ > other; exec sleep 300", run_in_background=True)
        while not (tmp_path / "other").exists() or not (tmp_path / "other").read_text():
            await anyio.sleep(0.01)
        other = int((tmp_path / "other").read_text())
        with pytest.raises(ToolArgumentError, match="no background command has id 'bash_9'"):
            await shell.bash_output("bash_9")
    # Leaving the owner killed the one still running.
    assert await _gone(other)


async def test_background_needs_an_open_owner(tmp_path: Path) -> None:
    with pytest.raises(ToolArgumentError, match="needs the shell tools' owner open"):
        await tools_bash(tmp_path).bash("sleep 1", run_in_background=True)


async def test_a_missing_sandbox_refuses_instead_of_running_unsandboxed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(SandboxUnavailableError, match="apt-get install bubblewrap"):
        await tools_bash(tmp_path).bash("touch ran")
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize(
    ("timeout", "message"),
    [(0, "> 0 milliseconds"), (700_000, "at most 600000 ms"), ("soon", "number")],
)
async def test_bad_timeouts_are_refused(tmp_path: Path, timeout: object, message: str) -> None:
    with pytest.raises(ToolArgumentError, match=message):
        await tools_bash(tmp_path).bash("true", timeout=timeout)  # type: ignore[arg-type]


def test_bad_setup_names_the_argument(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"BashLimits\.timeout"):
        BashLimits(timeout=0)
    with pytest.raises(ValueError, match="must not exceed max_timeout"):
        BashLimits(timeout=10, max_timeout=5)
    with pytest.raises(Exception, match="is not a directory"):
        BashTools(tmp_path / "missing")
    with pytest.raises(TypeError, match="sandbox must be a BashSandbox"):
        BashTools(tmp_path, sandbox="bwrap")  # type: ignore[arg-type]


async def test_the_tools_are_named_as_claude_code_maps_them(tmp_path: Path) -> None:
    names = [t.name for t in tools_bash(tmp_path).tools]
    assert names == ["bash", "bash_output", "kill_shell"]
