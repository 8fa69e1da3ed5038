"""notebook_edit: replace, insert or delete one cell of a Jupyter notebook (``.ipynb``).

Claude Code's ``NotebookEdit``. The notebook is read and changed in memory under the
file's process-wide lock (``_pathlock``) and written back atomically (temporary file,
fsync, rename), so a failed edit leaves the file as it was. Rules:

* A cell is named by its ``id`` (notebooks of format 4.5 and later give every cell
  one) or, failing that, by its 0-based position written as a number (``"0"``).
* ``replace`` sets the cell's source (and its type, when given); a code cell's outputs
  and execution count are cleared, since they belong to the old source.
* ``insert`` adds a cell after the named one (at the top without ``cell_id``); its
  ``cell_type`` is required, and it gets a fresh id when the notebook's cells have ids
  (or, in a notebook without cells, when its format is 4.5 or later).
* ``delete`` removes the named cell.
* The file is written back as notebooks are (one-space indentation, UTF-8, a final
  newline), with sources stored as lists of lines.
"""

from __future__ import annotations

import json
import secrets
from typing import Any, Literal

from ..errors import ToolArgumentError
from ._fileroot import Root
from ._filewrite import read_for_edit, write_or_explain
from ._limits import FileToolLimits
from ._pathlock import path_lock

__all__ = ["CellType", "EditMode", "notebook_edit_file"]

CellType = Literal["code", "markdown", "raw"]
EditMode = Literal["replace", "insert", "delete"]


def notebook_edit_file(
    root: Root,
    limits: FileToolLimits,
    path: str,
    new_source: str,
    cell_id: str | None,
    cell_type: CellType | None,
    edit_mode: EditMode,
) -> str:
    if not path.endswith(".ipynb"):
        raise ToolArgumentError(
            f"argument 'path': {path!r} is not a Jupyter notebook (.ipynb); edit other "
            "files with edit_file"
        )
    real = root.resolve_for_write(path)
    shown = root.rel(real)
    most = limits.write_bytes
    with path_lock(real):
        notebook = _read(real, shown, most)
        cells = notebook["cells"]
        if edit_mode == "insert":
            if cell_type is None:
                raise ToolArgumentError("argument 'cell_type': required to insert a cell")
            at = 0 if cell_id is None else _find(cells, cell_id, shown) + 1
            cell = _new_cell(cell_type, new_source, with_id=_has_ids(notebook))
            cells.insert(at, cell)
            named = f" (id {cell['id']})" if "id" in cell else ""
            done = f"Inserted a {cell_type} cell{named} at position {at}"
        else:
            if cell_id is None:
                raise ToolArgumentError(f"argument 'cell_id': required to {edit_mode} a cell")
            index = _find(cells, cell_id, shown)
            if edit_mode == "delete":
                del cells[index]
                done = f"Deleted cell {cell_id}"
            else:
                _replace(cells[index], new_source, cell_type)
                done = f"Replaced cell {cell_id}"
        text = json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"
        data = text.encode("utf-8")
        if len(data) > most:
            raise ToolArgumentError(f"the edited notebook would be over {most} bytes")
        write_or_explain(real, data, path)
    return f"{done} of {shown} ({len(cells)} cell(s) now)"


def _read(real: str, shown: str, most: int) -> dict[str, Any]:
    try:
        notebook = json.loads(read_for_edit(real, shown, most).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ToolArgumentError(f"{shown!r} is not a notebook (not JSON text: {exc})") from None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise ToolArgumentError(f"{shown!r} is not a notebook: it has no list of 'cells'")
    if not all(isinstance(cell, dict) for cell in notebook["cells"]):
        raise ToolArgumentError(f"{shown!r} is not a notebook: a cell is not an object")
    return notebook


def _find(cells: list[dict[str, Any]], cell_id: str, shown: str) -> int:
    for index, cell in enumerate(cells):
        if cell.get("id") == cell_id:
            return index
    if cell_id.isdigit() and int(cell_id) < len(cells):
        return int(cell_id)
    known = ", ".join(str(c["id"]) for c in cells[:20] if "id" in c)
    hint = f"cell ids: {known}" if known else f"positions 0 to {len(cells) - 1}"
    if not cells:
        hint = "the notebook has no cells; insert one"
    raise ToolArgumentError(f"argument 'cell_id': no cell {cell_id!r} in {shown} ({hint})")


def _has_ids(notebook: dict[str, Any]) -> bool:
    """Whether new cells get an id: cells of format 4.5 and later have one."""
    cells = notebook["cells"]
    if cells:
        return all("id" in cell for cell in cells)
    major, minor = notebook.get("nbformat"), notebook.get("nbformat_minor")
    if not isinstance(major, int) or not isinstance(minor, int):
        return True
    return (major, minor) >= (4, 5)


def _lines(source: str) -> list[str]:
    return source.splitlines(keepends=True)


def _new_cell(cell_type: CellType, source: str, *, with_id: bool) -> dict[str, Any]:
    cell: dict[str, Any] = {"cell_type": cell_type}
    if with_id:
        cell["id"] = secrets.token_hex(4)
    cell["metadata"] = {}
    cell["source"] = _lines(source)
    if cell_type == "code":
        cell["execution_count"] = None
        cell["outputs"] = []
    return cell


def _replace(cell: dict[str, Any], source: str, cell_type: CellType | None) -> None:
    if cell_type is not None:
        cell["cell_type"] = cell_type
    cell["source"] = _lines(source)
    if cell.get("cell_type") == "code":
        cell["execution_count"] = None  # the outputs were the old source's
        cell["outputs"] = []
    else:
        cell.pop("execution_count", None)
        cell.pop("outputs", None)
