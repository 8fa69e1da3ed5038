"""FileCheckpointStore: save, load, delete, list; atomic replacement; safe run ids.

The crash test is a real one: a child process saves a second checkpoint over a first and
is killed (SIGKILL) from inside the write, after the new bytes reached the temporary file
and before the rename; the first checkpoint must still be there, whole, and the store
must not list the leftover temporary file.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deputy_runtime import CheckpointStore, FileCheckpointStore
from deputy_runtime.runtime import check_run_id
from tests.conftest import REPO_ROOT


@pytest.mark.anyio
async def test_save_load_delete_list(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path / "ck")
    assert isinstance(store, CheckpointStore)
    assert await store.list() == []
    assert await store.load("run_a") is None
    await store.save("run_b", b"second")
    await store.save("run_a", b"first")
    await store.save("run_a", b"first, again")
    assert await store.list() == ["run_a", "run_b"]
    assert await store.load("run_a") == b"first, again"
    assert (tmp_path / "ck").stat().st_mode & 0o777 == 0o700
    assert store.path("run_a").stat().st_mode & 0o777 == 0o600
    await store.delete("run_a")
    await store.delete("run_a")  # nothing there: nothing happens
    assert await store.list() == ["run_b"]
    with pytest.raises(TypeError, match="must be bytes"):
        await store.save("run_c", "text")  # type: ignore[arg-type]


_CRASHING_SAVE = """
import os, signal, sys
import anyio
from deputy_runtime import FileCheckpointStore

real_fsync = os.fsync

def dying_fsync(fd):
    real_fsync(fd)  # the new bytes are in the temporary file, on disk
    os.kill(os.getpid(), signal.SIGKILL)  # ... and the process dies before the rename

store = FileCheckpointStore(sys.argv[1])
os.fsync = dying_fsync
anyio.run(store.save, "run_1", b"NEW" * 100_000)
"""


@pytest.mark.anyio
async def test_a_crash_mid_write_leaves_the_old_checkpoint(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path / "ck")
    await store.save("run_1", b"OLD checkpoint")
    child = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_CRASHING_SAVE), str(tmp_path / "ck")],
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    leftovers = [p.name for p in (tmp_path / "ck").iterdir() if p.name.endswith(".tmp")]
    assert len(leftovers) == 1  # the crash left its temporary file, full of NEW
    assert (tmp_path / "ck" / leftovers[0]).read_bytes() == b"NEW" * 100_000
    assert await store.load("run_1") == b"OLD checkpoint"
    assert await store.list() == ["run_1"]


@pytest.mark.anyio
async def test_a_failed_write_removes_its_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A full disk is simulated (it cannot be produced here): os.replace refuses.
    store = FileCheckpointStore(tmp_path / "ck")
    await store.save("run_1", b"OLD")

    def refuse(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="No space"):
        await store.save("run_1", b"NEW")
    monkeypatch.undo()
    assert sorted(p.name for p in (tmp_path / "ck").iterdir()) == ["run_1.checkpoint"]
    assert await store.load("run_1") == b"OLD"


@pytest.mark.parametrize(
    "bad", ["", ".hidden", "../escape", "a/b", "a\\b", "x" * 129, "run\x00", "ü", 7, None]
)
def test_unsafe_run_ids_are_refused(tmp_path: Path, bad: object) -> None:
    store = FileCheckpointStore(tmp_path)
    with pytest.raises(ValueError, match="run_id must be 1 to 128"):
        store.path(bad)  # type: ignore[arg-type]


@pytest.mark.slow
@given(st.text(min_size=1, max_size=140))
def test_an_accepted_run_id_names_a_file_directly_in_the_store(run_id: str) -> None:
    root = Path("/nonexistent/store")
    store = FileCheckpointStore(root)
    try:
        check_run_id(run_id)
    except ValueError:
        with pytest.raises(ValueError, match="run_id must be"):
            store.path(run_id)
        return
    path = store.path(run_id)
    assert path.parent == root
    assert os.path.normpath(path) == str(path)
    assert path.name == run_id + ".checkpoint"
    assert not path.name.startswith(".")
