"""How much one call of a file tool may read, write, list or search.

Each cap keeps one tool call bounded in time and memory whatever the files look like:
a huge or sparse file, a minified one-line file, a tree of millions of files. The
defaults suit a model reading source code; pass a :class:`FileToolLimits` to
``tools_file`` to change them.
"""

from __future__ import annotations

import msgspec

from ..errors import ToolDefinitionError

__all__ = ["FileToolLimits"]

_KIB = 1024
_MIB = 1024 * _KIB


class FileToolLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Per-call caps of the built-in file tools (all in bytes unless named otherwise).

    - ``read_bytes``: text read_file shows per call (a notice says how to read on).
    - ``read_scan_bytes``: bytes read_file reads per call, counting lines skipped to
      reach ``start_line`` and the rest of over-long lines; text further into a file
      than this is out of read_file's reach.
    - ``write_bytes``: largest file write_file writes and edit_file edits or produces.
    - ``list_entries``: entries list_files shows.
    - ``grep_matches``: matching lines grep_files shows.
    - ``grep_file_bytes``: bytes grep_files searches per file (the start of a larger
      file is searched, and the answer says so).
    - ``grep_scan_bytes``: bytes grep_files reads per call over all files.
    """

    read_bytes: int = 256 * _KIB
    read_scan_bytes: int = 64 * _MIB
    write_bytes: int = 1 * _MIB
    list_entries: int = 1000
    grep_matches: int = 200
    grep_file_bytes: int = 4 * _MIB
    grep_scan_bytes: int = 64 * _MIB

    def __post_init__(self) -> None:
        for name in self.__struct_fields__:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ToolDefinitionError(
                    f"FileToolLimits.{name}: expected a positive int, got {value!r}"
                )
