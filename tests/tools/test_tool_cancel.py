"""invoke_tool under cancellation: read-only threads are abandoned, writing ones awaited.

The tools block on a ``threading.Event`` the test sets in a ``finally`` (and each wait
is itself bounded), so no worker thread outlives its test.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from deputy_runtime.tools import Tool, invoke_tool, tool, tools_file
from deputy_runtime.tools._invoke import _abandonable

pytestmark = pytest.mark.anyio

_NO_PARAMS: dict[str, Any] = {"type": "object", "properties": {}}
# Longest any thread here may block if a test fails before releasing it.
_THREAD_BOUND = 5.0


class Gate:
    """Events a blocking tool and its test share: started, release, finished."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.finished = threading.Event()

    def block(self) -> None:
        """Run in the worker thread: announce, wait for the test, record the finish."""
        self.started.set()
        try:
            self.release.wait(_THREAD_BOUND)
        finally:
            self.finished.set()

    async def wait_started(self) -> None:
        assert await anyio.to_thread.run_sync(self.started.wait, _THREAD_BOUND)

    async def wait_finished(self) -> None:
        assert await anyio.to_thread.run_sync(self.finished.wait, _THREAD_BOUND)


@pytest.fixture
def gate() -> Iterator[Gate]:
    gate = Gate()
    try:
        yield gate
    finally:
        gate.release.set()  # never leave a worker thread blocked
        gate.finished.wait(_THREAD_BOUND)


async def test_cancelled_read_only_tool_returns_without_waiting_for_its_thread(
    gate: Gate,
) -> None:
    @tool(read_only=True, run_in_thread=True)
    def slow_search() -> str:
        """Block like a slow regex."""
        gate.block()
        return "late result"

    with anyio.fail_after(5):
        with anyio.move_on_after(0.2) as scope:
            await invoke_tool(slow_search, {})
        assert scope.cancelled_caught
        # The caller is back while the thread is still blocked: it was abandoned.
        assert gate.started.is_set()
        assert not gate.finished.is_set()
    gate.release.set()
    await gate.wait_finished()


async def test_abandoned_read_only_thread_does_not_break_later_calls(gate: Gate) -> None:
    @tool(read_only=True, run_in_thread=True)
    def blocker() -> None:
        """Block."""
        gate.block()

    @tool(read_only=True, run_in_thread=True)
    def quick(n: int) -> int:
        """Answer at once."""
        return n + 1

    with anyio.fail_after(5):
        with anyio.move_on_after(0.2):
            await invoke_tool(blocker, {})
        # The abandoned thread still runs; other threaded calls are unaffected.
        assert await invoke_tool(quick, {"n": 1}) == 2
    gate.release.set()
    await gate.wait_finished()


def _writer(target: Path, gate: Gate, read_only: bool, destructive: bool) -> Tool:
    def write() -> str:
        gate.block()
        target.write_text("done")
        return "written"

    return Tool(
        "slow_write",
        "Write slowly.",
        _NO_PARAMS,
        write,
        read_only=read_only,
        destructive=destructive,
        run_in_thread=True,
    )


@pytest.mark.parametrize(
    ("read_only", "destructive"),
    [(False, False), (True, True)],
    ids=["writes", "read-only-but-destructive"],
)
async def test_cancelled_writing_tool_finishes_before_cancellation_arrives(
    tmp_path: Path, gate: Gate, read_only: bool, destructive: bool
) -> None:
    target = tmp_path / "out.txt"
    writer = _writer(target, gate, read_only, destructive)
    steps: list[str] = []
    scope = anyio.CancelScope()

    async def call() -> None:
        with scope:
            try:
                steps.append(await invoke_tool(writer, {}))
            except anyio.get_cancelled_exc_class():
                steps.append("cancelled inside invoke_tool")
                raise
            await anyio.lowlevel.checkpoint()  # the pending cancellation arrives here
            steps.append("ran past the cancellation")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await gate.wait_started()
            scope.cancel()
            await anyio.wait_all_tasks_blocked()
            # Cancelled, yet still waiting for the write: nothing reported, nothing written.
            assert steps == []
            assert not target.exists()
            gate.release.set()
    assert target.read_text() == "done"
    assert steps == ["written"]
    assert scope.cancelled_caught


async def test_writing_tool_error_still_propagates_after_cancel(gate: Gate) -> None:
    def fail() -> None:
        gate.block()
        raise OSError("disk full")

    failing = Tool("failing_write", "Fail.", _NO_PARAMS, fail, run_in_thread=True)
    scope = anyio.CancelScope()
    errors: list[BaseException] = []

    async def call() -> None:
        with scope:
            try:
                await invoke_tool(failing, {})
            except OSError as exc:
                errors.append(exc)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await gate.wait_started()
            scope.cancel()
            await anyio.wait_all_tasks_blocked()
            gate.release.set()
    assert [str(e) for e in errors] == ["disk full"]


def test_file_tools_abandon_only_the_read_only_ones(tmp_path: Path) -> None:
    abandoned = [t.name for t in tools_file(tmp_path) if _abandonable(t)]
    assert abandoned == ["read_file", "list_files", "grep_files"]
