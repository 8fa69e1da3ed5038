"""glob_files: the files under a path whose relative path matches a glob.

The glob is compiled by ``_glob`` (RE2, linear time, capped length and wildcards), whose
``*`` also matches ``/``, so ``*.py`` finds Python files at any depth and ``src/*.ts``
every ``.ts`` file under ``src``. A leading ``**/`` also matches at the top level (Claude
Code's ``**/*.py`` finds ``setup.py`` too). Results are sorted by path, not by
modification time: the same tree always gives the same answer, which keeps runs
reproducible and answers cacheable. The walk skips the directories ``list_files`` skips
and never follows symlinks, and it stops at ``list_entries`` matches (in walk order:
sorted names, a directory's files before its subdirectories), so neither memory nor
the answer grows with the tree.
"""

from __future__ import annotations

import os

from ..errors import ToolArgumentError
from ._cancel import raise_if_cancelled
from ._fileread import walk
from ._fileroot import Root
from ._glob import compile_glob
from ._limits import FileToolLimits

__all__ = ["glob_paths"]


def glob_paths(root: Root, limits: FileToolLimits, pattern: str, path: str) -> str:
    if not pattern:
        raise ToolArgumentError("argument 'pattern': must not be empty; try '*.py'")
    try:
        matchers = [compile_glob(pattern)]
        if pattern.startswith("**/"):
            matchers.append(compile_glob(pattern[3:]))
    except ToolArgumentError as exc:  # the glob module names grep_files' argument
        raise ToolArgumentError(str(exc).replace("'glob'", "'pattern'", 1)) from None
    real = root.resolve(path)
    if not os.path.isdir(real):
        what = "is not a directory" if os.path.exists(real) else "does not exist"
        raise ToolArgumentError(f"argument 'path': {path!r} {what}")
    found: list[str] = []
    more = False
    for dirpath, _, files in walk(real):
        raise_if_cancelled()
        for name in files:
            rel = os.path.relpath(os.path.join(dirpath, name), real).replace(os.sep, "/")
            if any(m.matches(rel) for m in matchers):
                if len(found) == limits.list_entries:
                    more = True
                    break
                found.append(root.rel(os.path.join(dirpath, name)))
        if more:
            break
    if not found:
        return f"No files match {pattern!r} under {root.rel(real)}"
    found.sort()
    if more:
        found.append(
            f"[stopped after {limits.list_entries} paths, the limit of one call; narrow the "
            "pattern or path]"
        )
    return "\n".join(found)
