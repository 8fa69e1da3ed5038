"""The Claude Code tool table and how a markdown file's ``tools`` resolve through it.

This tests the private table module directly (it is the helper under test); the files
are read through the public reader with the CLI's own registry, so what is checked here
is what ``validate`` and ``run`` resolve.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deputy_runtime._cli.definitions import host_tool_registry
from deputy_runtime.definitions import DefinitionProblem
from deputy_runtime.definitions import agent_definition_from_markdown as read_md
from deputy_runtime.definitions._claude_tools import (
    CLAUDE_CODE_TOOLS,
    ClaudeToolStatus,
    resolve_claude_tool,
)
from deputy_runtime.errors import DefinitionFileError
from deputy_runtime.runtime._permissions import KNOWN_WRITE_TOOLS  # the modes' write list
from deputy_runtime.tools import tools_file, tools_file_extra

EXPECTED = {
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
    "AskUserQuestion": "ask_user",
    "Bash": "bash",
    "BashOutput": "bash_output",
    "KillShell": "kill_shell",
    "WebFetch": "web_fetch",
    "WebSearch": "web_search",
    "Task": "delegate",
    "Agent": "delegate",
}
WRITE_CLASS = {"write_file", "edit_file", "multi_edit", "notebook_edit", "bash", "kill_shell"}


def test_the_table_maps_each_claude_code_name() -> None:
    for name, deputy in EXPECTED.items():
        assert CLAUDE_CODE_TOOLS[name] == deputy


def test_mapped_tools_keep_their_permission_class(tmp_path: Path) -> None:
    targets = set(CLAUDE_CODE_TOOLS.values())
    assert targets & set(KNOWN_WRITE_TOOLS) == WRITE_CLASS
    assert "run_bash" not in KNOWN_WRITE_TOOLS
    # The deputy tools that exist here: read-only exactly when not write-class.
    built = {t.name: t for t in (*tools_file(tmp_path), *tools_file_extra(tmp_path))}
    for name in targets & set(built):
        assert built[name].read_only is (name not in WRITE_CLASS), name


def test_resolution_status() -> None:
    registry = {"read_file": object(), "Bash": object()}
    read = resolve_claude_tool("Read", registry)
    assert read is not None
    assert (read.deputy_name, read.status) == ("read_file", ClaudeToolStatus.HONOURED)
    glob = resolve_claude_tool("Glob", registry)
    assert glob is not None
    assert (glob.deputy_name, glob.status) == ("glob_files", ClaudeToolStatus.WARNED)
    assert resolve_claude_tool("Bash", registry) is None  # the host's own key wins
    assert resolve_claude_tool("read_file", registry) is None  # not a Claude Code name
    assert resolve_claude_tool("bash", registry) is None  # names are case-sensitive


def _file(tmp_path: Path, frontmatter: str) -> Path:
    path = tmp_path / "agent.md"
    path.write_text(f"---\nname: agent\ndescription: An agent\n{frontmatter}---\nWork.\n")
    return path


def test_honoured_names_give_the_cli_registry_tools(tmp_path: Path) -> None:
    registry = host_tool_registry(working_dir=tmp_path)
    problems: list[DefinitionProblem] = []
    tools = "Read, LS, Grep, Glob, Write, Edit, MultiEdit, NotebookRead, TodoWrite"
    d = read_md(_file(tmp_path, f"tools: {tools}\n"), registry, on_warning=problems.append)
    assert problems == []
    names = ["read_file", "list_files", "grep_files", "glob_files", "write_file", "edit_file"]
    names += ["multi_edit", "todo_write"]  # NotebookRead is read_file again: one tool
    assert [t.name for t in d.tools] == names
    assert all(t is registry[t.name] for t in d.tools)


def test_missing_tools_are_dropped_with_one_warning_each(tmp_path: Path) -> None:
    registry = host_tool_registry(working_dir=tmp_path)
    problems: list[DefinitionProblem] = []
    missing = ["SendMessage", "Task", "Agent"]
    line = f"tools: [Read, Bash, WebFetch, NotebookEdit, AskUserQuestion, {', '.join(missing)}]\n"
    d = read_md(_file(tmp_path, line), registry, on_warning=problems.append)
    # The command line's registry has the sandboxed shell tools and (with the web extra)
    # the web tools, notebook_edit and ask_user: Bash, WebFetch, NotebookEdit and
    # AskUserQuestion are honoured.
    assert [t.name for t in d.tools] == [
        "read_file",
        "bash",
        "web_fetch",
        "notebook_edit",
        "ask_user",
    ]
    assert [p.field for p in problems] == ["tools"] * len(missing)
    assert all(p.severity.value == "warning" for p in problems)
    for name, problem in zip(missing, problems, strict=True):
        assert f"'{name}'" in problem.message
        if name not in ("Task", "Agent"):
            deputy = CLAUDE_CODE_TOOLS[name]
            assert f"this host has no {deputy!r} tool, so {name} was dropped" in problem.message


def test_a_plugin_tool_of_the_mapped_name_is_honoured(tmp_path: Path) -> None:
    registry = dict(host_tool_registry(working_dir=tmp_path))
    bash = tools_file(tmp_path)[0]  # any Tool object, registered under the mapped name
    registry["bash"] = bash
    problems: list[DefinitionProblem] = []
    d = read_md(_file(tmp_path, "tools: Bash\n"), registry, on_warning=problems.append)
    assert d.tools == (bash,)
    assert problems == []


def test_other_unknown_names_are_still_errors(tmp_path: Path) -> None:
    registry = host_tool_registry(working_dir=tmp_path)
    with pytest.raises(DefinitionFileError, match="unknown tool 'Frobnicate'"):
        read_md(_file(tmp_path, "tools: Read, Frobnicate\n"), registry)


def test_disallowed_claude_code_names_deny_the_mapped_tool(tmp_path: Path) -> None:
    registry = host_tool_registry(working_dir=tmp_path)
    d = read_md(_file(tmp_path, "disallowedTools: Write, Edit\n"), registry)
    assert d.disallowed_tools == ("write", "write_file", "edit", "edit_file")


def test_a_file_without_tools_gets_every_host_tool_but_ask_user(tmp_path: Path) -> None:
    registry = host_tool_registry(working_dir=tmp_path)
    assert "ask_user" in registry
    d = read_md(_file(tmp_path, ""), registry)
    names = {t.name for t in d.tools}
    # Asking a person is for agents that name AskUserQuestion (or ask_user).
    assert names == set(registry) - {"ask_user"}
