"""Built-in file tools confined to one working directory.

``tools_file(working_dir)`` returns ``read_file``, ``list_files``, ``grep_files`` (all
read-only), ``write_file`` and ``edit_file``. Paths are confined to the working
directory (``_fileroot``), writes never go into version-control metadata under any alias
(``_vcs``), writes to one file are serialised process-wide and atomic (``_filewrite``),
searches run on RE2 in linear time (``_patterns``, ``_glob``), and every call is bounded
by :class:`FileToolLimits`. Refusals raise :class:`ToolArgumentError` with a message the
model can act on. ``docs/security.md`` lists what this does and does not protect against.

The parameters' ``examples`` are chosen to be harmless because the offline test provider
calls tools with ``examples[0]``: it reads ``README.md``, lists ``.``, and writes and
edits only ``deputy-scratch.txt``.
"""

from __future__ import annotations

import os
from typing import Annotated

import msgspec

from ._decorator import tool
from ._fileglob import glob_paths
from ._filegrep import grep
from ._fileread import list_dir, read_text
from ._fileroot import Root
from ._filewrite import edit, write
from ._limits import FileToolLimits
from ._multiedit import EditItem, multi_edit_file
from ._notebook import CellType, EditMode, notebook_edit_file
from ._todo import TodoItem, render_todos
from ._tool import Tool

__all__ = ["SCRATCH_EXAMPLE", "tools_file", "tools_file_extra"]

SCRATCH_EXAMPLE = "deputy-scratch.txt"

PathArg = Annotated[
    str,
    msgspec.Meta(
        description="File path relative to the working directory.", examples=["README.md"]
    ),
]
DirArg = Annotated[
    str,
    msgspec.Meta(
        description="Directory (or file) relative to the working directory.", examples=["."]
    ),
]
ScratchArg = Annotated[
    str,
    msgspec.Meta(
        description="File path relative to the working directory.", examples=[SCRATCH_EXAMPLE]
    ),
]


def _meta(description: str, example: object) -> msgspec.Meta:
    return msgspec.Meta(description=description, examples=[example])


def _size(n: int) -> str:
    for unit, scale in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} bytes"


def tools_file(
    working_dir: str | os.PathLike[str], *, limits: FileToolLimits | None = None
) -> tuple[Tool, ...]:
    """The five file tools, confined to ``working_dir``.

    The tools run in worker threads so file I/O never blocks the event loop; read-only
    ones stop promptly when their call is cancelled.

    Args:
        working_dir: The directory the tools are confined to (after resolving symlinks).
        limits: Bounds on each call; the defaults: reads show 256 KiB and scan 64 MiB,
            writes and edits 1 MiB, listings 1000 entries, searches 200 matches, 4 MiB per
            file and 64 MiB per call.

    Returns:
        ``(read_file, list_files, grep_files, write_file, edit_file)``.

    Raises:
        ToolDefinitionError: ``working_dir`` does not exist or is not a directory.
        TypeError: ``limits`` is not a FileToolLimits.
    """
    root, limits = _setup("tools_file", working_dir, limits)
    tools = (*_read_tools(root, limits), *_write_tools(root, limits))
    return tuple(msgspec.structs.replace(t, path_base=root.root) for t in tools)


def tools_file_extra(
    working_dir: str | os.PathLike[str], *, limits: FileToolLimits | None = None
) -> tuple[Tool, ...]:
    """Four more tools Claude Code's agent files name (``Glob``, ``MultiEdit``,
    ``TodoWrite``, ``NotebookEdit``), confined to ``working_dir`` like :func:`tools_file`'s.

    ``glob_files`` (read-only) lists the files whose path matches a glob, sorted by path;
    ``multi_edit`` applies several exact-text replacements to one file, all or none, in
    one atomic write; ``todo_write`` (no side effects) checks and shows the agent's task
    list, which the model sends whole on each call; ``notebook_edit`` replaces, inserts or
    deletes one cell of a Jupyter notebook, in one atomic write. They are a separate
    function so that :func:`tools_file` keeps returning exactly its five tools.

    Args:
        working_dir: The directory the tools are confined to (after resolving symlinks).
        limits: Bounds on each call, as for :func:`tools_file` (``glob_files`` shows at
            most ``list_entries`` paths; ``multi_edit`` and ``notebook_edit`` edit files
            up to ``write_bytes``).

    Returns:
        ``(glob_files, multi_edit, todo_write, notebook_edit)``.

    Raises:
        ToolDefinitionError: ``working_dir`` does not exist or is not a directory.
        TypeError: ``limits`` is not a FileToolLimits.
    """
    root, limits = _setup("tools_file_extra", working_dir, limits)
    tools = _extra_tools(root, limits)
    return tuple(msgspec.structs.replace(t, path_base=root.root) for t in tools)


def _setup(
    caller: str, working_dir: str | os.PathLike[str], limits: FileToolLimits | None
) -> tuple[Root, FileToolLimits]:
    root = Root(working_dir)
    limits = limits if limits is not None else FileToolLimits()
    if not isinstance(limits, FileToolLimits):
        raise TypeError(f"{caller}: limits must be a FileToolLimits, got {limits!r}")
    return root, limits


def _read_tools(root: Root, limits: FileToolLimits) -> tuple[Tool, Tool, Tool]:
    @tool(
        read_only=True,
        idempotent=True,
        run_in_thread=True,
        description=(
            "Read a UTF-8 text file in the working directory.\n\nShows at most "
            f"{_size(limits.read_bytes)} per call; a notice at the end says how to read on."
        ),
    )
    def read_file(
        path: PathArg,
        start_line: Annotated[int, msgspec.Meta(ge=1, description="First line to show.")] = 1,
        max_lines: Annotated[
            int | None, msgspec.Meta(description="Most lines to show (default: no limit).")
        ] = None,
    ) -> str:
        return read_text(root, limits, path, start_line, max_lines)

    @tool(
        read_only=True,
        idempotent=True,
        run_in_thread=True,
        description=(
            "List a directory in the working directory (directories end with '/').\n\n"
            "With recursive, lists the whole tree (skipping .git, node_modules and similar), "
            f"up to {limits.list_entries} entries."
        ),
    )
    def list_files(path: DirArg = ".", recursive: bool = False) -> str:
        return list_dir(root, limits, path, recursive)

    @tool(
        read_only=True,
        idempotent=True,
        run_in_thread=True,
        description=(
            "Search text files under a path for a regular expression (RE2 syntax).\n\n"
            f"Prints 'path:line: text' for each matching line, up to {limits.grep_matches} "
            "matches. Backreferences and lookaround are not supported."
        ),
    )
    def grep_files(
        pattern: Annotated[str, _meta("RE2 regular expression to search for.", "TODO")],
        path: DirArg = ".",
        glob: Annotated[
            str | None, _meta("Only files whose name or path matches this glob.", "*.py")
        ] = None,
        ignore_case: bool = False,
    ) -> str:
        return grep(root, limits, pattern, path, glob, ignore_case)

    return read_file, list_files, grep_files


def _write_tools(root: Root, limits: FileToolLimits) -> tuple[Tool, Tool]:
    @tool(
        idempotent=True,
        run_in_thread=True,
        description=(
            "Create or overwrite a text file in the working directory (at most "
            f"{_size(limits.write_bytes)}).\n\nParent directories are created. The write "
            "is atomic."
        ),
    )
    def write_file(
        path: ScratchArg,
        content: Annotated[
            str,
            _meta(
                "The complete new file content.",
                "Scratch file written by deputy_runtime; safe to delete.\n",
            ),
        ],
    ) -> str:
        return write(root, limits, path, content)

    @tool(
        run_in_thread=True,
        description=(
            "Replace exact text in a file in the working directory.\n\nold_string must "
            "occur exactly once unless replace_all is set; read the file first and copy "
            "the text exactly."
        ),
    )
    def edit_file(
        path: ScratchArg,
        old_string: Annotated[
            str, _meta("Exact text to replace (must be unique unless replace_all).", "safe")
        ],
        new_string: Annotated[str, _meta("Replacement text.", "safe")],
        replace_all: bool = False,
    ) -> str:
        return edit(root, limits, path, old_string, new_string, replace_all)

    return write_file, edit_file


def _extra_tools(root: Root, limits: FileToolLimits) -> tuple[Tool, Tool, Tool, Tool]:
    @tool(
        read_only=True,
        idempotent=True,
        run_in_thread=True,
        description=(
            "Find files in the working directory whose path matches a glob.\n\n'*' also "
            "matches '/', so '*.py' finds Python files at any depth; a leading '**/' "
            "matches at the top level too. Paths are sorted by name, at most "
            f"{limits.list_entries}."
        ),
    )
    def glob_files(
        pattern: Annotated[str, _meta("Glob matched against each file's path.", "*.md")],
        path: DirArg = ".",
    ) -> str:
        return glob_paths(root, limits, pattern, path)

    @tool(
        run_in_thread=True,
        description=(
            "Make several exact-text replacements in one file in the working directory.\n\n"
            "Edits apply in order, each to the result of the previous one; if any edit "
            "fails, none is applied and the file is unchanged."
        ),
    )
    def multi_edit(
        path: ScratchArg,
        edits: Annotated[
            list[EditItem],
            msgspec.Meta(
                description="The replacements, applied in order.",
                examples=[[{"old_string": "safe", "new_string": "safe"}]],
            ),
        ],
    ) -> str:
        return multi_edit_file(root, limits, path, edits)

    @tool(
        read_only=True,
        idempotent=True,
        description=(
            "Replace your task list with this complete list and show it.\n\nSend every "
            "item each time; keep one item in_progress while you work on it."
        ),
    )
    def todo_write(
        todos: Annotated[
            list[TodoItem],
            msgspec.Meta(
                description="The whole task list.",
                examples=[[{"content": "Read README.md", "status": "in_progress"}]],
            ),
        ],
    ) -> str:
        return render_todos(todos)

    @tool(
        run_in_thread=True,
        description=(
            "Replace, insert or delete one cell of a Jupyter notebook (.ipynb) in the "
            "working directory.\n\nName the cell by its id (or its 0-based position). "
            "replace sets its source (a code cell's outputs are cleared); insert adds a "
            "cell of cell_type after it (at the top without cell_id); delete removes it."
        ),
    )
    def notebook_edit(
        path: Annotated[
            str, _meta("Notebook path relative to the working directory.", "analysis.ipynb")
        ],
        new_source: Annotated[str, _meta("The cell's new source.", "print('hello')")],
        cell_id: Annotated[
            str | None, _meta("The cell's id, or its 0-based position.", "0")
        ] = None,
        cell_type: Annotated[
            CellType | None, _meta("The cell's type (required to insert).", "code")
        ] = None,
        edit_mode: Annotated[
            EditMode, _meta("replace (the default), insert or delete.", "replace")
        ] = "replace",
    ) -> str:
        return notebook_edit_file(root, limits, path, new_source, cell_id, cell_type, edit_mode)

    return glob_files, multi_edit, todo_write, notebook_edit
