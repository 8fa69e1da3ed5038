"""Recognising version-control metadata directories under any spelling a file system accepts.

A file written into ``.git`` (a hook, or a ``core.fsmonitor`` line in ``.git/config``)
runs a command on the host's next git call, so the write tools refuse those paths. A
plain ``== ".git"`` is not enough, because several spellings reach the same directory:

- case-insensitive file systems (macOS, Windows) treat ``.GIT`` and ``.Git`` as ``.git``,
  and NTFS upper-cases names to compare them, so ``.gıt`` (dotless i) is ``.git`` too;
- HFS+ ignores some invisible code points, so ``.g\u200cit`` is ``.git`` there;
- Windows drops trailing dots and spaces (``.git.``, ``.git ``), reads ``.git::$DATA``
  style suffixes as a stream of ``.git``, and answers to the 8.3 short name ``GIT~1``.

:func:`is_vcs_metadata` folds all of these before comparing. It may refuse a name that is
harmless on the file system at hand (``.GIT`` on Linux); that costs a model one retry,
while missing an alias costs the host a command execution.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["VCS_DIRS", "is_vcs_metadata"]

#: Metadata directories the write tools never write into (under any alias).
VCS_DIRS = (".git", ".hg", ".svn")

# Code points HFS+ leaves out when comparing names (the set git itself folds away).
_IGNORABLE = re.compile("[\u200c-\u200f\u202a-\u202e\u206a-\u206f\ufeff]")
# Windows 8.3 short names of the directories above: GIT~1, HG~2, SVN~1, ...
_SHORT_NAME = re.compile(r"(?:git|hg|svn)~[0-9]+")


def folded_names(name: str) -> tuple[str, str]:
    """``name`` as case-insensitive, HFS+ or Windows file systems may compare it.

    Two foldings: lower-casing (``casefold``) and upper-casing first, as NTFS does, which
    also maps letters such as the dotless ``ı`` to ``I`` (so ``.gıt`` matches ``.git``).
    """
    stripped = _IGNORABLE.sub("", unicodedata.normalize("NFC", name))
    stripped = stripped.split(":", 1)[0]  # an NTFS stream suffix names the same entry
    stripped = stripped.rstrip(". ")
    return stripped.casefold(), stripped.upper().casefold()


def is_vcs_metadata(name: str) -> bool:
    """Whether the single path component ``name`` may be a version-control directory."""
    return any(
        folded in VCS_DIRS or _SHORT_NAME.fullmatch(folded) is not None
        for folded in folded_names(name)
    )
