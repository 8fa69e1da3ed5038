"""YAML definition file edge cases: FIFOs, symlinks, encodings and other finer points.

Real files, FIFOs and symlinks in tmp_path; the CLI runs in-process through its ``main``.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from deputy_runtime.cli import main
from deputy_runtime.definitions import agent_definition_read, agent_definitions
from deputy_runtime.errors import DefinitionFileError

MIN = "version: 1\nname: reviewer\ndescription: Reviews text\nprompt: Read carefully\n"


def _read_error(path: Path, data: bytes) -> DefinitionFileError:
    path.write_bytes(data)
    with pytest.raises(DefinitionFileError) as info:
        agent_definition_read(path)
    return info.value


def _in_thread(function: Callable[[], object], seconds: float = 5.0) -> BaseException | object:
    """Run ``function`` in a daemon thread; fail if it blocks (e.g. opening a FIFO)."""
    result: list[BaseException | object] = []

    def target() -> None:
        try:
            result.append(function())
        except BaseException as exc:
            result.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "the call blocked"
    return result[0]


# Regression: a control character used to give PyYAML's two-line text ('in "<unicode
# string>", position N') without line/column.
@pytest.mark.parametrize(
    ("char", "code"), [("\x00", "U+0000"), ("\x07", "U+0007"), ("\x1b", "U+001B")]
)
def test_control_character_error_has_line_column_and_one_line_reason(
    tmp_path: Path, char: str, code: str
) -> None:
    error = _read_error(tmp_path / "a.yaml", (MIN + f"memory: [a{char}b]\n").encode())
    assert (error.line, error.column) == (5, 11)
    assert "\n" not in error.reason
    assert "<unicode string>" not in error.reason
    assert f"control character {code}" in error.reason
    assert "remove it" in error.reason


def test_control_character_is_still_a_definition_file_error(tmp_path: Path) -> None:
    error = _read_error(tmp_path / "a.yaml", (MIN + "memory: [a\x00b]\n").encode())
    assert error.path == tmp_path / "a.yaml"
    assert "control characters are not allowed" in error.reason


def test_control_character_position_counts_characters_not_bytes(tmp_path: Path) -> None:
    # libyaml reports a byte offset; multi-byte text before the character must not shift
    # the column, and every YAML line break (CRLF, CR, NEL, LS) counts as one line.
    text = MIN + "memory: [café 😀\r\nx,\ry\x85z\u2028w \x07]\n"
    error = _read_error(tmp_path / "a.yaml", text.encode())
    assert (error.line, error.column) == (9, 3)


# Problems that validate must print as exactly one line "path:line: reason".
BAD_FILES = {
    "dup.yaml": (MIN + "name: again\n", 5),
    "tag.yaml": (MIN + "tools: !!set {a}\n", 5),
    "alias.yaml": (MIN + "memory: [*x]\n", 5),
    "multi.yaml": (MIN + "---\n" + MIN, 5),
    "bool.yml": (MIN.replace("name: reviewer", "name: yes"), 2),
    "num.YAML": (MIN.replace("Read carefully", "123"), 4),
    "utf8.yaml": (MIN + "memory: [caf\udce9]\n", 5),
    "tab.yaml": (MIN + "memory:\n\t- a\n", 6),
}


def _validate(capsys: pytest.CaptureFixture[str], *paths: Path) -> tuple[int, list[str]]:
    status = main(["validate", *map(str, paths)])
    out, _ = capsys.readouterr()
    return status, out.splitlines()


def test_validate_prints_one_located_line_per_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, (text, _) in BAD_FILES.items():
        (tmp_path / name).write_bytes(text.encode("utf-8", "surrogateescape"))
    (tmp_path / "good.yaml").write_text(MIN.replace("reviewer", "good"))
    status, lines = _validate(capsys, tmp_path)
    assert status == 1
    assert len(lines) == len(BAD_FILES), lines
    for name, (_, line) in BAD_FILES.items():
        prefix = f"{tmp_path / name}:{line}: "
        assert [out for out in lines if out.startswith(prefix)], (prefix, lines)
    assert all(re.match(r"^\S+:\d+: \S", out) for out in lines)


def test_validate_control_character_is_one_located_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "nul.yaml"
    bad.write_bytes((MIN + "memory: [a\x00b]\n").encode())
    status, lines = _validate(capsys, bad)
    assert status == 1
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{bad}:5: ")


def test_discovery_aborts_on_special_files_without_blocking(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(MIN)
    outside = tmp_path / "outside"
    outside.mkdir()
    os.mkfifo(outside / "fifo")
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "a.yaml").write_text(MIN)
    cases: dict[str, Callable[[Path], None]] = {
        "p.yaml": lambda p: os.mkfifo(p),
        "s.yml": lambda p: os.symlink(outside / "fifo", p),
        "d.yaml": lambda p: os.symlink(outside / "missing.yaml", p),
        "loop.yaml": lambda p: os.symlink(p, p),
        "dir.YAML": lambda p: os.symlink(outside, p),
    }
    for name, make in cases.items():
        entry = agents / name
        make(entry)
        error = _in_thread(lambda: agent_definitions(agents))
        assert isinstance(error, DefinitionFileError), (name, error)
        assert error.path == entry, (name, error)
        assert error.reason.startswith("Expected a readable definition file"), error.reason
        os.unlink(entry)
    # Hidden special files are never opened, so they cannot block or abort discovery.
    os.mkfifo(agents / ".hidden.yaml")
    assert list(_in_thread(lambda: agent_definitions(agents))) == ["reviewer"]  # type: ignore[call-overload]


def test_validate_reports_special_files_without_blocking(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    os.mkfifo(tmp_path / "p.yaml")
    (tmp_path / "x.yaml").mkdir()
    (tmp_path / "ok.yaml").write_text(MIN)
    status = _in_thread(lambda: main(["validate", str(tmp_path)]))
    out, err = capsys.readouterr()
    assert status == 1
    lines = out.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"{tmp_path / 'p.yaml'}: Expected a readable definition file")
    assert "FIFO" in lines[0]
    assert lines[1].startswith(f"{tmp_path / 'x.yaml'}: Expected a readable definition file")
    assert "directory" in lines[1]
    assert err == "checked 3 file(s): 2 error(s)\n"


def test_discovery_names_the_offending_file_with_line(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(MIN)
    (tmp_path / "b.yaml").write_text(MIN.replace("reviewer", "writer") + "tools: null\n")
    with pytest.raises(DefinitionFileError) as info:
        agent_definitions(tmp_path)
    assert (info.value.path, info.value.line) == (tmp_path / "b.yaml", 5)
    assert str(info.value).startswith(f"{tmp_path / 'b.yaml'}:5: tools may not be null")


# Explicit core tags whose value the tag's constructor cannot read. PyYAML's constructors
# raise KeyError / IndexError / AttributeError for these, not ValueError; they used to
# escape agent_definition_read/agent_definitions (regression tests).
BAD_TAGGED_VALUES = ["!!bool maybe", "!!bool ''", "!!int ''", "!!float ''", "!!timestamp ''"]


@pytest.mark.parametrize("tagged", BAD_TAGGED_VALUES)
def test_uninterpretable_core_tag_value_is_a_definition_file_error(
    tmp_path: Path, tagged: str
) -> None:
    path = tmp_path / "a.yaml"
    path.write_text(MIN + f"memory: [{tagged}]\n")
    with pytest.raises(DefinitionFileError) as info:
        agent_definition_read(path)
    assert (info.value.path, info.value.line, info.value.column) == (path, 5, 10)
    tag = tagged.split()[0]
    assert f"could not be read as {tag}; expected " in info.value.reason
    assert f"drop any {tag} tag" in info.value.reason


def test_uninterpretable_core_tag_value_in_discovery(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(MIN.replace("prompt: Read carefully", "prompt: !!bool maybe"))
    with pytest.raises(DefinitionFileError) as info:
        agent_definitions(tmp_path)
    assert (info.value.path, info.value.line) == (tmp_path / "a.yaml", 4)
    assert "expected true or false" in info.value.reason


@pytest.mark.parametrize("tagged", ["!!int 1x", "!!float x", "!!timestamp 2001-02-30"])
def test_core_tag_value_errors_that_are_handled(tmp_path: Path, tagged: str) -> None:
    path = tmp_path / "a.yaml"
    path.write_text(MIN + f"memory: [{tagged}]\n")
    with pytest.raises(DefinitionFileError) as info:
        agent_definition_read(path)
    assert (info.value.path, info.value.line) == (path, 5)
    assert "could not be read as" in info.value.reason


def test_validate_reports_an_uninterpretable_tag_value_as_a_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.yaml").write_text(MIN + "memory: [!!bool maybe]\n")
    status, lines = _validate(capsys, tmp_path)
    assert status == 1
    assert len(lines) == 1
    assert lines[0].startswith(f"{tmp_path / 'a.yaml'}:5: ")
