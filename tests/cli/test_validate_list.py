"""``validate`` and ``list``: what ``run`` checks, every problem, warnings apart from errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from deputy_runtime._cli.definitions import (
    definitions_path_problem,
    host_skill_registry,
    host_tool_registry,
    import_plugin,
)
from deputy_runtime.cli import main
from deputy_runtime.errors import DeputyError

MIN = "version: 1\nname: reviewer\ndescription: Reviews text\nprompt: Read carefully\n"
COLON_MD = "---\nname: notes\ndescription: Use when: notes are due\n---\nWrite notes.\n"
PLUGIN = """
from deputy_runtime.tools._tool import Tool

def _search(query: str) -> str:
    return query

tools = [Tool("search_web", "Searches the web.", {"type": "object"}, _search)]
skills = {"house-style": "/srv/skills/house-style"}
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_validate_reports_every_problem_of_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "a.yaml"
    path.write_text(
        MIN.replace("version: 1", "version: 3") + "colour: red\ntools: [read_file, Read, Grep]\n"
    )
    status, out, err = run(capsys, "validate", str(path))
    assert status == 1
    lines = out.splitlines()
    assert [line.split(": ", 1)[0] for line in lines] == [
        f"{path}:5",
        f"{path}:1",
        f"{path}:6",
        f"{path}:6",
    ]
    assert "Unknown field 'colour'" in lines[0]
    assert "version must be the integer 1" in lines[1]
    assert "'Read' is not a registry key" in lines[2]
    assert (
        "the tools registry has: ask_user, bash, bash_output, edit_file, glob_files, "
        "grep_files, kill_shell, list_files" in lines[3]
    )
    assert err == "checked 1 file(s): 4 error(s)\n"


def test_markdown_problems_are_all_reported_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "a.md"
    path.write_text(
        "---\nname: a\ndescription: d\ntools: Read, Bash(git:*)\nmaxTurns: many\n"
        "permissionMode: ask\n---\nbody\n"
    )
    status, out, err = run(capsys, "validate", str(path))
    assert status == 1
    reasons = [line.split(": ", 1)[1] for line in out.splitlines()]
    # Read is Claude Code's name for read_file: no error for it.
    assert [r.split(" ")[0] for r in reasons] == ["permissionMode", "maxTurns", "tools:"]
    assert err == "checked 1 file(s): 3 error(s)\n"


def test_warnings_are_apart_from_errors_and_strict_makes_them_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "notes.md"
    path.write_text(COLON_MD)
    status, out, err = run(capsys, "validate", str(path))
    assert status == 0
    assert out.startswith(f"{path}:3: warning: the value of 'description' contains ': '")
    assert err == "checked 1 file(s): 1 warning(s)\n"
    status, strict_out, err = run(capsys, "validate", "--strict", str(path))
    assert status == 1
    assert strict_out == out.replace(": warning: ", ": ", 1)
    assert err == "checked 1 file(s): 1 error(s)\n"


def test_a_mistyped_provider_is_a_warning_with_the_closest_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.yaml").write_text(MIN + "model: anthropc/claude-sonnet-4-5\n")
    (tmp_path / "b.yaml").write_text(MIN.replace("reviewer", "other") + "model: claude-x\n")
    status, out, err = run(capsys, "validate", str(tmp_path))
    assert status == 0
    assert out == (
        f"{tmp_path / 'a.yaml'}:5: warning: model: unknown provider 'anthropc' in "
        "'anthropc/claude-sonnet-4-5'; did you mean 'anthropic'? registered providers: "
        "anthropic, ollama, openai, openai_compatible, scripted, test (a plugin can register "
        "more)\n"
    )
    assert err == "checked 2 file(s): 1 warning(s)\n"


def test_plugin_tools_and_skills_count_as_known(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plugin = tmp_path / "plugin.py"
    plugin.write_text(PLUGIN)
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "a.yaml").write_text(MIN + "tools: [search_web, read_file]\nskills: [house-style]\n")
    status, out, _ = run(capsys, "validate", str(agents))
    assert status == 1
    assert "'search_web' is not a registry key" in out
    status, out, err = run(capsys, "validate", "--plugin", str(plugin), str(agents))
    assert (status, out, err) == (0, "", "checked 1 file(s): no problems\n")
    status, out, _ = run(capsys, "list", "--plugin", str(plugin), str(agents))
    assert status == 0
    assert out.splitlines()[1].split()[:4] == ["reviewer", "inherit", "search_web,", "read_file"]


def test_a_plugin_that_fails_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.yaml").write_text(MIN)
    plugin = tmp_path / "bad_plugin.py"
    plugin.write_text("tools = 'read_file'\n")
    status, out, err = run(capsys, "validate", "--plugin", str(plugin), str(tmp_path))
    assert (status, out) == (2, "")
    assert "'tools' must be a sequence of Tool objects" in err
    status, _, err = run(capsys, "list", "--plugin", str(tmp_path / "none.py"), str(tmp_path))
    assert status == 2
    assert f"--plugin {str(tmp_path / 'none.py')!r}: no such file" in err


@pytest.mark.parametrize("command", ["validate", "list"])
def test_missing_or_empty_paths_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    status, out, err = run(capsys, command, str(tmp_path / "nowhere"))
    assert (status, out) == (2, "")
    assert err == f"deputy-runtime {command}: {str(tmp_path / 'nowhere')!r} does not exist\n"
    (tmp_path / "README.txt").write_text("not a definition")
    status, out, err = run(capsys, command, str(tmp_path))
    assert (status, out) == (2, "")
    assert err == (
        f"deputy-runtime {command}: {str(tmp_path)!r} holds no definition files (*.yaml, "
        "*.yml or *.md at its top level; hidden files are skipped)\n"
    )


def test_list_shows_what_loads_then_the_bad_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.yaml").write_text(MIN)
    (tmp_path / "b.md").write_text("---\nname: Reviewer\ndescription: d\n---\nbody\n")
    (tmp_path / "c.md").write_text("---\nname: c\ndescription: d\ntools: Lookup\n---\nbody\n")
    (tmp_path / "d.md").write_text(COLON_MD)
    status, out, err = run(capsys, "list", str(tmp_path))
    assert (status, err) == (1, "")
    table, bad = out.split("\n\n")
    assert [row.split()[0] for row in table.splitlines()] == ["NAME", "notes"]
    assert bad.splitlines() == [
        "3 file(s) did not load:",
        f"  {tmp_path / 'c.md'}:4: unknown tool 'Lookup' in tools; known names (case-sensitive): "
        "ask_user, bash, bash_output, edit_file, glob_files, grep_files, kill_shell, "
        "list_files, multi_edit, notebook_edit, read_file, todo_write, web_fetch, web_search, "
        "write_file",
        f"  {tmp_path / 'a.yaml'}: duplicate agent name 'reviewer': also defined by b.md in "
        "the same directory; names must be unique after lowercasing, so none of these files "
        "was loaded",
        f"  {tmp_path / 'b.md'}: duplicate agent name 'reviewer': also defined by a.yaml in "
        "the same directory; names must be unique after lowercasing, so none of these files "
        "was loaded",
    ]


def test_the_shared_checks_for_run(tmp_path: Path) -> None:
    assert definitions_path_problem(tmp_path / "x") == f"{str(tmp_path / 'x')!r} does not exist"
    assert "holds no definition files" in str(definitions_path_problem(tmp_path))
    (tmp_path / "a.md").write_text(COLON_MD)
    assert definitions_path_problem(tmp_path) is None
    assert definitions_path_problem(tmp_path / "a.md") is None
    plugin = tmp_path / "plugin.py"
    plugin.write_text(PLUGIN)
    module = import_plugin(str(plugin))
    registry = host_tool_registry([module], tmp_path)
    assert sorted(registry) == [
        "ask_user", "bash", "bash_output", "edit_file", "glob_files", "grep_files", "kill_shell",
        "list_files", "multi_edit", "notebook_edit", "read_file", "search_web", "todo_write",
        "web_fetch", "web_search", "write_file",
    ]  # fmt: skip
    assert host_skill_registry([module]) == {"house-style": "/srv/skills/house-style"}
    with pytest.raises(DeputyError, match="a tool named 'search_web' is already registered"):
        host_tool_registry([module, module], tmp_path)


def test_a_plugins_own_shell_tools_replace_the_command_lines(tmp_path: Path) -> None:
    plugin = tmp_path / "shell_plugin.py"
    plugin.write_text(
        "from deputy_runtime.tools import BashSandbox, tools_bash\n"
        "tools = tools_bash('.', sandbox=BashSandbox.NONE).tools\n"
    )
    module = import_plugin(str(plugin))
    registry = host_tool_registry([module], tmp_path)
    assert registry["bash"] is module.tools[0]
    assert registry["kill_shell"] is module.tools[2]
