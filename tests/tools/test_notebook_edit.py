"""notebook_edit (Claude Code's NotebookEdit), on real notebooks in temp dirs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deputy_runtime import PermissionMode, Permissions
from deputy_runtime.errors import ToolArgumentError
from deputy_runtime.tools import Tool, invoke_tool, tools_file_extra

pytestmark = pytest.mark.anyio


def _notebook(minor: int = 5, ids: bool = True) -> dict[str, Any]:
    cells: list[dict[str, Any]] = [
        {
            "cell_type": "code",
            "metadata": {},
            "source": ["x = 1\n", "print(x)"],
            "execution_count": 4,
            "outputs": [{"output_type": "stream", "name": "stdout", "text": ["1\n"]}],
        },
        {"cell_type": "markdown", "metadata": {}, "source": ["# Notes"]},
    ]
    if ids:
        for cell, cell_id in zip(cells, ("first", "second"), strict=True):
            cell["id"] = cell_id
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": minor}


@pytest.fixture
def tool(tmp_path: Path) -> Tool:
    (tmp_path / "n.ipynb").write_text(json.dumps(_notebook()), encoding="utf-8")
    return {t.name: t for t in tools_file_extra(tmp_path)}["notebook_edit"]


async def edit(tool: Tool, **arguments: Any) -> str:
    return str(await invoke_tool(tool, {"path": "n.ipynb", "new_source": "", **arguments}))


def cells(tmp_path: Path) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = json.loads((tmp_path / "n.ipynb").read_text())["cells"]
    return cells


async def test_replace_sets_the_source_and_clears_a_code_cells_outputs(
    tool: Tool, tmp_path: Path
) -> None:
    said = await edit(tool, cell_id="first", new_source="y = 2\nprint(y)\n")
    assert said == "Replaced cell first of n.ipynb (2 cell(s) now)"
    [code, notes] = cells(tmp_path)
    assert code["source"] == ["y = 2\n", "print(y)\n"]  # stored as lines, as notebooks are
    assert (code["execution_count"], code["outputs"]) == (None, [])
    assert notes == _notebook()["cells"][1]
    # The file is written as notebooks are: one-space indentation and a final newline.
    text = (tmp_path / "n.ipynb").read_text()
    assert text.startswith('{\n "cells": [\n')
    assert text.endswith("}\n")


async def test_replace_can_change_the_type_and_a_position_names_a_cell(
    tool: Tool, tmp_path: Path
) -> None:
    await edit(tool, cell_id="0", new_source="Now prose.", cell_type="markdown")
    first = cells(tmp_path)[0]
    assert first == {
        "cell_type": "markdown",
        "metadata": {},
        "source": ["Now prose."],
        "id": "first",
    }


async def test_insert_after_a_cell_or_at_the_top_with_a_fresh_id(
    tool: Tool, tmp_path: Path
) -> None:
    said = await edit(
        tool, cell_id="first", new_source="z = 3", cell_type="code", edit_mode="insert"
    )
    middle = cells(tmp_path)[1]
    assert (
        said == f"Inserted a code cell (id {middle['id']}) at position 1 of n.ipynb (3 cell(s) now)"
    )
    assert middle["source"] == ["z = 3"]
    assert (middle["execution_count"], middle["outputs"]) == (None, [])
    await edit(tool, new_source="# Title", cell_type="markdown", edit_mode="insert")
    top = cells(tmp_path)[0]
    assert top["source"] == ["# Title"]
    assert "outputs" not in top
    ids = [c["id"] for c in cells(tmp_path)]
    assert len(set(ids)) == 4


async def test_delete_removes_the_named_cell(tool: Tool, tmp_path: Path) -> None:
    assert await edit(tool, cell_id="second", edit_mode="delete") == (
        "Deleted cell second of n.ipynb (1 cell(s) now)"
    )
    assert [c["id"] for c in cells(tmp_path)] == ["first"]


async def test_a_notebook_without_ids_gets_none(tmp_path: Path) -> None:
    (tmp_path / "n.ipynb").write_text(json.dumps(_notebook(minor=4, ids=False)))
    [tool] = [t for t in tools_file_extra(tmp_path) if t.name == "notebook_edit"]
    await edit(tool, cell_id="1", new_source="more", cell_type="raw", edit_mode="insert")
    assert [c["cell_type"] for c in cells(tmp_path)] == ["code", "markdown", "raw"]
    assert not any("id" in c for c in cells(tmp_path))


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"cell_id": "nope"}, "no cell 'nope' in n.ipynb (cell ids: first, second)"),
        ({"cell_id": "7", "edit_mode": "delete"}, "no cell '7'"),
        ({}, "argument 'cell_id': required to replace a cell"),
        ({"edit_mode": "insert"}, "argument 'cell_type': required to insert a cell"),
        ({"path": "notes.txt", "cell_id": "first"}, "is not a Jupyter notebook (.ipynb)"),
        ({"path": ".git/x.ipynb", "cell_id": "first"}, ".git"),
    ],
)
async def test_bad_arguments_are_refused_and_the_file_is_unchanged(
    tool: Tool, tmp_path: Path, arguments: dict[str, Any], message: str
) -> None:
    before = (tmp_path / "n.ipynb").read_bytes()
    with pytest.raises(ToolArgumentError, match=message.replace("(", r"\(").replace(")", r"\)")):
        await edit(tool, **arguments)
    assert (tmp_path / "n.ipynb").read_bytes() == before


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not a notebook \\(not JSON text"),
        ('{"cells": 3}', "it has no list of 'cells'"),
        ('{"cells": [1]}', "a cell is not an object"),
    ],
)
async def test_a_file_that_is_not_a_notebook_is_left_alone(
    tool: Tool, tmp_path: Path, content: str, message: str
) -> None:
    (tmp_path / "n.ipynb").write_text(content)
    with pytest.raises(ToolArgumentError, match=message):
        await edit(tool, cell_id="0")
    assert (tmp_path / "n.ipynb").read_text() == content


def test_it_is_a_write_tool_confined_to_the_write_root(tool: Tool, tmp_path: Path) -> None:
    args = {"path": "n.ipynb", "new_source": "x", "cell_id": "first"}
    assert (
        Permissions(mode=PermissionMode.STANDARD, working_dir=tmp_path).check_static(tool, args)
        is None
    )
    outside = Permissions(
        mode=PermissionMode.STANDARD, working_dir=tmp_path, write_root=tmp_path / "out"
    )
    denied = outside.check_static(tool, args)
    assert denied is not None
    assert "may only write under" in denied.reason
    for mode in (PermissionMode.READONLY, PermissionMode.PLAN):
        refused = Permissions(mode=mode).check_static(tool, args)
        assert refused is not None
        assert "writes or destroys data" in refused.reason
