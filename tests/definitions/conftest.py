"""Fixtures for the definition tests: real registries of Tool and Skill objects."""

from __future__ import annotations

import pytest

from deputy_runtime.skills import Skill
from deputy_runtime.tools import Tool
from tests.definitions._definition_helpers import make_tool


@pytest.fixture
def read_tool() -> Tool:
    return make_tool("read_file")


@pytest.fixture
def tools(read_tool: Tool) -> dict[str, Tool]:
    return {"read_file": read_tool, "grep_files": make_tool("grep_files")}


@pytest.fixture
def skill() -> Skill:
    return Skill("style", "House style", "Write plainly.")


@pytest.fixture
def skills(skill: Skill) -> dict[str, Skill | str]:
    return {"style": skill, "checklist": "skills/checklist"}
