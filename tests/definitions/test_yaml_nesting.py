"""Deeply nested YAML is refused before libyaml composes it.

libyaml's composer recurses in C once per nesting level, which Python's recursion limit
does not see: a definition, agent or skill file nested a few hundred levels deep crashed
the whole process with SIGSEGV on a small stack (a CI run died this way). Every reader
now measures the depth on libyaml's iterative event stream first.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from deputy_runtime.definitions import agent_definition_from_markdown, agent_definition_read
from deputy_runtime.definitions._yaml import load_yaml, may_nest_deeper, nesting_problem
from deputy_runtime.errors import DefinitionFileError, SkillError
from deputy_runtime.skills import skill_load

HEAD = "version: 1\nname: a\ndescription: d\nprompt: p\n"


def _flow(depth: int) -> str:
    return "[" * depth + "]" * depth


def _block(depth: int) -> str:
    # "- - - x" nests one block sequence per "- " on a single line.
    return "- " * depth + "x"


@pytest.mark.parametrize("depth", [64, 65, 200, 999, 5000])
def test_definition_file_nesting_is_refused_with_a_position(tmp_path: Path, depth: int) -> None:
    path = tmp_path / "a.yaml"
    path.write_text(f"{HEAD}params:\n  deep: {_flow(depth)}\n")
    with pytest.raises(DefinitionFileError, match="nested more than 64 levels deep") as info:
        agent_definition_read(path)
    assert (info.value.path, info.value.line) == (path, 6)
    if depth < 900:  # past libyaml's own limit its scanner reports the depth further on
        # The root and params mappings are two levels: the 64th '[' is one too many.
        assert info.value.column == 9 + 63


def test_nesting_at_the_limit_loads() -> None:
    # (The params field has a tighter limit of its own, so the loader is read directly.)
    value = load_yaml(f"{HEAD}params:\n  deep: {_flow(63)}\n")[0]["params"]["deep"]
    for _ in range(62):
        (value,) = value
    assert value == []


@pytest.mark.parametrize(
    ("value", "line"),
    [
        (_flow(999), 4),
        (_flow(100_000), 4),
        ("\n  " + _block(5000), 5),
        ("{a: " * 400 + "1" + "}" * 400, 4),
    ],
)
def test_markdown_frontmatter_nesting_is_refused(tmp_path: Path, value: str, line: int) -> None:
    path = tmp_path / "a.md"
    path.write_text(f"---\nname: a\ndescription: d\nmodel_args: {value}\n---\nbody\n")
    with pytest.raises(DefinitionFileError, match="nested more than 64 levels deep") as info:
        agent_definition_from_markdown(path)
    assert (info.value.path, info.value.line) == (path, line)


def test_skill_frontmatter_nesting_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "SKILL.md"
    path.write_text(f"---\nname: s\ndescription: d\nx: {_flow(999)}\n---\nbody\n")
    with pytest.raises(SkillError, match=r"nested more than 64 levels deep \(line 4\)"):
        skill_load(path)


# Before the fix this child died with SIGSEGV: each reader composes depth 999 (just under
# libyaml's own limit of 1000) on a thread whose stack is far smaller than the default.
CHILD = textwrap.dedent(
    """
    import sys, threading
    from pathlib import Path
    from deputy_runtime.definitions import agent_definition_from_markdown, agent_definition_read
    from deputy_runtime.skills import skill_load

    root = Path(sys.argv[1])
    deep = "[" * 999 + "]" * 999
    (root / "a.yaml").write_text("version: 1\\nname: a\\ndescription: d\\nprompt: p\\nparams: {x: "
                                 + deep + "}\\n")
    (root / "a.md").write_text("---\\nname: a\\ndescription: d\\nx: " + deep + "\\n---\\nb\\n")
    (root / "SKILL.md").write_text("---\\nname: s\\ndescription: d\\nx: " + deep + "\\n---\\nb\\n")
    outcomes = []

    def read_all():
        for read, name in ((agent_definition_read, "a.yaml"),
                           (agent_definition_from_markdown, "a.md"), (skill_load, "SKILL.md")):
            try:
                read(root / name)
            except Exception as exc:
                outcomes.append(type(exc).__name__)

    threading.stack_size(160 * 1024)
    thread = threading.Thread(target=read_all)
    thread.start()
    thread.join()
    print(" ".join(outcomes))
    """
)


@pytest.mark.slow
def test_deep_files_do_not_crash_a_small_stack(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["DefinitionFileError", "DefinitionFileError", "SkillError"]


# Nested values of lists and string-keyed mappings, dumped in flow and block style.
_NESTED = st.recursive(
    st.none() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(min_size=1, max_size=4), inner, max_size=3)
    ),
    max_leaves=40,
)


def _depth(value: object) -> int:
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    return 0


@settings(max_examples=300, deadline=None)
@given(value=_NESTED, flow=st.booleans(), limit=st.integers(0, 8))
def test_the_cheap_bound_never_misses_deep_nesting(value: object, flow: bool, limit: int) -> None:
    text = yaml.safe_dump(value, default_flow_style=flow, allow_unicode=True)
    deeper = _depth(value) > limit
    assert (nesting_problem(text, limit) is not None) == deeper
    if deeper:
        assert may_nest_deeper(text, limit)
