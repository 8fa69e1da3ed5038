"""glob_files, multi_edit and todo_write (``tools_file_extra``), on real temp dirs.

Each call goes through ``invoke_tool``, so arguments are validated against the tool's
schema exactly as a model's call is.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deputy_runtime.errors import ToolArgumentError, ToolDefinitionError
from deputy_runtime.tools import FileToolLimits, Tool, invoke_tool, tools_file_extra

pytestmark = pytest.mark.anyio

SECRET = "TOP-SECRET-CONTENT"


def _tree(base: Path) -> Path:
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text(SECRET)
    root = base / "root"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "node_modules").mkdir()
    (root / "setup.py").write_text("setup()\n")
    (root / "src" / "a.py").write_text("a\n")
    (root / "src" / "pkg" / "b.py").write_text("b\n")
    (root / "src" / "notes.md").write_text("notes\n")
    (root / "node_modules" / "dep.py").write_text("dep\n")
    os.symlink(outside, root / "link_out")
    return root


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return _tree(tmp_path)


@pytest.fixture
def tools(root: Path) -> dict[str, Tool]:
    return {t.name: t for t in tools_file_extra(root)}


async def call(tools: dict[str, Tool], name: str, **arguments: Any) -> Any:
    return await invoke_tool(tools[name], arguments)


def test_names_annotations_and_path_base(root: Path) -> None:
    made = tools_file_extra(root)
    assert [t.name for t in made] == ["glob_files", "multi_edit", "todo_write", "notebook_edit"]
    by_name = {t.name: t for t in made}
    assert by_name["glob_files"].read_only
    assert not by_name["multi_edit"].read_only
    assert not by_name["notebook_edit"].read_only
    assert by_name["todo_write"].read_only  # no side effects outside the conversation
    assert {t.path_base for t in made} == {os.path.realpath(root)}


def test_bad_working_dir_and_limits(tmp_path: Path) -> None:
    with pytest.raises(ToolDefinitionError, match="does not exist"):
        tools_file_extra(tmp_path / "missing")
    with pytest.raises(TypeError, match="tools_file_extra: limits must be a FileToolLimits"):
        tools_file_extra(tmp_path, limits=42)  # type: ignore[arg-type]


# glob_files


async def test_glob_star_crosses_directories_sorted_by_path(tools: dict[str, Tool]) -> None:
    found = await call(tools, "glob_files", pattern="*.py")
    # node_modules is skipped and the symlink out is not followed.
    assert found.splitlines() == ["setup.py", "src/a.py", "src/pkg/b.py"]


async def test_glob_double_star_also_matches_the_top_level(tools: dict[str, Tool]) -> None:
    found = await call(tools, "glob_files", pattern="**/*.py")
    assert found.splitlines() == ["setup.py", "src/a.py", "src/pkg/b.py"]


async def test_glob_under_a_path_matches_relative_to_it(tools: dict[str, Tool]) -> None:
    assert (await call(tools, "glob_files", pattern="pkg/*", path="src")) == "src/pkg/b.py"
    assert (await call(tools, "glob_files", pattern="*.md", path="src")) == "src/notes.md"


async def test_glob_no_match_and_refusals(tools: dict[str, Tool]) -> None:
    assert "No files match '*.rs'" in await call(tools, "glob_files", pattern="*.rs")
    with pytest.raises(ToolArgumentError, match="'pattern': must not be empty"):
        await call(tools, "glob_files", pattern="")
    with pytest.raises(ToolArgumentError, match="does not exist"):
        await call(tools, "glob_files", pattern="*", path="nowhere")
    with pytest.raises(ToolArgumentError, match="is not a directory"):
        await call(tools, "glob_files", pattern="*", path="setup.py")
    with pytest.raises(ToolArgumentError, match="leave the working directory"):
        await call(tools, "glob_files", pattern="*", path="../outside")
    with pytest.raises(ToolArgumentError, match="symbolic link"):
        await call(tools, "glob_files", pattern="*", path="link_out")
    with pytest.raises(ToolArgumentError, match="argument 'pattern': 300 characters"):
        await call(tools, "glob_files", pattern="a" * 300)


async def test_glob_stops_at_the_listing_limit(root: Path) -> None:
    made = {t.name: t for t in tools_file_extra(root, limits=FileToolLimits(list_entries=2))}
    found = (await call(made, "glob_files", pattern="*.py")).splitlines()
    assert found[:2] == ["setup.py", "src/a.py"]
    assert found[2:] == [
        "[stopped after 2 paths, the limit of one call; narrow the pattern or path]"
    ]


BACKENDS = pytest.mark.parametrize("backend", ["asyncio", "trio"])


@BACKENDS
@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pattern=st.text(alphabet="*?[]!/.abcpy", min_size=1, max_size=12))
def test_glob_never_names_a_file_outside_the_root(root: Path, backend: str, pattern: str) -> None:
    glob_files = tools_file_extra(root)[0]
    try:
        found = anyio.run(invoke_tool, glob_files, {"pattern": pattern}, backend=backend)
    except ToolArgumentError:
        return
    assert SECRET not in found
    for line in found.splitlines():
        if not line.startswith(("[", "No files match")):
            assert (root / line).resolve().is_relative_to(root.resolve())
            assert "outside" not in line


# multi_edit


async def test_multi_edit_applies_in_order(root: Path, tools: dict[str, Tool]) -> None:
    target = root / "f.txt"
    target.write_text("one two three two\n")
    answer = await call(
        tools,
        "multi_edit",
        path="f.txt",
        edits=[
            {"old_string": "one", "new_string": "uno"},
            {"old_string": "two", "new_string": "dos", "replace_all": True},
            {"old_string": "uno dos", "new_string": "1 2"},  # sees the edits before it
        ],
    )
    assert answer == "Edited f.txt: 3 edit(s), 4 replacement(s)"
    assert target.read_text() == "1 2 three dos\n"


@pytest.mark.parametrize(
    ("edits", "message"),
    [
        (
            [{"old_string": "alpha", "new_string": "A"}, {"old_string": "zzz", "new_string": "Z"}],
            r"edits\[1\]\.old_string': not found",
        ),
        (
            [
                {"old_string": "alpha", "new_string": "A"},
                {"old_string": "beta", "new_string": "B"},
                {"old_string": "x", "new_string": "y"},
            ],
            r"edits\[2\]\.old_string': found 2 times",
        ),
        (
            [{"old_string": "alpha", "new_string": "A"}, {"old_string": "", "new_string": "B"}],
            r"edits\[1\]\.old_string': must not be empty",
        ),
        # the first edit removes what the second one looks for
        (
            [
                {"old_string": "alpha", "new_string": "A"},
                {"old_string": "alpha", "new_string": "B"},
            ],
            r"edits\[1\]\.old_string': not found .*after the edits before it",
        ),
    ],
)
async def test_one_failing_edit_changes_nothing(
    root: Path, tools: dict[str, Tool], edits: list[dict[str, str]], message: str
) -> None:
    target = root / "f.txt"
    before = "alpha beta x x\n"
    target.write_text(before)
    stat_before = target.stat()
    with pytest.raises(ToolArgumentError, match=message) as caught:
        await call(tools, "multi_edit", path="f.txt", edits=edits)
    assert "no edit was applied" in str(caught.value)
    assert target.read_text() == before
    assert target.stat().st_ino == stat_before.st_ino  # not even rewritten
    assert sorted(p.name for p in root.iterdir() if p.name.startswith(".f.txt")) == []


async def test_multi_edit_refusals(root: Path, tools: dict[str, Tool]) -> None:
    with pytest.raises(ToolArgumentError, match="give at least one edit"):
        await call(tools, "multi_edit", path="setup.py", edits=[])
    with pytest.raises(ToolArgumentError, match="does not exist"):
        await call(
            tools, "multi_edit", path="new.txt", edits=[{"old_string": "a", "new_string": "b"}]
        )
    with pytest.raises(ToolArgumentError, match="version-control metadata"):
        await call(
            tools, "multi_edit", path=".git/config", edits=[{"old_string": "a", "new_string": "b"}]
        )
    with pytest.raises(ToolArgumentError, match="leave the working directory"):
        await call(
            tools,
            "multi_edit",
            path="../outside/secret.py",
            edits=[{"old_string": "T", "new_string": "b"}],
        )
    (root / "bin.dat").write_bytes(b"\xff\xfe")
    with pytest.raises(ToolArgumentError, match="not UTF-8 text"):
        await call(
            tools, "multi_edit", path="bin.dat", edits=[{"old_string": "a", "new_string": "b"}]
        )
    assert (root.parent / "outside" / "secret.py").read_text() == SECRET


async def test_multi_edit_result_over_the_write_limit_changes_nothing(root: Path) -> None:
    made = {t.name: t for t in tools_file_extra(root, limits=FileToolLimits(write_bytes=16))}
    (root / "f.txt").write_text("short\n")
    with pytest.raises(ToolArgumentError, match="would be over 16 bytes"):
        await call(
            made,
            "multi_edit",
            path="f.txt",
            edits=[{"old_string": "short", "new_string": "x" * 40}],
        )
    assert (root / "f.txt").read_text() == "short\n"


@BACKENDS
@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    olds=st.lists(st.sampled_from(["a", "b", "ab", "c", "zz"]), min_size=1, max_size=5),
    news=st.lists(st.sampled_from(["a", "b", "", "q"]), min_size=5, max_size=5),
)
def test_multi_edit_is_all_or_nothing(
    root: Path, backend: str, olds: list[str], news: list[str]
) -> None:
    """Either the file holds every edit applied in order, or it is byte-for-byte unchanged."""
    multi_edit = tools_file_extra(root)[1]
    target = root / "prop.txt"
    before = "a b ab c\n"
    target.write_text(before)
    edits = [{"old_string": o, "new_string": n} for o, n in zip(olds, news, strict=False)]
    expected: str | None = before
    for edit in edits:
        assert expected is not None
        if expected.count(edit["old_string"]) != 1:
            expected = None
            break
        expected = expected.replace(edit["old_string"], edit["new_string"], 1)
    try:
        anyio.run(invoke_tool, multi_edit, {"path": "prop.txt", "edits": edits}, backend=backend)
    except ToolArgumentError:
        assert expected is None
        assert target.read_text() == before
    else:
        assert target.read_text() == expected


# todo_write


async def test_todo_write_shows_the_whole_list(tools: dict[str, Tool]) -> None:
    answer = await call(
        tools,
        "todo_write",
        todos=[
            {"content": "Read the code", "status": "completed", "id": "1"},
            {"content": "Fix the bug", "status": "in_progress", "activeForm": "Fixing"},
            {"content": "Write a test", "status": "pending"},
        ],
    )
    assert answer == (
        "Task list updated (1/3 completed):\n[x] Read the code\n[~] Fix the bug\n[ ] Write a test"
    )
    assert await call(tools, "todo_write", todos=[]) == "Task list cleared."


async def test_todo_write_refusals(tools: dict[str, Tool]) -> None:
    two = [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}]
    with pytest.raises(ToolArgumentError, match="2 items are in_progress"):
        await call(tools, "todo_write", todos=two)
    same = [
        {"content": "a", "status": "pending", "id": "x"},
        {"content": "b", "status": "pending", "id": "x"},
    ]
    with pytest.raises(ToolArgumentError, match="same id"):
        await call(tools, "todo_write", todos=same)
    with pytest.raises(ToolArgumentError, match=r"todos\[0\]\.content': must not be empty"):
        await call(tools, "todo_write", todos=[{"content": " ", "status": "pending"}])
    with pytest.raises(ToolArgumentError, match="over the limit of 100"):
        await call(tools, "todo_write", todos=[{"content": "t", "status": "pending"}] * 101)
    with pytest.raises(ToolArgumentError):  # not a status
        await call(tools, "todo_write", todos=[{"content": "t", "status": "done"}])


async def test_one_todo_tool_keeps_no_state_between_agents(tools: dict[str, Tool]) -> None:
    """The list lives in each caller's conversation: one call never shows another's list."""
    first = await call(tools, "todo_write", todos=[{"content": "agent one", "status": "pending"}])
    second = await call(tools, "todo_write", todos=[{"content": "agent two", "status": "pending"}])
    assert "agent one" in first
    assert "agent one" not in second
