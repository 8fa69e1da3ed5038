"""The bash tool bounds how many processes a command may have: real commands, both backends.

The bound is a pids cgroup per command where one can be made (root here, cgroup v1's
pids hierarchy), else RLIMIT_NPROC for a user other than root. Without a writable pids
cgroup the cgroup tests skip with the reason; where the bound cannot be kept at all the
tool refuses, which is tested by pointing the cgroup lookup at an empty directory.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import anyio
import pytest

from deputy_runtime import SandboxUnavailableError
from deputy_runtime.tools import BashLimits, BashSandbox, tools_bash
from deputy_runtime.tools import _pidlimit as pidlimit

pytestmark = pytest.mark.anyio

if shutil.which("bwrap") is None and not os.environ.get("CI"):
    pytest.skip("bubblewrap (bwrap) is not installed", allow_module_level=True)


async def _bound_kind() -> pidlimit.ProcessBoundKind:
    try:
        bound = pidlimit.process_bound(16)
    except SandboxUnavailableError as exc:
        pytest.skip(f"no process bound can be kept here: {exc}")
    kind = bound.kind
    await bound.aclose()
    return kind


#: A process in a session of its own (the pid written is the sleep's own: ``exec``).
_ESCAPE = "setsid sh -c 'echo $$ > escaped.tmp && mv escaped.tmp escaped; exec sleep 300'"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


async def _gone(pid: int) -> bool:
    """Whether ``pid`` is gone once SIGKILL has been delivered (it takes a moment to exit
    on a loaded machine; the bound only guards against a hang)."""
    with anyio.move_on_after(30):
        while _alive(pid):
            await anyio.sleep(0.01)
    return not _alive(pid)


#: Records the command's own cgroup (other tests make theirs meanwhile).
_WHERE = "cat /proc/self/cgroup > where"


def _command_cgroup(work: Path) -> str:
    """The name of the cgroup the command ran in, from what it recorded."""
    names = [
        part
        for line in (work / "where").read_text().splitlines()
        for part in line.split("/")
        if part.startswith("deputy-bash-")
    ]
    assert len(names) == 1, names
    return names[0]


def _cgroup_exists(name: str) -> bool:
    return any((parent / name).exists() for parent in pidlimit._parents())


async def test_a_fork_loop_stops_at_the_bound_and_leaves_nothing(tmp_path: Path) -> None:
    await _bound_kind()
    bash = tools_bash(tmp_path, limits=BashLimits(processes=16))
    # dash stops at the first fork that fails; each started sleep writes its pid first.
    loop = "i=0; while [ $i -lt 200 ]; do sleep 300 & echo $! >> started; i=$((i+1)); done"
    out = await bash.bash(f"sh -c '{loop}'")
    assert "Cannot fork" in out
    started = [int(p) for p in (tmp_path / "started").read_text().split()]
    # The bound counts the sandbox's own processes too (bwrap, bash, sh).
    assert 1 <= len(started) < 16


async def test_processes_that_leave_the_group_die_with_the_command(tmp_path: Path) -> None:
    if await _bound_kind() is not pidlimit.ProcessBoundKind.CGROUP:
        pytest.skip("only a cgroup finds processes that left the command's group")
    bash = tools_bash(tmp_path, sandbox=BashSandbox.NONE)
    # A new session: killing the command's process group does not reach it, and it holds
    # the command's stdout open, so only the cgroup ends it and lets the call return.
    out = await bash.bash(
        f"{_WHERE}; {_ESCAPE} & while [ ! -s escaped ]; do sleep 0.01; done; echo started"
    )
    assert out == "started"
    assert await _gone(int((tmp_path / "escaped").read_text()))
    assert not _cgroup_exists(_command_cgroup(tmp_path))


async def test_a_cancelled_command_leaves_no_cgroup(tmp_path: Path) -> None:
    if await _bound_kind() is not pidlimit.ProcessBoundKind.CGROUP:
        pytest.skip("the rlimit bound makes no cgroup")
    bash = tools_bash(tmp_path, sandbox=BashSandbox.NONE)
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(bash.bash, f"{_WHERE}; {_ESCAPE} & wait")
            while not (tmp_path / "escaped").exists() or not (tmp_path / "escaped").read_text():
                await anyio.sleep(0.01)
            scope.cancel()
    assert await _gone(int((tmp_path / "escaped").read_text()))
    assert not _cgroup_exists(_command_cgroup(tmp_path))


async def test_ordinary_commands_are_not_held_back(tmp_path: Path) -> None:
    await _bound_kind()
    bash = tools_bash(tmp_path, limits=BashLimits(processes=64))
    out = await bash.bash("for i in $(seq 30); do true & done; wait; echo ok")
    assert out == "ok"


async def test_where_no_bound_can_be_kept_the_tool_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Root with no pids cgroup to write: an empty cgroup root and a root user.
    monkeypatch.setattr(pidlimit, "CGROUP_ROOT", tmp_path / "no-cgroups")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(SandboxUnavailableError, match=r"BashLimits\(processes=None\)"):
        await tools_bash(work, sandbox=BashSandbox.NONE).bash("echo never")
    unbounded = tools_bash(work, sandbox=BashSandbox.NONE, limits=BashLimits(processes=None))
    assert await unbounded.bash("echo chosen") == "chosen"


@pytest.mark.parametrize("value", [0, 7, -1, True, 2.5, "64"])
def test_a_bad_process_bound_names_the_field(value: object) -> None:
    with pytest.raises(ValueError, match=r"BashLimits\.processes must be an int >= 8 or None"):
        BashLimits(processes=value)  # type: ignore[arg-type]


async def test_the_rlimit_bound_holds_a_user_other_than_root(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("RLIMIT_NPROC does not hold root; the cgroup tests cover root")
    bound = pidlimit.ProcessBound(pidlimit.ProcessBoundKind.RLIMIT, 16, None)
    argv = bound.wrap(["/bin/sh", "-c", "ulimit -u"])
    done = await anyio.run_process(argv)
    assert int(done.stdout) >= 16
