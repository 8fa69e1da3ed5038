"""A ``--plugin`` for the command line tests: registers the tool names Claude Code and
AgentLane agent files use (inert tools; nothing runs them) and the skills the corpus
names, so that ``validate`` and ``list`` resolve those files as a host with such tools
would."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

from tests.definitions._markdown_helpers import TOOL_NAMES, make_tool, skill_registry

tools = [make_tool(name) for name in TOOL_NAMES]
skills = skill_registry()
