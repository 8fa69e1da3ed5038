"""read_file and grep_files read a bounded number of bytes per call, and stop on cancel.

The hostile input is real: a file with some text followed by a 5 GiB sparse hole (one
"line" of NUL bytes with no newline). Bytes read are measured by the kernel's count for
this process (``rchar`` in /proc/self/io), so the bounds are in bytes, not seconds.
Cancellation is tested by conditions: the tool's thread has finished, and it read (or
opened) far less than an uncancelled call would.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import pytest

from deputy_runtime.tools import FileToolLimits, Tool, _filegrep, _files, invoke_tool, tools_file
from deputy_runtime.tools._fileread import walk
from deputy_runtime.tools._fileroot import open_regular

PROC_IO = Path("/proc/self/io")
GIB = 2**30
MIB = 2**20
HOLE = 5 * GIB
TEXT_LINES = 600  # about 9 KB of text before the hole
# Slack for buffered reads, the binary probe and anything else the process reads.
SLACK = 2 * MIB

needs_proc_io = pytest.mark.skipif(
    not PROC_IO.exists(), reason="counting bytes read needs Linux's /proc/self/io"
)


def bytes_read() -> int:
    for line in PROC_IO.read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


@pytest.fixture
def sparse(tmp_path: Path) -> Path:
    """``big.txt``: 600 text lines, then a 5 GiB hole (no disk space used)."""
    path = tmp_path / "big.txt"
    with open(path, "wb") as f:
        f.write(b"".join(b"text line %04d\n" % i for i in range(TEXT_LINES)))
        f.truncate(HOLE)
    if os.stat(path).st_blocks * 512 > 64 * MIB:
        pytest.skip("the temp file system does not support sparse files")
    return path


def tools(root: Path, **limits: int) -> dict[str, Tool]:
    return {t.name: t for t in tools_file(root, limits=FileToolLimits(**limits))}


def counted(call: Callable[[], str]) -> tuple[str, int]:
    before = bytes_read()
    out = call()
    return out, bytes_read() - before


@needs_proc_io
def test_read_file_stops_at_the_hole(sparse: Path) -> None:
    read = tools(sparse.parent)["read_file"].function
    out, used = counted(lambda: read(path="big.txt"))
    assert out.startswith("text line 0000\n")
    assert f"start_line={TEXT_LINES + 1}" in out
    assert used <= FileToolLimits().read_bytes + SLACK


@needs_proc_io
@pytest.mark.parametrize("scan", [1 * MIB, FileToolLimits().read_scan_bytes])
def test_reading_into_the_hole_reads_at_most_the_scan_limit(sparse: Path, scan: int) -> None:
    read = tools(sparse.parent, read_scan_bytes=scan)["read_file"].function
    out, used = counted(lambda: read(path="big.txt", start_line=TEXT_LINES + 1))
    assert used <= scan + SLACK
    assert f"read_file reads at most {scan} bytes of a file per call" in out
    out, used = counted(lambda: read(path="big.txt", start_line=TEXT_LINES + 2))
    assert used <= scan + SLACK
    assert f"line {TEXT_LINES + 2} is not within the first {scan} bytes" in out


@needs_proc_io
def test_grep_searches_only_the_start_of_the_sparse_file(sparse: Path) -> None:
    grep = tools(sparse.parent)["grep_files"].function
    out, used = counted(lambda: grep(pattern="line 0599"))
    assert out.splitlines() == [
        "big.txt:600: text line 0599",
        "[searched only the start of large files: big.txt]",
    ]
    assert used <= FileToolLimits().grep_file_bytes + SLACK


def test_grep_stops_at_the_per_call_budget(tmp_path: Path) -> None:
    for i in range(10):
        (tmp_path / f"f{i}.txt").write_text(f"needle {i}\n" + "x" * 1000 + "\n")
    grep = tools(tmp_path, grep_scan_bytes=3000)["grep_files"].function
    lines = grep(pattern="needle").splitlines()
    assert lines[:3] == ["f0.txt:1: needle 0", "f1.txt:1: needle 1", "f2.txt:1: needle 2"]
    assert lines[-1].startswith("[stopped after searching 3000 bytes")
    assert len(lines) < 10


def test_limits_are_checked(tmp_path: Path) -> None:
    from deputy_runtime.errors import ToolDefinitionError

    with pytest.raises(ToolDefinitionError, match=r"FileToolLimits\.read_scan_bytes"):
        FileToolLimits(read_scan_bytes=0)
    with pytest.raises(ToolDefinitionError, match=r"FileToolLimits\.grep_matches"):
        FileToolLimits(grep_matches=True)
    with pytest.raises(TypeError, match="limits must be a FileToolLimits"):
        tools_file(tmp_path, limits={"read_bytes": 1})  # type: ignore[arg-type]


# -- cancellation ------------------------------------------------------------------------


class Finished:
    """Spies on one module-level function: records when every call has returned.

    The real function still runs; this only lets the test wait for an abandoned thread.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> None:
        self.done = threading.Event()
        real = getattr(module, name)

        def spy(*args: Any, **kwargs: Any) -> Any:
            try:
                return real(*args, **kwargs)
            finally:
                self.done.set()

        monkeypatch.setattr(module, name, spy)

    async def wait(self) -> None:
        with anyio.fail_after(120):  # only a hang guard; the test waits on the event
            while not self.done.is_set():
                await anyio.to_thread.run_sync(self.done.wait, 0.5)


@needs_proc_io
@pytest.mark.anyio
async def test_cancelled_read_stops_its_thread(
    sparse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    finished = Finished(monkeypatch, _files, "read_text")
    read = tools(sparse.parent, read_scan_bytes=8 * GIB)["read_file"]
    before = bytes_read()
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(invoke_tool, read, {"path": "big.txt", "start_line": TEXT_LINES + 2})
            while bytes_read() - before < 64 * MIB:  # the read is well into the hole
                await anyio.sleep(0.01)
            scope.cancel()
    await finished.wait()
    assert bytes_read() - before < HOLE // 4


@pytest.mark.anyio
async def test_cancelled_grep_of_a_large_tree_stops_promptly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search is cancelled from inside its first file open (a spy that also counts
    opens); the thread must notice at the next file instead of searching all 400."""
    files = 400
    for i in range(files):
        (tmp_path / f"f{i:03d}.txt").write_text("nothing to see\n")
    finished = Finished(monkeypatch, _files, "grep")
    opened: list[str] = []
    scope = anyio.CancelScope()
    real_open = open_regular  # the function _filegrep calls by this name

    def open_and_cancel(path: str) -> int | None:
        opened.append(path)
        if len(opened) == 1:
            anyio.from_thread.run_sync(scope.cancel)
        return real_open(path)

    monkeypatch.setattr(_filegrep, "open_regular", open_and_cancel)
    grep = tools(tmp_path)["grep_files"]
    with scope:
        await invoke_tool(grep, {"pattern": "needle"})
    assert scope.cancelled_caught
    await finished.wait()
    assert 1 <= len(opened) <= 2


@pytest.mark.anyio
async def test_cancelled_grep_of_empty_directories_stops_promptly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tree of directories without files gives the search no file to check between;
    the walk itself checks. Cancelled at the first directory (a spy on the walk that
    also counts directories), it must not visit all 300."""
    for i in range(300):
        (tmp_path / f"d{i:03d}").mkdir()
    finished = Finished(monkeypatch, _files, "grep")
    visited: list[str] = []
    scope = anyio.CancelScope()
    real_walk = walk  # the function _filegrep calls by this name

    def walk_and_cancel(top: str) -> Iterator[tuple[str, list[str], list[str]]]:
        for entry in real_walk(top):
            visited.append(entry[0])
            if len(visited) == 1:
                anyio.from_thread.run_sync(scope.cancel)
            yield entry

    monkeypatch.setattr(_filegrep, "walk", walk_and_cancel)
    grep = tools(tmp_path)["grep_files"]
    with scope:
        await invoke_tool(grep, {"pattern": "needle"})
    assert scope.cancelled_caught
    await finished.wait()
    assert 1 <= len(visited) <= 3


def test_binary_files_cost_grep_only_their_probe(tmp_path: Path) -> None:
    """Skipping a binary file reads its first bytes only, so a tree full of images does
    not use up the per-call budget before the text files are reached."""
    for i in range(20):
        (tmp_path / f"a{i:02d}.bin").write_bytes(b"\x00" * MIB)
    (tmp_path / "z.txt").write_text("needle\n")
    grep = tools(tmp_path, grep_scan_bytes=2 * MIB)["grep_files"].function
    assert grep(pattern="needle") == "z.txt:1: needle"
