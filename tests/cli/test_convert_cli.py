"""``deputy-runtime convert IN OUT``: YAML <-> markdown, lossless or a clear refusal."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from deputy_runtime.cli import main
from deputy_runtime.definitions import (
    agent_definition,
    agent_definition_from_markdown,
    agent_definition_read,
    agent_definition_write,
)
from deputy_runtime.skills import Skill
from deputy_runtime.tools import Tool

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "definitions" / "corpus" / "valid"


def _tool(name: str) -> Tool:
    return Tool(name, f"The {name} tool.", {"type": "object"}, lambda: name)


TOOLS = {name: _tool(name) for name in ("Read", "Write", "Edit", "Bash", "Grep", "Glob", "read")}
TOOLS |= {name: _tool(name) for name in ("grep", "WebFetch", "MultiEdit", "TodoWrite")}
SKILLS: dict[str, Skill | str] = {
    "api-style": Skill("api-style", "House API style.", "Use nouns."),
    "sql-review": "/srv/skills/sql-review",
}


def _convert(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    status = main(["convert", *map(str, args)])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize(
    "name",
    ["code-reviewer.md", "api-designer.md", "chart-reviewer.md", "sql-expert.md", "triage-lead.md"],
)
def test_markdown_to_yaml_keeps_every_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    out = tmp_path / "agent.yaml"
    status, stdout, err = _convert(capsys, CORPUS / name, out)
    assert (status, err) == (0, "")
    assert stdout == f"wrote {out}\n"
    from_md = agent_definition_from_markdown(CORPUS / name, TOOLS, SKILLS)
    assert agent_definition_read(out, TOOLS, SKILLS) == from_md


def test_yaml_to_markdown_to_yaml_is_byte_identical(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    definition = agent_definition(
        "planner",
        "Plans work. Use first.",
        "You plan.\n\n- step one\n- step two",
        tools=[TOOLS["Read"], TOOLS["Grep"]],
        model="openai/gpt-4.1-mini",
        skills=[SKILLS["api-style"]],
        disallowed_tools=["bash"],
        mcp_servers=[],
        initial_prompt="yes",
        max_requests=0,
        permission_mode="readonly",
        params={"temperature": 0.0, "stop": ["###"]},
    )
    first = agent_definition_write(definition, tmp_path / "a.yaml", TOOLS, SKILLS)
    assert _convert(capsys, first, tmp_path / "a.md")[0] == 0
    assert agent_definition_from_markdown(tmp_path / "a.md", TOOLS, SKILLS) == definition
    assert _convert(capsys, tmp_path / "a.md", tmp_path / "b.yml")[0] == 0
    assert (tmp_path / "b.yml").read_bytes() == first.read_bytes()


def test_markdown_without_tools_cannot_become_yaml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "a.md"
    source.write_text("---\nname: a\ndescription: d\n---\nbody\n")
    status, stdout, err = _convert(capsys, source, tmp_path / "a.yaml")
    assert status == 1
    assert stdout == ""
    assert f"{source}:1: tools cannot be carried over" in err
    assert "'tools: []'" in err
    assert os.listdir(tmp_path) == ["a.md"]


def test_yaml_memory_cannot_become_markdown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    definition = agent_definition("a", "d", "p", memory=["The user prefers short answers."])
    source = agent_definition_write(definition, tmp_path / "a.yaml")
    status, _, err = _convert(capsys, source, tmp_path / "a.md")
    assert status == 1
    assert f"{tmp_path / 'a.md'}: memory cannot be written to a markdown agent file" in err
    assert sorted(os.listdir(tmp_path)) == ["a.yaml"]


def test_ignored_claude_code_keys_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = _convert(capsys, CORPUS / "migration-planner.md", tmp_path / "m.yaml")
    assert status == 0
    assert "not carried over: isolation, memory, background, hooks" in err
    # effort is carried over as the reasoning-effort model parameter.
    assert "reasoning_effort: high" in (tmp_path / "m.yaml").read_text()


def test_invalid_source_is_reported_with_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "bad.md"
    source.write_text("---\nname: bad\ndescription: d\npermissionMode: ask\ntools: []\n---\nb\n")
    status, _, err = _convert(capsys, source, tmp_path / "bad.yaml")
    assert status == 1
    assert f"{source}:4: permissionMode 'ask' has no deputy equivalent" in err
    yaml_source = tmp_path / "bad2.yaml"
    yaml_source.write_text("version: 1\nname: x\n")
    status, _, err = _convert(capsys, yaml_source, tmp_path / "x.md")
    assert status == 1
    assert str(yaml_source) in err


def test_unknown_extension(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = _convert(capsys, CORPUS / "debugger.md", tmp_path / "debugger.txt")
    assert status == 2
    assert "cannot tell the format from the extension '.txt'" in err


def test_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "OUT.MD"
    out.write_bytes(b"keep me")
    status, _, err = _convert(capsys, CORPUS / "code-reviewer.md", out)
    assert status == 1
    assert "already exists" in err
    assert out.read_bytes() == b"keep me"
    assert _convert(capsys, CORPUS / "code-reviewer.md", out, "--overwrite")[0] == 0
    assert agent_definition_from_markdown(out, TOOLS) == agent_definition_from_markdown(
        CORPUS / "code-reviewer.md", TOOLS
    )


def test_markdown_to_markdown_canonicalises(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "docs-writer.md"
    shutil.copy(CORPUS / "docs-writer.md", source)  # BOM + CRLF
    assert _convert(capsys, source, tmp_path / "clean.md")[0] == 0
    data = (tmp_path / "clean.md").read_bytes()
    assert not data.startswith(b"\xef\xbb\xbf")
    assert b"\r" not in data
    assert data.startswith(b"---\nname: docs-writer\n")


@pytest.mark.slow
def test_real_command_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "deputy_runtime",
            "convert",
            str(CORPUS / "test-runner.md"),
            str(tmp_path / "test-runner.yaml"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert agent_definition_read(tmp_path / "test-runner.yaml", TOOLS) == (
        agent_definition_from_markdown(CORPUS / "test-runner.md", TOOLS)
    )


def test_existing_out_names_the_command_line_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for out in (tmp_path / "out.yaml", tmp_path / "out.md"):
        out.write_bytes(b"keep me")
        status, stdout, err = _convert(capsys, CORPUS / "code-reviewer.md", out)
        assert (status, stdout) == (1, "")
        assert f"{out}: File already exists; pass --overwrite to replace it" in err
        assert "overwrite=True" not in err
        assert out.read_bytes() == b"keep me"


def test_every_field_markdown_cannot_carry_is_named_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    definition = agent_definition(
        "a", "d" * 1030, "\n".join(["line"] * 1200), memory=["Prefers short answers."]
    )
    source = agent_definition_write(definition, tmp_path / "a.yaml")
    status, stdout, err = _convert(capsys, source, tmp_path / "a.md")
    assert (status, stdout) == (1, "")
    lines = err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        f"deputy-runtime convert: {tmp_path / 'a.md'}: 3 fields cannot be written to a "
        "markdown agent file (description, prompt, memory): "
    )
    for part in ("1030 characters", "1200 lines", "memory cannot be written"):
        assert part in lines[0], part
    assert sorted(os.listdir(tmp_path)) == ["a.yaml"]


def _long_agent(path: Path, body_lines: int, description: str = "Helps") -> Path:
    body = "\n".join(f"Step {i}." for i in range(1, body_lines + 1))
    path.write_text(f"---\nname: long\ndescription: {description}\ntools: [Read]\n---\n{body}\n")
    return path


def test_long_body_is_converted_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _long_agent(tmp_path / "long.md", 1500)
    out = tmp_path / "out.yaml"
    status, stdout, err = _convert(capsys, source, out)
    assert (status, stdout) == (0, f"wrote {out}\n")
    lines = err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        f"deputy-runtime convert: warning: {source}:6: the body has 1500 lines; the markdown "
        "reading rules read at most 1000, so the converted prompt was cut at 1000 lines"
    )
    assert "shorten the body to at most 1000 lines" in lines[0]
    prompt = agent_definition_read(out, TOOLS).prompt
    seen: list[object] = []
    assert prompt == agent_definition_from_markdown(source, TOOLS, on_warning=seen.append).prompt
    assert len(seen) == 1  # the reader's own warning about the cut body
    assert "Step 1000." in prompt
    assert "Step 1001." not in prompt
    assert "[Instructions truncated after 1000 lines." in prompt


def test_body_of_exactly_1000_lines_converts_silently(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _long_agent(tmp_path / "long.md", 1000)
    status, _, err = _convert(capsys, source, tmp_path / "out.yaml")
    assert (status, err) == (0, "")
    assert agent_definition_read(tmp_path / "out.yaml", TOOLS).prompt.endswith("Step 1000.")


def test_long_description_is_converted_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _long_agent(tmp_path / "wide.md", 3, description="d" * 1100)
    status, _, err = _convert(capsys, source, tmp_path / "out.yaml")
    assert status == 0
    assert err.startswith(
        f"deputy-runtime convert: warning: {source}:3: the description has 1100 characters; "
        "the markdown reading rules keep only the first 1024"
    )
    assert agent_definition_read(tmp_path / "out.yaml", TOOLS).description == "d" * 1024


def test_long_body_to_markdown_warns_before_the_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The cut prompt (1000 lines plus the reader's note) no longer fits a markdown body;
    # the warning explains where the extra lines came from.
    source = _long_agent(tmp_path / "long.md", 1200)
    status, _, err = _convert(capsys, source, tmp_path / "out.md")
    assert status == 1
    warning, error = err.splitlines()
    assert warning.startswith(f"deputy-runtime convert: warning: {source}:6: the body has 1200")
    assert "prompt cannot be written to markdown: it has 1002 lines" in error
    assert sorted(os.listdir(tmp_path)) == ["long.md"]
