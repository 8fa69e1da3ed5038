"""Claude Code's built-in tool names and the deputy tools they stand for.

An agent file written for Claude Code names its tools ``Read``, ``Grep``, ``Bash``, ...;
:data:`CLAUDE_CODE_TOOLS` is the one table that maps each such name to the deputy tool
name it stands for. A file's entry resolves to the mapped tool when the host's registry
holds it (*honoured*); when it does not, the entry is dropped with a warning naming it
(*warned*): the agent still loads, and the warning says which capability it lacks, so
a missing tool is never silent and never a hard error. A registry key spelled exactly
like a Claude Code name (a host tool called ``Bash``) wins over the table.

Both ``validate`` and ``run`` read files through :func:`build_definition
<deputy_runtime.definitions._markdown_read.build_definition>`, which calls
:func:`resolve_claude_tool`, so the two always agree.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

import msgspec

__all__ = [
    "CLAUDE_CODE_TOOLS",
    "ClaudeToolResolution",
    "ClaudeToolStatus",
    "resolve_claude_tool",
]

#: Claude Code tool name -> the deputy tool name it maps to. Write-class targets
#: (``write_file``, ``edit_file``, ``multi_edit``, ``bash``, ``kill_shell``) are in the
#: permission modes' write list, so a mapped tool keeps its read/write class.
CLAUDE_CODE_TOOLS: Mapping[str, str] = MappingProxyType(
    {
        "Read": "read_file",
        "LS": "list_files",
        "Grep": "grep_files",
        "Glob": "glob_files",
        "Write": "write_file",
        "Edit": "edit_file",
        "MultiEdit": "multi_edit",
        "NotebookRead": "read_file",
        "NotebookEdit": "notebook_edit",
        "TodoWrite": "todo_write",
        # Claude Code's newer task-list tools: one deputy tool keeps the whole list.
        "TaskCreate": "todo_write",
        "TaskGet": "todo_write",
        "TaskList": "todo_write",
        "TaskUpdate": "todo_write",
        "AskUserQuestion": "ask_user",
        "Bash": "bash",
        "BashOutput": "bash_output",
        "KillShell": "kill_shell",
        "KillBash": "kill_shell",  # KillShell's earlier name
        "TaskOutput": "bash_output",  # BashOutput's later name
        "TaskStop": "kill_shell",  # KillShell's later name
        "WebFetch": "web_fetch",
        "WebSearch": "web_search",
        "ExitPlanMode": "exit_plan_mode",
        "SendMessage": "send_message",
        "Task": "delegate",
        "Agent": "delegate",
    }
)


class ClaudeToolStatus(enum.Enum):
    """How one Claude Code name in a file resolved against a registry."""

    HONOURED = "honoured"  # the mapped deputy tool is in the registry
    WARNED = "warned"  # the mapped tool is not available here: dropped with a warning


class ClaudeToolResolution(msgspec.Struct, frozen=True):
    """One Claude Code name, the deputy name it maps to, and whether the host has it."""

    claude_name: str
    deputy_name: str
    status: ClaudeToolStatus


def resolve_claude_tool(name: str, registry: Mapping[str, object]) -> ClaudeToolResolution | None:
    """How ``name`` resolves, or ``None`` when it is not a Claude Code name the table maps
    or the registry holds a tool under that exact key (the host's own tool wins)."""
    mapped = CLAUDE_CODE_TOOLS.get(name)
    if mapped is None or name in registry:
        return None
    status = ClaudeToolStatus.HONOURED if mapped in registry else ClaudeToolStatus.WARNED
    return ClaudeToolResolution(name, mapped, status)
