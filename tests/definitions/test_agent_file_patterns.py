"""Agent files as people publish them: real ones and ones written in the same patterns.

``tests/fixtures/agent-files/`` holds real Claude Code agent files copied unchanged from
public repositories (see its README.md and the LICENSE beside each); ``agent_patterns/``
holds files written here in the same patterns. Every file Claude Code loads is accepted,
with exactly the warnings listed; every genuinely malformed file is rejected at the line
listed with a message that says how to fix it; each accepted file round-trips markdown ->
YAML -> markdown.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deputy_runtime.definitions import (
    AgentDefinition,
    DefinitionProblem,
    DefinitionWarning,
    Severity,
    agent_definition_from_markdown,
    agent_definition_read,
    agent_definition_to_markdown,
    agent_definition_write,
    collect_agent_definitions,
)
from deputy_runtime.errors import DefinitionFileError
from deputy_runtime.tools import Tool
from tests.definitions._markdown_helpers import make_tool

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "agent-files"
OWN = Path(__file__).parent / "agent_patterns"

# Claude Code's built-in tool names as a host would register them (Task/Agent left out:
# deputy subagents do not start subagents).
CLAUDE_TOOLS = (
    *("Read", "Write", "Edit", "MultiEdit", "Bash", "Grep", "Glob", "LS", "WebFetch"),
    *("WebSearch", "TodoWrite", "NotebookEdit", "TaskList", "TaskGet", "TaskUpdate"),
    "SendMessage",
)

SUBAGENTS = "lets this agent start subagents"
# Claude Code keys the runtime does not honour: loaded with a warning naming them.
# file name -> ("accept", [(line, part of each warning), ...])
#            | ("reject", line, part of the reason, part of the fix)
EXPECTED: dict[str, tuple[object, ...]] = {
    "actix-expert.md": ("accept", []),
    "deployment-engineer.md": ("accept", []),
    "ui-visual-validator.md": ("accept", []),
    "team-reviewer.md": ("accept", []),
    "growth-loops.md": ("accept", [(3, "the value of 'description' contains ': ' without quotes")]),
    "patch-generator.md": (
        "accept",
        [(7, f"'Agent(claude-security:explore)' {SUBAGENTS}")],
    ),
    "agent-creator.md": (
        "accept",
        [(3, "the description has 1,170 characters; only the first 1,024 are kept")],
    ),
    "product-manager.md": ("accept", [(4, f"'Task' {SUBAGENTS}")]),
    "sqs-expert.md": (
        "reject",
        1,
        "no YAML frontmatter",
        "remove the leading blank line and the indentation before '---'",
    ),
    "powershell-5.1-expert.md": (
        "reject",
        2,
        "'powershell-5.1-expert' is not a valid agent name",
        "(e.g. 'powershell-5-1-expert')",
    ),
    # Written here in the same patterns.
    "release-notes.md": ("accept", [(3, "the value of 'description' contains ': '")]),
    "fix-coordinator.md": (
        "accept",
        [
            (7, f"'Agent(fix-explorer, fix-verifier)' {SUBAGENTS}"),
            (7, f"'Task(fix-reviewer)' {SUBAGENTS}"),
        ],
    ),
    "issue-triager.md": (
        "accept",
        [(5, "'Bash(gh issue close:*)' denies Bash only for arguments matching")],
    ),
    "billing-reviewer.md": (
        "accept",
        [(3, "may include routing examples (such as <example> blocks)")],
    ),
    "style-checker.md": ("accept", []),
    "api-v1.2-helper.md": ("reject", 2, "is not a valid agent name", "(e.g. 'api-v1-2-helper')"),
    "blank-first.md": ("reject", 1, "no YAML frontmatter", "remove the leading blank line:"),
    "indented.md": ("reject", 1, "no YAML frontmatter", "remove the indentation before '---'"),
    "git-only.md": (
        "reject",
        4,
        "'Bash(git log:*)' grants Bash only for arguments matching 'git log:*'",
        "Name the tool (Bash) and let the host's permissions or hooks decide",
    ),
    "every-server.md": ("reject", 4, "'mcp__*' is a wildcard pattern", "only 'mcp__<server>'"),
    "hex-turns.md": (
        "reject",
        4,
        "'0x20' could not be read as !!int (hexadecimal notation is not accepted)",
        "expected a plain decimal whole number",
    ),
    "tabbed.md": ("reject", 3, "mapping values are not allowed", "put it in double quotes"),
}

FILES = sorted([*REAL.rglob("*.md"), *OWN.rglob("*.md")], key=lambda path: (path.name, str(path)))
FILES = [path for path in FILES if path.name != "README.md"]


def registry() -> dict[str, Tool]:
    return {name: make_tool(name) for name in CLAUDE_TOOLS}


def read(path: Path, tools: dict[str, Tool]) -> tuple[AgentDefinition, list[DefinitionProblem]]:
    warnings: list[DefinitionProblem] = []
    definition = agent_definition_from_markdown(path, tools, on_warning=warnings.append)
    return definition, warnings


def test_every_file_has_an_expectation() -> None:
    assert sorted(path.name for path in FILES) == sorted(EXPECTED)
    assert len([p for p in FILES if p.is_relative_to(REAL)]) == 10


@pytest.mark.parametrize("path", FILES, ids=[path.name for path in FILES])
def test_claude_code_files_load_and_malformed_ones_say_how_to_fix(path: Path) -> None:
    expected = EXPECTED[path.name]
    if expected[0] == "reject":
        _, line, reason, fix = expected
        with pytest.raises(DefinitionFileError) as info:
            read(path, registry())
        assert (info.value.path, info.value.line) == (path, line)
        assert str(reason) in info.value.reason
        assert str(fix) in info.value.reason
        return
    definition, warnings = read(path, registry())
    wanted = expected[1]
    assert isinstance(wanted, list)
    assert len(warnings) == len(wanted), [w.message for w in warnings]
    for problem, (line, part) in zip(warnings, wanted, strict=True):
        assert problem.severity is Severity.WARNING
        assert (problem.path, problem.line) == (path, line)
        assert part in problem.message, problem.message
    assert definition.name == path.stem


@pytest.mark.parametrize(
    "path",
    [p for p in FILES if EXPECTED[p.name][0] == "accept"],
    ids=[p.name for p in FILES if EXPECTED[p.name][0] == "accept"],
)
def test_accepted_file_round_trips_markdown_yaml_markdown(path: Path, tmp_path: Path) -> None:
    tools = registry()
    original, _ = read(path, tools)
    plain = original.replace(color=None)  # the YAML format has no colour
    agent_definition_write(plain, tmp_path / "a.yaml", tools)
    from_yaml = agent_definition_read(tmp_path / "a.yaml", tools)
    assert from_yaml == plain
    agent_definition_to_markdown(from_yaml.replace(color=original.color), tmp_path / "a.md", tools)
    again, warnings = read(tmp_path / "a.md", tools)
    assert again == original
    assert warnings == []  # what the reader accepted with caveats is written cleanly


def test_details_of_the_lenient_readings() -> None:
    tools = registry()
    growth, _ = read(REAL.glob("**/growth-loops.md").__next__(), tools)
    assert growth.description.endswith(
        "Triggers on: 'growth loop', 'flywheel', 'viral loop', "
        "'PLG growth', 'product-led growth', 'growth mechanics', "
        "'how do we grow', 'word of mouth'."
    )
    manager, _ = read(next(REAL.glob("**/product-manager.md")), tools)
    assert manager.mcp_tools == (
        "mcp__context7__resolve-library-id",
        "mcp__context7__get-library-docs",
        "mcp__sequential-thinking__sequentialthinking",
    )
    assert "Task" not in [tool.name for tool in manager.tools]
    creator, _ = read(next(REAL.glob("**/agent-creator.md")), tools)
    assert len(creator.description) <= 1024
    assert creator.description == creator.description.rstrip()
    triager, _ = read(OWN / "accepted" / "issue-triager.md", tools)
    assert triager.mcp_tools == (
        "mcp__github__search_issues",
        "mcp__github__add_labels",
        "mcp__linear",
        "mcp__slack__*",
    )
    # A denied pattern denies the whole tool: narrower than asked, never wider.
    assert triager.disallowed_tools == ("mcp__github__close_issue", "bash")
    coordinator, _ = read(OWN / "accepted" / "fix-coordinator.md", tools)
    assert [tool.name for tool in coordinator.tools] == ["Read", "Edit", "Grep"]


def test_without_a_callback_warnings_are_python_warnings() -> None:
    path, tools = OWN / "accepted" / "release-notes.md", registry()
    with pytest.warns(DefinitionWarning, match=r"release-notes.md:3: warning: the value of"):
        definition = agent_definition_from_markdown(path, tools)
    # Warnings are not part of the value: the same file read twice gives equal definitions.
    assert definition == read(path, tools)[0]


def test_collect_loads_what_loads_and_reports_every_bad_file(tmp_path: Path) -> None:
    for path in FILES:
        (tmp_path / path.name).write_bytes(path.read_bytes())
    found = collect_agent_definitions(tmp_path, registry(), markdown=True)
    accepted = sorted(Path(n).stem for n, e in EXPECTED.items() if e[0] == "accept")
    rejected = sorted(n for n, e in EXPECTED.items() if e[0] == "reject")
    assert sorted(found.definitions) == accepted
    assert sorted({p.path.name for p in found.errors}) == rejected
    # Every problem of a file, not only the first: git-only.md has two patterns.
    assert [p.line for p in found.errors if p.path.name == "git-only.md"] == [4, 4]
    assert found.files == len(FILES)
    assert {found.sources[name].name for name in accepted} == {f"{n}.md" for n in accepted}
    assert all(w.path.name in {f"{n}.md" for n in accepted} for w in found.warnings)


def test_discovery_hands_warnings_to_the_callback_once_every_file_loaded(tmp_path: Path) -> None:
    from deputy_runtime.definitions import agent_definitions, claude_agent_definitions

    agents = tmp_path / ".claude" / "agents"
    agents.mkdir(parents=True)
    for name in ("release-notes.md", "fix-coordinator.md"):
        (agents / name).write_bytes((OWN / "accepted" / name).read_bytes())
    tools, seen = registry(), list[DefinitionProblem]()
    found = claude_agent_definitions(tmp_path, tools, on_warning=seen.append)
    assert sorted(found) == ["fix-coordinator", "release-notes"]
    assert [(p.path.name, p.line) for p in seen] == [
        ("fix-coordinator.md", 7),
        ("fix-coordinator.md", 7),
        ("release-notes.md", 3),
    ]
    (agents / "zz-broken.md").write_text("no frontmatter\n")
    seen.clear()
    with pytest.raises(DefinitionFileError):
        agent_definitions(agents, tools, markdown=True, on_warning=seen.append)
    assert seen == []  # all or nothing: no warnings for a discovery that failed
