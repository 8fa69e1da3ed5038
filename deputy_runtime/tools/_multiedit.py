"""multi_edit: several exact-text replacements in one file, all applied or none.

The edits apply in order, each to the text the previous one left, in memory and under
the file's process-wide lock (``_pathlock``); only when every edit has found its text is
the result written, atomically (temporary file, fsync, rename). A failing edit raises a
refusal naming its index, and the file is unchanged.
"""

from __future__ import annotations

import msgspec

from ..errors import ToolArgumentError
from ._fileroot import Root
from ._filewrite import read_for_edit, write_or_explain
from ._limits import FileToolLimits
from ._pathlock import path_lock

__all__ = ["EditItem", "multi_edit_file"]


class EditItem(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One replacement: old_string must occur exactly once unless replace_all is set."""

    old_string: str
    new_string: str
    replace_all: bool = False


def multi_edit_file(root: Root, limits: FileToolLimits, path: str, edits: list[EditItem]) -> str:
    if not edits:
        raise ToolArgumentError("argument 'edits': give at least one edit")
    real = root.resolve_for_write(path)
    shown = root.rel(real)
    most = limits.write_bytes
    with path_lock(real):
        text = _read(real, shown, most)
        total = 0
        for index, item in enumerate(edits):
            text, count = _apply(text, item, f"edits[{index}]", shown)
            total += count
        data = text.encode("utf-8")
        if len(data) > most:
            raise ToolArgumentError(f"the edited file would be over {most} bytes")
        write_or_explain(real, data, path)
    return f"Edited {shown}: {len(edits)} edit(s), {total} replacement(s)"


def _read(real: str, shown: str, most: int) -> str:
    try:
        return read_for_edit(real, shown, most).decode("utf-8")
    except UnicodeDecodeError:
        raise ToolArgumentError(
            f"{shown!r} is not UTF-8 text; multi_edit cannot change it"
        ) from None


def _apply(text: str, item: EditItem, label: str, shown: str) -> tuple[str, int]:
    nothing = "no edit was applied"
    if not item.old_string:
        raise ToolArgumentError(f"argument '{label}.old_string': must not be empty; {nothing}")
    count = text.count(item.old_string)
    if count == 0:
        raise ToolArgumentError(
            f"argument '{label}.old_string': not found in {shown} (after the edits before "
            f"it); {nothing}. read_file it again and copy the exact text"
        )
    if count > 1 and not item.replace_all:
        raise ToolArgumentError(
            f"argument '{label}.old_string': found {count} times in {shown}; include more "
            f"surrounding text or set replace_all; {nothing}"
        )
    if item.replace_all:
        return text.replace(item.old_string, item.new_string), count
    return text.replace(item.old_string, item.new_string, 1), 1
