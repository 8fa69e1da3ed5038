"""Skills: loading SKILL.md directories, the load_skill tool and the prompt section."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from deputy_runtime.errors import SkillError, ToolArgumentError
from deputy_runtime.skills import (
    SKILL_MAX_BYTES,
    Skill,
    skill_load,
    skills_prompt_section,
    skills_tool,
)
from deputy_runtime.tools import invoke_tool, tool

GOOD = """---
name: pdf-forms
description: >
  Fill in PDF forms
  from structured data.
license: MIT
---

# Filling PDF forms

1. Read `reference.md`.
2. Run the script.
"""


def write_skill(base: Path, name: str, text: str) -> Path:
    d = base / name
    d.mkdir(parents=True)
    (d / "SKILL.md").write_text(text, encoding="utf-8")
    return d


def test_load_directory(tmp_path: Path) -> None:
    d = write_skill(tmp_path, "pdf-forms", GOOD)
    (d / "reference.md").write_text("ref")
    skill = skill_load(d)
    assert skill.name == "pdf-forms"
    assert skill.description == "Fill in PDF forms from structured data."
    assert skill.instructions.startswith("# Filling PDF forms")
    assert skill.instructions.endswith("2. Run the script.")
    assert skill.path == Path(os.path.realpath(d))
    assert skill.tools == ()
    assert skill_load(d / "SKILL.md").name == "pdf-forms"
    assert skill_load(str(d)).instructions == skill.instructions


def test_bom_and_crlf_are_accepted(tmp_path: Path) -> None:
    d = tmp_path / "s"
    d.mkdir()
    text = GOOD.replace("\n", "\r\n")
    (d / "SKILL.md").write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert skill_load(d).name == "pdf-forms"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("no frontmatter", "must start with '---'"),
        ("---\nname: x\n", "no closing '---'"),
        ("---\nname: [unclosed\n---\nbody", "invalid YAML frontmatter"),
        ("---\n- a\n- b\n---\nbody", "must be a mapping"),
        ("---\ndescription: d\n---\nbody", "'name' must be"),
        ("---\nname: bad name!\ndescription: d\n---\nbody", "'name' must be"),
        ("---\nname: 3\ndescription: d\n---\nbody", "'name' must be"),
        ("---\nname: ok\n---\nbody", "'description' must be a non-empty string"),
        ("---\nname: ok\ndescription: '  '\n---\nbody", "'description' must be"),
        (f"---\nname: ok\ndescription: {'d' * 1025}\n---\nbody", "limit is 1024"),
        ("---\nname: ok\ndescription: d\n---\n\n  \n", "instructions .* are empty"),
    ],
)
def test_malformed_skill_files_name_the_path(tmp_path: Path, text: str, message: str) -> None:
    d = write_skill(tmp_path, "s", text)
    with pytest.raises(SkillError, match=message) as info:
        skill_load(d)
    assert str(d / "SKILL.md") in str(info.value)


def test_unsafe_or_missing_files(tmp_path: Path) -> None:
    with pytest.raises(SkillError, match="skill file not found") as info:
        skill_load(tmp_path / "missing")
    assert str(tmp_path / "missing") in str(info.value)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SkillError, match="not found"):
        skill_load(empty)
    fifo_dir = tmp_path / "fifo"
    fifo_dir.mkdir()
    os.mkfifo(fifo_dir / "SKILL.md")
    with pytest.raises(SkillError, match="not a regular file"):
        skill_load(fifo_dir)  # must not block on the FIFO
    big = write_skill(tmp_path, "big", GOOD + "x" * SKILL_MAX_BYTES)
    with pytest.raises(SkillError, match="limit"):
        skill_load(big)
    bad = tmp_path / "latin"
    bad.mkdir()
    (bad / "SKILL.md").write_bytes(GOOD.encode().replace(b"Fill", b"F\xe9ll"))
    with pytest.raises(SkillError, match="not valid UTF-8"):
        skill_load(bad)


def test_symlinked_skill_file_to_regular_file_is_read(tmp_path: Path) -> None:
    src = write_skill(tmp_path, "src", GOOD)
    d = tmp_path / "linked"
    d.mkdir()
    os.symlink(src / "SKILL.md", d / "SKILL.md")
    assert skill_load(d).name == "pdf-forms"


@pytest.mark.anyio
async def test_load_skill_tool(tmp_path: Path) -> None:
    a = skill_load(write_skill(tmp_path, "a", GOOD))
    b = Skill(name="Review", description="Code review.", instructions="Check tests.")
    load = skills_tool([a, b])
    assert load.name == "load_skill"
    assert load.read_only
    assert load.parameters["required"] == ["name"]
    out = await invoke_tool(load, {"name": "pdf-forms"})
    assert out.startswith("# Filling PDF forms")
    assert f"Skill directory: {a.path}" in out
    assert await invoke_tool(load, {"name": "review"}) == "Check tests."
    with pytest.raises(ToolArgumentError, match="available skills: Review, pdf-forms"):
        await invoke_tool(load, {"name": "nope"})
    with pytest.raises(ToolArgumentError, match="argument 'name': expected string"):
        await invoke_tool(load, {"name": 3})


def test_duplicate_or_bad_skills_rejected() -> None:
    s = Skill(name="x", description="d", instructions="i")
    t = Skill(name="x", description="d2", instructions="i2")
    with pytest.raises(SkillError, match="two skills are named 'x'"):
        skills_tool([s, t])
    with pytest.raises(SkillError, match="expected Skill objects"):
        skills_prompt_section(["x"])  # type: ignore[list-item]


def test_prompt_section_lists_names_and_descriptions() -> None:
    @tool
    def helper() -> str:
        return "h"

    skills = [
        Skill(name="pdf-forms", description="Fill PDF forms.", instructions="long..."),
        Skill(name="review", description="Review code.", instructions="...", tools=(helper,)),
    ]
    section = skills_prompt_section(skills)
    assert section.startswith("# Skills\n")
    assert "load_skill" in section
    assert "- pdf-forms: Fill PDF forms.\n- review: Review code." in section
    assert "long..." not in section  # instructions load on demand only
    assert skills_prompt_section([]) == ""


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("name: 0x" + "f" * 4000, "(hexadecimal notation is not accepted)"),
        ("version: 1" + ":59" * 60_000, "(YAML 1.1 reads digits separated by ':' as a base-60"),
        ("tools: [" + ",".join(["a"] * 100_000) + "]", "the value of 'tools' has more than 1,024"),
        ("flag: !!bool maybe", "a value could not be read ('maybe')"),
    ],
    ids=["huge-hex-name", "base-60", "long-list", "bad-bool"],
)
def test_hostile_frontmatter_is_a_skill_error(tmp_path: Path, extra: str, message: str) -> None:
    # These used to escape as ValueError or KeyError, or take seconds (base 60).
    d = write_skill(tmp_path, "s", f"---\ndescription: d\n{extra}\n---\nDo it.\n")
    with pytest.raises(SkillError) as info:
        skill_load(d)
    assert str(d / "SKILL.md") in str(info.value)
    assert message in str(info.value)


def test_a_nul_in_the_path_is_a_skill_error() -> None:
    with pytest.raises(SkillError, match="cannot contain a NUL character"):
        skill_load("skills/a\0b")
