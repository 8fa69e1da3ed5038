"""File tools: behaviour and confinement to the working directory, on real temp dirs."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deputy_runtime.errors import ToolArgumentError, ToolDefinitionError
from deputy_runtime.tools import FileToolLimits, Tool, invoke_tool, tools_file

DEFAULTS = FileToolLimits()
GREP_MAX_MATCHES = DEFAULTS.grep_matches
LIST_MAX_ENTRIES = DEFAULTS.list_entries
READ_MAX_BYTES = DEFAULTS.read_bytes
WRITE_MAX_BYTES = DEFAULTS.write_bytes

SECRET = "TOP-SECRET-CONTENT"


def make_tree(base: Path) -> Path:
    """root/ (the working dir) next to outside/ (which must stay untouched)."""
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    root = base / "root"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("alpha\nbeta\ngamma\n")
    (root / "sub" / "b.py").write_text("# TODO: fix\nprint('hi')\n")
    os.symlink(outside, root / "link_out")
    os.symlink(outside / "secret.txt", root / "link_secret")
    os.symlink(root / "sub", root / "link_in")
    return root


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_tree(tmp_path)


@pytest.fixture
def tools(root: Path) -> dict[str, Callable[..., Any]]:
    return {t.name: t.function for t in tools_file(root)}


def test_tools_and_annotations(root: Path) -> None:
    made = tools_file(root)
    assert [t.name for t in made] == [
        "read_file",
        "list_files",
        "grep_files",
        "write_file",
        "edit_file",
    ]
    by = {t.name: t for t in made}
    assert all(by[n].read_only for n in ("read_file", "list_files", "grep_files"))
    assert not by["write_file"].read_only
    assert not by["edit_file"].read_only
    assert not any(t.destructive for t in made)
    assert all(t.run_in_thread for t in made)
    # Offline test models call tools with examples[0]: those must be harmless.
    assert by["write_file"].parameters["properties"]["path"]["examples"] == ["deputy-scratch.txt"]
    assert by["list_files"].parameters["properties"]["path"]["examples"] == ["."]


def test_missing_working_dir_is_a_definition_error(tmp_path: Path) -> None:
    with pytest.raises(ToolDefinitionError, match="does not exist"):
        tools_file(tmp_path / "nope")
    (tmp_path / "f").write_text("x")
    with pytest.raises(ToolDefinitionError, match="not a directory"):
        tools_file(tmp_path / "f")


# -- hostile paths ------------------------------------------------------------------

HOSTILE = [
    ("../outside/secret.txt", "uses '..'"),
    ("sub/../../outside/secret.txt", "uses '..'"),
    ("..", "uses '..'"),
    ("/etc/passwd", "absolute path outside"),
    ("link_out/secret.txt", "symbolic link"),
    ("link_secret", "symbolic link"),
    ("link_out", "symbolic link"),
    ("a.txt\x00.png", "NUL byte"),
    ("x" * 300, "longer than 255 bytes"),
    ("/".join(["d"] * 2100), "limit is 4096"),
]


@pytest.mark.parametrize(("path", "reason"), HOSTILE)
@pytest.mark.parametrize("name", ["read_file", "list_files", "grep_files"])
def test_read_tools_refuse_hostile_paths(
    tools: dict[str, Callable[..., Any]], name: str, path: str, reason: str
) -> None:
    kwargs: dict[str, Any] = {"path": path}
    if name == "grep_files":
        kwargs["pattern"] = "SECRET"
    with pytest.raises(ToolArgumentError, match=reason):
        tools[name](**kwargs)


@pytest.mark.parametrize(("path", "reason"), HOSTILE)
def test_write_tools_refuse_hostile_paths(
    tools: dict[str, Callable[..., Any]], root: Path, path: str, reason: str
) -> None:
    with pytest.raises(ToolArgumentError, match=reason):
        tools["write_file"](path=path, content="pwned")
    with pytest.raises(ToolArgumentError, match=reason):
        tools["edit_file"](path=path, old_string=SECRET, new_string="pwned")
    assert (root.parent / "outside" / "secret.txt").read_text() == SECRET
    assert sorted(os.listdir(root.parent / "outside")) == ["secret.txt"]


def test_absolute_path_inside_root_and_inner_symlink_are_allowed(
    tools: dict[str, Callable[..., Any]], root: Path
) -> None:
    assert tools["read_file"](path=str(root / "a.txt")).startswith("alpha")
    assert "print('hi')" in tools["read_file"](path="link_in/b.py")
    assert tools["read_file"](path="sub/../a.txt").startswith("alpha")


def test_grep_does_not_follow_symlinks_out(
    tools: dict[str, Callable[..., Any]],
) -> None:
    out = tools["grep_files"](pattern="SECRET")
    assert SECRET not in out
    assert out.startswith("No matches")


def test_list_does_not_descend_symlinks(tools: dict[str, Callable[..., Any]]) -> None:
    listing = tools["list_files"](path=".", recursive=True).splitlines()
    assert "link_out/secret.txt" not in listing
    assert "sub/b.py" in listing


def _safe_segments() -> st.SearchStrategy[str]:
    parts = st.sampled_from(
        [
            "..",
            ".",
            "",
            "sub",
            "a.txt",
            "link_out",
            "link_in",
            "link_secret",
            "outside",
            "secret.txt",
        ]
    )
    return st.lists(parts, min_size=1, max_size=6).map("/".join) | st.lists(
        parts, min_size=1, max_size=4
    ).map(lambda xs: "/" + "/".join(xs))


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(path=_safe_segments())
def test_property_no_tool_reaches_outside_the_root(path: str) -> None:
    """Whatever path a model sends, nothing outside the working directory is read or
    changed: the secret never appears in output and the outside tree stays as it was."""
    with tempfile.TemporaryDirectory() as base:
        root = make_tree(Path(base))
        fns = {t.name: t.function for t in tools_file(root)}
        outside = Path(base) / "outside"
        calls: list[tuple[str, dict[str, Any]]] = [
            ("read_file", {"path": path}),
            ("list_files", {"path": path, "recursive": True}),
            ("grep_files", {"pattern": "SECRET", "path": path}),
            ("write_file", {"path": path, "content": "pwned"}),
            ("edit_file", {"path": path, "old_string": SECRET, "new_string": "pwned"}),
        ]
        for name, kwargs in calls:
            try:
                out = fns[name](**kwargs)
            except ToolArgumentError:
                continue
            assert SECRET not in out, (name, path, out)
        assert sorted(os.listdir(outside)) == ["secret.txt"]
        assert (outside / "secret.txt").read_text() == SECRET


# -- behaviour ------------------------------------------------------------------------


def test_read_file_lines_and_truncation(tools: dict[str, Callable[..., Any]], root: Path) -> None:
    read = tools["read_file"]
    assert read(path="a.txt") == "alpha\nbeta\ngamma\n"
    assert read(path="a.txt", start_line=2, max_lines=1).startswith("beta\n")
    assert "start_line=3" in read(path="a.txt", start_line=2, max_lines=1)
    assert "past the end" in read(path="a.txt", start_line=10)
    big = root / "big.txt"
    line = "x" * 99 + "\n"
    big.write_text(line * (READ_MAX_BYTES // 100 + 50))
    out = read(path="big.txt")
    body, notice = out.rsplit("\n[truncated: ", 1)
    assert len(body.encode()) <= READ_MAX_BYTES
    assert "Call read_file with start_line=" in notice
    next_line = int(notice.split("start_line=")[1].split(" ")[0])
    assert read(path="big.txt", start_line=next_line).startswith(line)


def test_read_file_errors(tools: dict[str, Callable[..., Any]], root: Path) -> None:
    read = tools["read_file"]
    with pytest.raises(ToolArgumentError, match="does not exist"):
        read(path="missing.txt")
    with pytest.raises(ToolArgumentError, match="is a directory; use list_files"):
        read(path="sub")
    os.mkfifo(root / "fifo")
    with pytest.raises(ToolArgumentError, match="not a regular file"):
        read(path="fifo")
    (root / "bin.dat").write_bytes(b"\x00\x01\x02" * 10)
    assert "binary file" in read(path="bin.dat")


def test_list_files(tools: dict[str, Callable[..., Any]], root: Path) -> None:
    listing = tools["list_files"]()
    assert listing.splitlines() == ["a.txt", "link_in", "link_out", "link_secret", "sub/"]
    assert tools["list_files"](path="sub") == "sub/b.py"
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("x")
    assert ".git/HEAD" not in tools["list_files"](recursive=True)
    (root / "empty").mkdir()
    assert "empty" in tools["list_files"](path="empty")
    with pytest.raises(ToolArgumentError, match="does not exist"):
        tools["list_files"](path="nope")


def test_list_files_caps_entries(tools: dict[str, Callable[..., Any]], root: Path) -> None:
    many = root / "many"
    many.mkdir()
    for i in range(LIST_MAX_ENTRIES + 5):
        (many / f"f{i:05d}").touch()
    lines = tools["list_files"](path="many").splitlines()
    assert len(lines) == LIST_MAX_ENTRIES + 1
    assert lines[-1].startswith("[truncated at")


def test_grep_files(tools: dict[str, Callable[..., Any]], root: Path) -> None:
    grep = tools["grep_files"]
    assert grep(pattern="TODO") == "sub/b.py:1: # TODO: fix"
    assert grep(pattern="BETA", ignore_case=True) == "a.txt:2: beta"
    py_only = grep(pattern="i", glob="*.py")
    assert py_only == "sub/b.py:1: # TODO: fix\nsub/b.py:2: print('hi')"
    assert grep(pattern="i", glob="sub/*") == py_only
    assert grep(pattern="gamma", path="a.txt") == "a.txt:3: gamma"
    with pytest.raises(ToolArgumentError, match="argument 'pattern': invalid regular"):
        grep(pattern="(")
    (root / "lots.txt").write_text("hit\n" * (GREP_MAX_MATCHES + 10))
    lines = grep(pattern="^hit$").splitlines()
    assert len(lines) == GREP_MAX_MATCHES + 1
    assert lines[-1].startswith("[stopped after")


def test_write_file_creates_overwrites_atomically(
    tools: dict[str, Callable[..., Any]], root: Path
) -> None:
    write = tools["write_file"]
    assert write(path="new/dir/f.txt", content="héllo") == "Created new/dir/f.txt (6 bytes)"
    assert (root / "new/dir/f.txt").read_text() == "héllo"
    os.chmod(root / "a.txt", 0o600)
    assert write(path="a.txt", content="x").startswith("Overwrote a.txt")
    assert (root / "a.txt").read_text() == "x"
    assert oct((root / "a.txt").stat().st_mode & 0o777) == oct(0o600)
    # No temporary files are left behind.
    assert sorted(p.name for p in root.iterdir() if p.name.startswith(".")) == []


def test_write_file_limits_and_errors(tools: dict[str, Callable[..., Any]], root: Path) -> None:
    write = tools["write_file"]
    with pytest.raises(ToolArgumentError, match="over the 1048576-byte limit"):
        write(path="big.txt", content="x" * (WRITE_MAX_BYTES + 1))
    assert not (root / "big.txt").exists()
    with pytest.raises(ToolArgumentError, match="is a directory"):
        write(path="sub", content="x")
    with pytest.raises(ToolArgumentError, match="is a directory"):
        write(path=".", content="x")
    with pytest.raises(ToolArgumentError, match=r"parent .* is a file"):
        write(path="a.txt/child", content="x")


def test_write_through_inner_symlink_replaces_target(
    tools: dict[str, Callable[..., Any]], root: Path
) -> None:
    tools["write_file"](path="link_in/b.py", content="new")
    assert (root / "sub" / "b.py").read_text() == "new"
    assert (root / "link_in").is_symlink()


def test_edit_file(tools: dict[str, Callable[..., Any]], root: Path) -> None:
    edit = tools["edit_file"]
    assert edit(path="a.txt", old_string="beta", new_string="BETA") == (
        "Edited a.txt: replaced 1 occurrence(s)"
    )
    assert (root / "a.txt").read_text() == "alpha\nBETA\ngamma\n"
    with pytest.raises(ToolArgumentError, match=r"not found in a\.txt"):
        edit(path="a.txt", old_string="zeta", new_string="x")
    with pytest.raises(ToolArgumentError, match="found 2 times"):
        edit(path="a.txt", old_string="a\n", new_string="x")
    assert "replaced 2" in edit(path="a.txt", old_string="a\n", new_string="A\n", replace_all=True)
    with pytest.raises(ToolArgumentError, match="must not be empty"):
        edit(path="a.txt", old_string="", new_string="x")
    with pytest.raises(ToolArgumentError, match="does not exist"):
        edit(path="nope.txt", old_string="a", new_string="b")
    (root / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(ToolArgumentError, match="not UTF-8"):
        edit(path="latin1.txt", old_string="caf", new_string="x")


@pytest.mark.anyio
async def test_tools_through_invoke_tool(root: Path) -> None:
    by: dict[str, Tool] = {t.name: t for t in tools_file(root)}
    out = await invoke_tool(by["write_file"], {"path": "deputy-scratch.txt", "content": "s"})
    assert out.startswith("Created")
    assert await invoke_tool(by["read_file"], {"path": "deputy-scratch.txt"}) == "s"
    with pytest.raises(ToolArgumentError, match="argument 'path': missing required"):
        await invoke_tool(by["read_file"], {})
    with pytest.raises(ToolArgumentError, match="start_line"):
        await invoke_tool(by["read_file"], {"path": "a.txt", "start_line": 0})
    with pytest.raises(ToolArgumentError, match=r"uses '\.\.'"):
        await invoke_tool(by["read_file"], {"path": "../outside/secret.txt"})


def test_read_file_over_long_line_always_makes_progress(
    tools: dict[str, Callable[..., Any]], root: Path
) -> None:
    # A minified file: one line far over the cap, then a short one. Each call must show
    # something new, so a model following the notices can never loop on the same call.
    (root / "min.js").write_bytes(b"y" * (READ_MAX_BYTES * 3) + b"\nend\n")
    first = tools["read_file"](path="min.js")
    assert first.startswith("y" * 1000)
    assert "line 1 is longer than" in first
    assert "start_line=2" in first
    assert tools["read_file"](path="min.js", start_line=2) == "end\n"


def test_read_file_max_lines_one_on_long_lines(
    tools: dict[str, Callable[..., Any]], root: Path
) -> None:
    (root / "two.txt").write_text("a" * (READ_MAX_BYTES + 10) + "\nb\n")
    out = tools["read_file"](path="two.txt", max_lines=1)
    assert "start_line=2" in out
    assert tools["read_file"](path="two.txt", start_line=2, max_lines=1) == "b\n"


@pytest.mark.anyio
async def test_concurrent_writes_are_atomic(root: Path) -> None:
    """Many threaded writes to one file: the result is exactly one whole write, and
    readers running at the same time never see a mix or an empty file."""
    import anyio

    by: dict[str, Tool] = {t.name: t for t in tools_file(root)}
    (root / "shared.txt").write_text("start" * 1000)
    bodies = [chr(ord("a") + i) * 50_000 for i in range(12)]
    seen: list[str] = []

    async def writer(body: str) -> None:
        await invoke_tool(by["write_file"], {"path": "shared.txt", "content": body})

    async def reader() -> None:
        for _ in range(10):
            seen.append(await invoke_tool(by["read_file"], {"path": "shared.txt"}))

    async with anyio.create_task_group() as tg:
        for body in bodies:
            tg.start_soon(writer, body)
        for _ in range(3):
            tg.start_soon(reader)
    assert (root / "shared.txt").read_text() in bodies
    for text in seen:
        assert text == "start" * 1000 or text in bodies
    assert [p.name for p in root.iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.parametrize("path", [".git/hooks/pre-commit", ".git/config", ".git", "sub/.hg/x"])
def test_writes_into_version_control_metadata_are_refused(
    tools: dict[str, Callable[..., Any]], root: Path, path: str
) -> None:
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n")
    with pytest.raises(ToolArgumentError, match="version-control metadata"):
        tools["write_file"](path=path, content="#!/bin/sh\nrm -rf ~\n")
    with pytest.raises(ToolArgumentError, match="version-control metadata"):
        tools["edit_file"](path=path, old_string="[core]", new_string="x")
    assert not (root / ".git" / "hooks" / "pre-commit").exists()
    assert (root / ".git" / "config").read_text() == "[core]\n"
    # Reading is fine, and .gitignore is an ordinary file.
    assert tools["read_file"](path=".git/config") == "[core]\n"
    assert tools["write_file"](path=".gitignore", content="x\n").startswith("Created")
