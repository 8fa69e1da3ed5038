"""write_file and edit_file never write into .git, .hg or .svn under any alias.

A case-insensitive file system maps ``.GIT`` to ``.git``, HFS+ ignores invisible code
points (``.g\u200cit``), and Windows drops trailing dots and spaces, reads ``:stream``
suffixes and answers to 8.3 short names (``GIT~1``). The property test generates such
spellings at any depth and checks that nothing is written; real temp dirs throughout.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deputy_runtime.errors import ToolArgumentError
from deputy_runtime.tools import tools_file

IGNORABLE = ["\u200c", "\u200d", "\u200e", "\u200f", "\u202a", "\u202e", "\u206a", "\ufeff"]
CONFIG = "[core]\n"


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every entry under ``root`` with its bytes (None for directories)."""
    out: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            out[os.path.relpath(os.path.join(dirpath, name), root)] = None
        for name in filenames:
            path = os.path.join(dirpath, name)
            out[os.path.relpath(path, root)] = Path(path).read_bytes()
    return out


def make_repo(base: Path) -> Path:
    (base / ".git" / "hooks").mkdir(parents=True)
    (base / ".git" / "config").write_text(CONFIG)
    (base / "sub").mkdir()
    return base


# Letters that upper-case (as NTFS compares names) to the ASCII letter of the key.
LOOKALIKES = {"i": "\u0131", "s": "\u017f"}


@st.composite
def random_case(draw: st.DrawFn, word: str) -> str:
    """``word`` with each letter kept, upper-cased, or swapped for a lookalike."""
    out = []
    for c in word:
        forms = [c, c.upper(), *([LOOKALIKES[c]] if c in LOOKALIKES else [])]
        out.append(draw(st.sampled_from(forms)))
    return "".join(out)


@st.composite
def vcs_alias(draw: st.DrawFn) -> str:
    """One spelling some file system resolves to a version-control directory."""
    base = draw(st.sampled_from(["git", "hg", "svn"]))
    trailing = draw(st.text(alphabet=". ", max_size=3))
    if draw(st.booleans()):  # 8.3 short name
        return draw(random_case(base)) + "~" + str(draw(st.integers(1, 9))) + trailing
    chars = list("." + draw(random_case(base)))
    for _ in range(draw(st.integers(0, 2))):
        chars.insert(draw(st.integers(1, len(chars))), draw(st.sampled_from(IGNORABLE)))
    stream = draw(st.sampled_from(["", ":", "::$INDEX_ALLOCATION", ":x:$DATA"]))
    return "".join(chars) + trailing + stream


@st.composite
def alias_paths(draw: st.DrawFn) -> str:
    prefix = draw(st.sampled_from(["", "sub/", "./", "sub/../", "new/dir/"]))
    suffix = draw(st.sampled_from(["", "/config", "/hooks/pre-commit", "/new/file"]))
    return prefix + draw(vcs_alias()) + suffix


@settings(max_examples=300, deadline=None)
@given(path=alias_paths())
def test_property_no_alias_of_a_vcs_directory_is_written(path: str) -> None:
    with tempfile.TemporaryDirectory() as base:
        root = make_repo(Path(base))
        tools = {t.name: t.function for t in tools_file(root)}
        before = snapshot(root)
        with pytest.raises(ToolArgumentError, match="version-control metadata"):
            tools["write_file"](path=path, content="[core]\n\tfsmonitor = touch /tmp/x\n")
        with pytest.raises(ToolArgumentError, match="version-control metadata"):
            tools["edit_file"](path=path, old_string="[core]", new_string="[pwned]")
        assert snapshot(root) == before


@pytest.mark.parametrize(
    "name",
    [".gitignore", ".github", "git", ".git2", ".gi", "git~", "xgit~1", ".gitx.", "hg", "svn~"],
)
def test_near_misses_are_ordinary_names(tmp_path: Path, name: str) -> None:
    tools = {t.name: t.function for t in tools_file(make_repo(tmp_path))}
    assert tools["write_file"](path=f"sub/{name}", content="x").startswith("Created")
    assert (tmp_path / "sub" / name).read_text() == "x"


def test_a_symlink_into_git_is_refused(tmp_path: Path) -> None:
    root = make_repo(tmp_path)
    os.symlink(root / ".git" / "config", root / "cfg")
    os.symlink(root / ".git", root / "meta")
    tools = {t.name: t.function for t in tools_file(root)}
    for path in ("cfg", "meta/hooks/post-checkout"):
        with pytest.raises(ToolArgumentError, match="version-control metadata"):
            tools["write_file"](path=path, content="x")
    assert (root / ".git" / "config").read_text() == CONFIG
    assert not (root / ".git" / "hooks" / "post-checkout").exists()
