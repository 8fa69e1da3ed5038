"""Safe reading and atomic installing of definition files, on real files and FIFOs."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from deputy_runtime.definitions import agent_definition_read
from deputy_runtime.definitions._files import (
    MAX_DEFINITION_BYTES,
    TEMP_PREFIX,
    install_atomically,
    read_definition_text,
)
from deputy_runtime.errors import DefinitionFileError
from tests.definitions._definition_helpers import MIN, write

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")


def read_in_thread(path: Path) -> BaseException | str:
    """Read in a daemon thread; a read that blocks on a FIFO would fail the join timeout."""
    outcome: list[BaseException | str] = []

    def run() -> None:
        try:
            outcome.append(read_definition_text(path))
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=10)
    assert not thread.is_alive(), "reading blocked"
    return outcome[0]


@needs_fifo
def test_fifo_is_rejected_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "agent.yaml"
    os.mkfifo(fifo)
    outcome = read_in_thread(fifo)
    assert isinstance(outcome, DefinitionFileError)
    assert outcome.path == fifo
    assert "FIFO" in outcome.reason
    assert "regular files" in outcome.reason


@needs_fifo
def test_symlink_to_fifo_is_rejected_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "agent.yaml"
    link.symlink_to(fifo)
    outcome = read_in_thread(link)
    assert isinstance(outcome, DefinitionFileError)
    assert outcome.path == link
    assert "FIFO" in outcome.reason


def test_symlink_to_valid_file_is_followed(tmp_path: Path) -> None:
    target = write(tmp_path / "real.yaml", MIN)
    link = tmp_path / "agent.yaml"
    link.symlink_to(target)
    assert agent_definition_read(link).name == "reviewer"


def test_dangling_symlink_directory_and_missing_path(tmp_path: Path) -> None:
    dangling = tmp_path / "dangling.yaml"
    dangling.symlink_to(tmp_path / "nowhere")
    cases = {
        dangling: "the path is a dangling symlink",
        tmp_path / "missing.yaml": "the path does not exist",
        tmp_path: "the path is a directory",
    }
    for path, problem in cases.items():
        with pytest.raises(DefinitionFileError) as info:
            read_definition_text(path)
        assert problem in info.value.reason
        assert info.value.path == path


@pytest.mark.parametrize("path", [None, "", b"agent.yaml", ["a.yaml"], 3])
def test_bad_path_arguments(path: object) -> None:
    with pytest.raises(DefinitionFileError, match="Expected a file path as a non-empty string"):
        agent_definition_read(path)  # type: ignore[arg-type]


def test_size_boundary(tmp_path: Path) -> None:
    exact = tmp_path / "exact.yaml"
    padding = MAX_DEFINITION_BYTES - len(MIN.encode()) - len("#\n")
    write(exact, MIN + "#" + " " * padding + "\n")
    assert exact.stat().st_size == MAX_DEFINITION_BYTES
    assert agent_definition_read(exact).name == "reviewer"

    over = tmp_path / "over.yaml"
    over.write_bytes(exact.read_bytes() + b"\n")
    with pytest.raises(DefinitionFileError) as info:
        agent_definition_read(over)
    assert "at most 1 MiB" in info.value.reason
    assert "1,048,577 bytes" in info.value.reason
    assert info.value.line is None


def test_bom_is_removed_and_crlf_read(tmp_path: Path) -> None:
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + MIN.replace("\n", "\r\n").encode())
    assert read_definition_text(path).startswith("version: 1\r\n")
    definition = agent_definition_read(path)
    assert definition.prompt == "Read carefully"


def test_invalid_utf8_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(MIN.encode().replace(b"Read carefully", b"Read \xff\xfe carefully"))
    with pytest.raises(DefinitionFileError) as info:
        agent_definition_read(path)
    assert (info.value.line, info.value.column) == (4, 14)
    assert "not valid UTF-8" in info.value.reason
    assert "0xFF" in info.value.reason


def temp_files(directory: Path) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.startswith(TEMP_PREFIX))


def test_install_creates_and_refuses_to_clobber(tmp_path: Path) -> None:
    dest = tmp_path / "agent.yaml"
    assert install_atomically(dest, b"one\n") == dest
    with pytest.raises(DefinitionFileError, match="File already exists; pass overwrite=True"):
        install_atomically(dest, b"two\n")
    assert dest.read_bytes() == b"one\n"
    install_atomically(dest, b"three\n", overwrite=True)
    assert dest.read_bytes() == b"three\n"
    assert os.listdir(tmp_path) == ["agent.yaml"]


def test_install_refuses_oversize_directory_and_missing_parent(tmp_path: Path) -> None:
    dest = write(tmp_path / "agent.yaml", "original")
    with pytest.raises(DefinitionFileError, match="exceeds 1 MiB"):
        install_atomically(dest, b"x" * (MAX_DEFINITION_BYTES + 1), overwrite=True)
    (tmp_path / "dir.yaml").mkdir()
    with pytest.raises(DefinitionFileError, match="destination is a directory"):
        install_atomically(tmp_path / "dir.yaml", b"x", overwrite=True)
    with pytest.raises(DefinitionFileError, match="does not exist; create it first"):
        install_atomically(tmp_path / "no" / "agent.yaml", b"x")
    assert dest.read_bytes() == b"original"
    assert temp_files(tmp_path) == []


def test_install_exact_limit(tmp_path: Path) -> None:
    dest = install_atomically(tmp_path / "big.yaml", b"x" * MAX_DEFINITION_BYTES)
    assert dest.stat().st_size == MAX_DEFINITION_BYTES


def test_failed_write_leaves_destination_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A full disk cannot be produced here, so os.write is replaced by one that writes part
    # of the data and then fails, as a full disk would.
    dest = write(tmp_path / "agent.yaml", "original")
    real_write = os.write

    def partial_then_fail(fd: int, data: bytes | memoryview) -> int:
        real_write(fd, bytes(data[:7]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", partial_then_fail)
    with pytest.raises(DefinitionFileError, match="No space left on device; the destination"):
        install_atomically(dest, b"partial replacement", overwrite=True)
    assert dest.read_bytes() == b"original"
    assert os.listdir(tmp_path) == ["agent.yaml"]


@pytest.mark.parametrize("overwrite", [True, False])
def test_failed_install_leaves_destination_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, overwrite: bool
) -> None:
    # A rename or link failure cannot be provoked reliably on a local filesystem, so the
    # call is replaced by one that fails the way a filesystem without the operation does.
    dest = tmp_path / "agent.yaml"
    if overwrite:
        write(dest, "original")

    def fail(*args: object) -> None:
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(os, "replace" if overwrite else "link", fail)
    with pytest.raises(DefinitionFileError) as info:
        install_atomically(dest, b"new", overwrite=overwrite)
    assert "Could not install the completed definition file" in info.value.reason
    if overwrite:
        assert dest.read_bytes() == b"original"
        assert os.listdir(tmp_path) == ["agent.yaml"]
    else:
        assert "hard links" in info.value.reason
        assert os.listdir(tmp_path) == []


def test_concurrently_created_destination_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another writer creates the destination between the existence check and the link:
    # the hook runs that writer (for real) just before the real os.link.
    dest = tmp_path / "agent.yaml"
    real_link = os.link

    def other_writer_first(src: str, dst: str, **kwargs: object) -> None:
        Path(dst).write_text("Another writer's definition")
        real_link(src, dst)

    monkeypatch.setattr(os, "link", other_writer_first)
    with pytest.raises(DefinitionFileError, match="another writer created it meanwhile"):
        install_atomically(dest, b"mine")
    assert dest.read_text() == "Another writer's definition"
    assert os.listdir(tmp_path) == ["agent.yaml"]


def test_stale_temp_files_of_dead_writers_are_swept(tmp_path: Path) -> None:
    from deputy_runtime.definitions._files import _HOST_TAG

    # A pid above the kernel maximum (2**22) belongs to no process.
    stale = tmp_path / f"{TEMP_PREFIX}{_HOST_TAG}-99999999-abcdef.tmp"
    other_host = tmp_path / f"{TEMP_PREFIX}00000000-99999999-abcdef.tmp"
    live = tmp_path / f"{TEMP_PREFIX}{_HOST_TAG}-{os.getppid()}-abcdef.tmp"
    for path in (stale, other_host, live):
        path.write_text("partial")
    install_atomically(tmp_path / "agent.yaml", b"new")
    assert not stale.exists()
    assert other_host.exists()  # may belong to a live writer on another machine
    assert live.exists()  # its writer is running
