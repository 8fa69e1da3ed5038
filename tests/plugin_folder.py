"""A Claude Code plugin folder on disk, for the plugin tests of several suites."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from tests.mcp._mcp_helpers import SERVERS

_AGENT = """\
---
name: checker
description: Checks the notes and tries to write a report.
tools: Read, Write, mcp__tiny__whoami
skills: [style]
initialPrompt: /kit:brief notes.txt
---
You check files.
"""
_HOOK = """\
#!/bin/sh
cat > "$CLAUDE_PLUGIN_ROOT/../hook-input.json"
echo "writes are frozen by the kit plugin" >&2
exit 2
"""


def write_plugin(root: Path) -> Path:
    """The test plugin under ``root/kit``; its hook logs what it read beside it."""
    plugin = root / "kit"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text(
        json.dumps({"name": "kit", "description": "A test kit", "version": "1.0.0"})
    )
    (plugin / "README.md").write_text("# kit\n\nNot an agent.\n")
    (plugin / "agents").mkdir()
    (plugin / "agents" / "checker.md").write_text(_AGENT)
    (plugin / "skills" / "style").mkdir(parents=True)
    (plugin / "skills" / "style" / "SKILL.md").write_text(
        "---\nname: style\ndescription: House style for reports.\n---\nWrite short lines.\n"
    )
    (plugin / "commands").mkdir()
    (plugin / "commands" / "brief.md").write_text(
        "---\ndescription: Brief a checker\n---\nCheck $ARGUMENTS and report.\n"
    )
    (plugin / "hooks").mkdir()
    script = plugin / "hooks" / "deny-write.sh"
    script.write_text(_HOOK)
    script.chmod(0o755)
    hooks = {
        "description": "Freeze writes",
        "hooks": {
            "PreToolUse": [
                {
                    "matcher": "Write|Edit",
                    "hooks": [
                        {
                            "type": "command",
                            "command": '"${CLAUDE_PLUGIN_ROOT}/hooks/deny-write.sh"',
                        }
                    ],
                }
            ],
            "TeammateIdle": [{"hooks": [{"type": "command", "command": "true"}]}],
        },
    }
    (plugin / "hooks" / "hooks.json").write_text(json.dumps(hooks))
    (plugin / "servers").mkdir()
    shutil.copy(SERVERS / "tiny.py", plugin / "servers" / "tiny.py")
    flat = {
        "tiny": {
            "command": sys.executable,
            "args": ["${CLAUDE_PLUGIN_ROOT}/servers/tiny.py", "kit"],
        }
    }
    (plugin / ".mcp.json").write_text(json.dumps(flat))
    return plugin
