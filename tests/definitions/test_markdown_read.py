"""Reading markdown agent files: every AgentLane rule, with files written byte for byte."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from deputy_runtime.definitions import DefinitionProblem, DefinitionWarning
from deputy_runtime.definitions import agent_definition_from_markdown as read_md
from deputy_runtime.errors import DefinitionFileError
from tests.definitions._markdown_helpers import (
    agent_file,
    make_tool,
    skill_registry,
    tool_registry,
    write_bytes,
)

MINIMAL = b"---\nname: reviewer\ndescription: Reviews code.\n---\nYou review code.\n"


def test_minimal_file(tmp_path: Path) -> None:
    d = read_md(write_bytes(tmp_path, MINIMAL))
    assert (d.name, d.description, d.prompt, d.model) == (
        "reviewer",
        "Reviews code.",
        "You review code.",
        "inherit",
    )
    assert d.tools == ()
    assert d.skills == ()
    assert d.disallowed_tools is None
    assert d.mcp_servers is None
    assert d.memory is None
    assert d.permission_mode is None
    assert d.max_requests is None
    assert d.params is None


# --- line endings, BOM, exotic separators ---------------------------------------------


@pytest.mark.parametrize("eol", [b"\r\n", b"\r", b"\n"], ids=["crlf", "cr", "lf"])
def test_line_endings(tmp_path: Path, eol: bytes) -> None:
    data = eol.join([b"---", b"name: a", b"description: d", b"---", b"one", b"", b"two", b""])
    d = read_md(write_bytes(tmp_path, data))
    assert d.prompt == "one\n\ntwo"
    assert d.description == "d"


def test_bom_is_stripped(tmp_path: Path) -> None:
    # Deliberate difference: AgentLane treats a BOM-prefixed file as "no frontmatter".
    d = read_md(write_bytes(tmp_path, b"\xef\xbb\xbf" + MINIMAL))
    assert d.name == "reviewer"
    assert d.prompt == "You review code."


def test_exotic_line_separators_split_lines_and_become_newlines(tmp_path: Path) -> None:
    text = "---\u2028name: a\x0bdescription: d\u2029---\x85A\u2028B\x0cC\x1cD\x1dE\x1eF"
    d = read_md(agent_file(tmp_path, text))
    assert d.name == "a"
    assert d.description == "d"
    assert d.prompt == "A\nB\nC\nD\nE\nF"


def test_invalid_utf8_is_a_file_error_with_line(tmp_path: Path) -> None:
    path = write_bytes(tmp_path, b"---\nname: a\ndescription: caf\xe9\n---\nbody\n")
    with pytest.raises(DefinitionFileError) as info:
        read_md(path)
    assert info.value.path == path
    assert info.value.line == 3
    assert "UTF-8" in str(info.value)


# --- fences -------------------------------------------------------------------------------


@pytest.mark.parametrize("opening", [b"--- ", b"---\t", b"---  \t "], ids=["space", "tab", "mixed"])
def test_opening_fence_may_have_trailing_whitespace(tmp_path: Path, opening: bytes) -> None:
    d = read_md(write_bytes(tmp_path, opening + b"\nname: a\ndescription: d\n---\nbody"))
    assert d.name == "a"


@pytest.mark.parametrize(
    "closing", [b"  ---", b"---  ", b"\t---\t"], ids=["indented", "trailing", "tabs"]
)
def test_closing_fence_may_be_indented(tmp_path: Path, closing: bytes) -> None:
    d = read_md(write_bytes(tmp_path, b"---\nname: a\ndescription: d\n" + closing + b"\nbody"))
    assert d.prompt == "body"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", "the file is empty"),
        (b"\n---\nname: a\n---\nbody", "remove the leading blank line"),
        (b" ---\nname: a\n---\nbody", "remove the indentation before '---'"),
        (b"----\nname: a\n---\nbody", "'----'"),
        (b"---yaml\nname: a\n---\nbody", "'---yaml'"),
        (b"# Reviewer agent\n\nJust notes.\n", "'# Reviewer agent'"),
    ],
    ids=["empty", "blank-line", "leading-space", "four-dashes", "suffix", "readme"],
)
def test_no_opening_fence(tmp_path: Path, data: bytes, expected: str) -> None:
    with pytest.raises(DefinitionFileError) as info:
        read_md(write_bytes(tmp_path, data))
    assert str(info.value.reason).startswith("no YAML frontmatter")
    assert expected in str(info.value)


@pytest.mark.parametrize(
    "data",
    [
        b"---\nname: a\ndescription: d\nbody without a closing fence\n",
        b"---\nname: a\ndescription: d\n--- # not a fence\nbody\n",
        b"---\n",
        b"---",
    ],
    ids=["no-close", "comment-after-dashes", "only-fence-newline", "only-fence"],
)
def test_unterminated_fence(tmp_path: Path, data: bytes) -> None:
    with pytest.raises(DefinitionFileError, match="never closed") as info:
        read_md(write_bytes(tmp_path, data))
    assert info.value.line == 1
    assert info.value.reason.startswith("no YAML frontmatter")


def test_dashes_inside_a_block_scalar_still_close_the_frontmatter(tmp_path: Path) -> None:
    data = b"---\nname: a\ndescription: |\n  first\n  ---\n  more\n---\nbody\n"
    d = read_md(write_bytes(tmp_path, data))
    assert d.description == "first"
    assert d.prompt == "more\n---\nbody"


def test_yaml_document_end_marker_is_yaml_not_a_fence(tmp_path: Path) -> None:
    d = read_md(write_bytes(tmp_path, b"---\nname: a\ndescription: d\n...\n---\nbody"))
    assert d.name == "a"
    assert d.prompt == "body"


def test_dashes_in_the_body_are_plain_text(tmp_path: Path) -> None:
    d = read_md(write_bytes(tmp_path, b"---\nname: a\ndescription: d\n---\nx\n---\ny\n---\n"))
    assert d.prompt == "x\n---\ny\n---"


# --- YAML --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "frontmatter",
    [b"", b"# only a comment\n", b"# one\n\n# two\n"],
    ids=["empty", "comment", "comments"],
)
def test_empty_and_comment_only_frontmatter(tmp_path: Path, frontmatter: bytes) -> None:
    with pytest.raises(DefinitionFileError, match="frontmatter is empty"):
        read_md(write_bytes(tmp_path, b"---\n" + frontmatter + b"---\nbody\n"))


def test_empty_mapping_frontmatter_still_needs_a_description(tmp_path: Path) -> None:
    with pytest.raises(DefinitionFileError, match="description is required"):
        read_md(write_bytes(tmp_path, b"---\n{}\n---\nbody\n"))


@pytest.mark.parametrize(
    ("frontmatter", "kind"), [(b"- a\n- b\n", "list"), (b"just text\n", "str"), (b"42\n", "int")]
)
def test_frontmatter_must_be_a_mapping(tmp_path: Path, frontmatter: bytes, kind: str) -> None:
    with pytest.raises(DefinitionFileError, match=f"must be a YAML mapping.*{kind}") as info:
        read_md(write_bytes(tmp_path, b"---\n" + frontmatter + b"---\nbody\n"))
    assert info.value.line == 2


def test_tab_indentation_is_an_error_with_line_and_column(tmp_path: Path) -> None:
    path = write_bytes(tmp_path, b"---\nname: a\n\tdescription: d\n---\nbody\n")
    with pytest.raises(DefinitionFileError, match="spaces, not tabs") as info:
        read_md(path)
    assert (info.value.line, info.value.column) == (3, 1)
    assert str(info.value).startswith(f"{path}:3: invalid YAML")


def test_tabs_inside_values_are_fine(tmp_path: Path) -> None:
    d = read_md(write_bytes(tmp_path, b'---\nname: a\ndescription: "x\\ty"\n---\n\tcode\n'))
    assert d.description == "x\ty"
    assert d.prompt == "code"


def test_syntax_error_line(tmp_path: Path) -> None:
    path = write_bytes(tmp_path, b"---\nname: a\ndescription: d\ntools: [Read\nmodel: x\n---\nb")
    with pytest.raises(DefinitionFileError, match="invalid YAML") as info:
        read_md(path, tool_registry())
    assert info.value.line == 5  # where libyaml notices the list was never closed


def test_duplicate_keys_last_wins(tmp_path: Path) -> None:
    d = read_md(write_bytes(tmp_path, b"---\nname: a\nname: b\ndescription: d\n---\nbody"))
    assert d.name == "b"


def test_aliases_are_rejected(tmp_path: Path) -> None:
    data = b"---\nname: a\ndescription: &d text\ninitialPrompt: *d\n---\nbody"
    with pytest.raises(DefinitionFileError, match="aliases") as info:
        read_md(write_bytes(tmp_path, data))
    assert info.value.line == 4


def test_alias_bomb_is_rejected_quickly(tmp_path: Path) -> None:
    lines = ["---", "a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 12)]
    lines += ["name: *a11", "description: d", "---", "body"]
    with pytest.raises(DefinitionFileError, match="aliases"):
        read_md(agent_file(tmp_path, "\n".join(lines)))


def test_python_tags_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    data = (
        "---\nname: a\ndescription: d\n"
        f"model: !!python/object/apply:os.system ['touch {marker}']\n---\nbody"
    )
    with pytest.raises(DefinitionFileError, match="invalid YAML"):
        read_md(agent_file(tmp_path, data))
    assert not marker.exists()


def test_bad_timestamp_is_a_file_error(tmp_path: Path) -> None:
    with pytest.raises(DefinitionFileError, match="invalid YAML"):
        read_md(write_bytes(tmp_path, b"---\nname: a\ndescription: 2024-13-45\n---\nbody"))


def test_yaml_11_typing_and_str_coercion(tmp_path: Path) -> None:
    data = b"---\nname: yes\ndescription: 2024-01-02\nmodel: 1.5\n---\nbody"
    d = read_md(write_bytes(tmp_path, data))
    assert (d.name, d.description, d.model) == ("true", "2024-01-02", "1.5")


# --- name --------------------------------------------------------------------------------


def test_name_is_trimmed_and_lowercased(tmp_path: Path) -> None:
    d = read_md(write_bytes(tmp_path, b"---\nname: '  Code-Reviewer '\ndescription: d\n---\nb"))
    assert d.name == "code-reviewer"


@pytest.mark.parametrize("header", [b"", b"name:\n", b"name: ''\n", b"name: '   '\n"])
def test_missing_name_falls_back_to_the_file_stem(tmp_path: Path, header: bytes) -> None:
    path = write_bytes(
        tmp_path, b"---\n" + header + b"description: d\n---\nb", "security-auditor.md"
    )
    assert read_md(path).name == "security-auditor"


def test_non_ascii_name_is_an_error_naming_the_line(tmp_path: Path) -> None:
    path = agent_file(tmp_path, "---\ndescription: d\nname: réviseur\n---\nb")
    with pytest.raises(DefinitionFileError, match="name: 'réviseur' is not a valid") as info:
        read_md(path)
    assert info.value.line == 3


def test_non_ascii_file_stem_fallback_is_explained(tmp_path: Path) -> None:
    path = agent_file(tmp_path, "---\ndescription: d\n---\nb", "prüfer.md")
    with pytest.raises(DefinitionFileError, match="file name 'prüfer' was used"):
        read_md(path)


def test_non_ascii_text_is_kept(tmp_path: Path) -> None:
    d = read_md(
        agent_file(tmp_path, "---\nname: a\ndescription: 日本語のレビュー 🚀\n---\nÄrztin\n")
    )
    assert d.description == "日本語のレビュー 🚀"
    assert d.prompt == "Ärztin"


# --- description and body truncation -------------------------------------------------------


@pytest.mark.parametrize(("size", "kept"), [(1023, 1023), (1024, 1024), (1025, 1024), (5000, 1024)])
def test_description_is_cut_at_1024_code_points(tmp_path: Path, size: int, kept: int) -> None:
    text = "é" * size  # two bytes each: the limit counts code points, not bytes
    warnings: list[DefinitionProblem] = []
    path = agent_file(tmp_path, f"---\nname: a\ndescription: {text}\n---\nb")
    d = read_md(path, on_warning=warnings.append)
    assert d.description == "é" * kept
    cut = [w.message for w in warnings if "only the first 1,024 are kept" in w.message]
    assert len(cut) == (size > kept)


def test_description_is_stripped_before_it_is_cut(tmp_path: Path) -> None:
    text = "    " + "x" * 1023 + " yyy   "
    path = agent_file(tmp_path, f"---\nname: a\ndescription: '{text}'\n---\nb")
    with pytest.warns(DefinitionWarning, match="the description has 1,027 characters"):
        d = read_md(path)
    # The whitespace a cut leaves at the end is stripped too, so the description can be
    # written back to markdown.
    assert d.description == "x" * 1023


def test_missing_or_blank_description_is_an_error(tmp_path: Path) -> None:
    for header in (b"", b"description:\n", b"description: '  '\n"):
        with pytest.raises(DefinitionFileError, match="description is required"):
            read_md(write_bytes(tmp_path, b"---\nname: a\n" + header + b"---\nbody"))


def _body_file(tmp_path: Path, body_lines: list[str]) -> Path:
    return agent_file(
        tmp_path, "---\nname: a\ndescription: d\n---\n" + "\n".join(body_lines) + "\n"
    )


@pytest.mark.parametrize("count", [999, 1000])
def test_body_of_at_most_1000_lines_is_kept(tmp_path: Path, count: int) -> None:
    lines = [f"line {i}" for i in range(1, count + 1)]
    assert read_md(_body_file(tmp_path, lines)).prompt == "\n".join(lines)


@pytest.mark.parametrize("count", [1001, 1500])
def test_longer_body_is_cut_with_a_pointer_naming_the_file(tmp_path: Path, count: int) -> None:
    lines = [f"line {i}" for i in range(1, count + 1)]
    path = _body_file(tmp_path, lines)
    with pytest.warns(DefinitionWarning, match=f"the body has {count} lines; only the first"):
        prompt = read_md(path).prompt
    out = prompt.splitlines()
    assert len(out) == 1002
    assert out[:1000] == lines[:1000]
    assert out[1000] == ""
    assert out[1001] == (
        f"[Instructions truncated after 1000 lines. Read the full agent definition at "
        f"{path.resolve()} for the rest.]"
    )


def test_blank_padding_is_stripped_before_lines_are_counted(tmp_path: Path) -> None:
    lines = ["", "", *[f"l{i}" for i in range(1000)], "", "   ", ""]
    assert read_md(_body_file(tmp_path, lines)).prompt.count("\n") == 999


def test_blank_lines_at_the_cut_disappear(tmp_path: Path) -> None:
    lines = [f"l{i}" for i in range(1, 990)] + [""] * 11 + ["after"] * 5
    with pytest.warns(DefinitionWarning, match="only the first 1000 are read"):
        out = read_md(_body_file(tmp_path, lines)).prompt.splitlines()
    assert out[:989] == lines[:989]
    assert out[989] == ""
    assert out[990].startswith("[Instructions")


def test_pointer_names_the_resolved_path_through_a_symlink(tmp_path: Path) -> None:
    real = _body_file(tmp_path, [f"l{i}" for i in range(1001)])
    link = tmp_path / "link.md"
    link.symlink_to(real)
    with pytest.warns(DefinitionWarning, match="link.md:5: warning: the body has 1001 lines"):
        assert f"at {real.resolve()} for the rest." in read_md(link).prompt


def test_empty_body_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DefinitionFileError, match="body is empty") as info:
        read_md(write_bytes(tmp_path, b"---\nname: a\ndescription: d\n---\n  \n\n"))
    assert info.value.line == 5


def test_body_indentation_of_first_line_is_lost(tmp_path: Path) -> None:
    d = read_md(write_bytes(tmp_path, b"---\nname: a\ndescription: d\n---\n\n    code\n  more\n"))
    assert d.prompt == "code\n  more"


# --- model and model_args -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "model"),
    [
        (b"", "inherit"),
        (b"model:\n", "inherit"),
        (b"model: ''\n", "inherit"),
        (b"model: INHERIT\n", "inherit"),
        (b"model: ' Inherit '\n", "inherit"),
        (b"model: sonnet\n", "sonnet"),
        (b"model: anthropic/claude-sonnet-4-5\n", "anthropic/claude-sonnet-4-5"),
    ],
)
def test_model(tmp_path: Path, line: bytes, model: str) -> None:
    d = read_md(write_bytes(tmp_path, b"---\nname: a\ndescription: d\n" + line + b"---\nb"))
    assert d.model == model


def test_model_args_become_params(tmp_path: Path) -> None:
    data = (
        b"---\nname: a\ndescription: d\n"
        b"model_args:\n  temperature: 0.2\n  1: x\n  stop: [a]\n---\nb"
    )
    d = read_md(write_bytes(tmp_path, data))
    assert d.params == {"temperature": 0.2, "1": "x", "stop": ("a",)}


@pytest.mark.parametrize(("value", "params"), [(b"{}", {}), (b"null", None)])
def test_model_args_empty_and_null(tmp_path: Path, value: bytes, params: object) -> None:
    d = read_md(
        write_bytes(tmp_path, b"---\nname: a\ndescription: d\nmodel_args: " + value + b"\n---\nb")
    )
    assert d.params == params


def test_model_args_of_the_wrong_type_is_an_error(tmp_path: Path) -> None:
    data = b"---\nname: a\ndescription: d\nmodel_args: temperature=0.2\n---\nb"
    with pytest.raises(DefinitionFileError, match="model_args must be a mapping") as info:
        read_md(write_bytes(tmp_path, data))
    assert info.value.line == 4


def test_invalid_param_value_names_key_and_field(tmp_path: Path) -> None:
    data = b"---\nname: a\ndescription: d\nmodel_args: {temperature: .inf}\n---\nb"
    with pytest.raises(DefinitionFileError, match=r"model_args \(params\):.*finite") as info:
        read_md(write_bytes(tmp_path, data))
    assert info.value.line == 4


# --- tools -------------------------------------------------------------------------------


def _tools_file(tmp_path: Path, tools_yaml: bytes) -> Path:
    return write_bytes(tmp_path, b"---\nname: a\ndescription: d\n" + tools_yaml + b"---\nbody")


@pytest.mark.parametrize(
    "tools_yaml",
    [
        b"tools: Read, Grep, Bash\n",
        b"tools: ' Read ,, Grep , Bash , '\n",
        b"tools: [Read, Grep, Bash]\n",
        b"tools:\n  - Read\n  - Grep\n  - Bash\n",
        b"tools: Read, Grep, Read, Bash, Grep\n",
        b"tools: [Read, Read, Grep, '', Bash]\n",
    ],
    ids=["comma", "comma-spaces-empties", "flow-list", "block-list", "comma-dupes", "list-dupes"],
)
def test_tools_list_or_comma_string(tmp_path: Path, tools_yaml: bytes) -> None:
    registry = tool_registry()
    d = read_md(_tools_file(tmp_path, tools_yaml), registry)
    assert d.tools == (registry["Read"], registry["Grep"], registry["Bash"])


def test_tools_absent_means_every_registry_tool(tmp_path: Path) -> None:
    registry = tool_registry()
    assert read_md(_tools_file(tmp_path, b""), registry).tools == tuple(registry.values())
    assert read_md(_tools_file(tmp_path, b"")).tools == ()  # no registry: nothing to inherit


@pytest.mark.parametrize("tools_yaml", [b"tools: []\n", b"tools: ''\n", b"tools: ' , ,'\n"])
def test_tools_empty_means_none(tmp_path: Path, tools_yaml: bytes) -> None:
    assert read_md(_tools_file(tmp_path, tools_yaml), tool_registry()).tools == ()


@pytest.mark.parametrize(
    ("tools_yaml", "what"),
    [
        (b"tools:\n", "an empty value (null)"),
        (b"tools: 42\n", "int 42"),
        (b"tools: {Read: true}\n", "a mapping"),
        (b"tools: true\n", "the boolean True"),
    ],
)
def test_tools_of_the_wrong_type_is_an_error(tmp_path: Path, tools_yaml: bytes, what: str) -> None:
    # Deliberate difference: AgentLane silently gives "no tools".
    with pytest.raises(DefinitionFileError, match="tools must be a list") as info:
        read_md(_tools_file(tmp_path, tools_yaml), tool_registry())
    assert what in str(info.value)
    assert info.value.line == 4


def test_unknown_tool_names_it_lists_known_ones_and_points_at_the_item(tmp_path: Path) -> None:
    path = _tools_file(tmp_path, b"tools:\n  - Read\n  - Read\n  - read_file\n")
    registry = {"Read": make_tool("Read"), "Grep": make_tool("Grep")}
    with pytest.raises(DefinitionFileError) as info:
        read_md(path, registry)
    assert "unknown tool 'read_file'" in str(info.value)
    assert "known names (case-sensitive): Grep, Read" in str(info.value)
    assert info.value.line == 7


def test_tool_names_are_case_sensitive_and_null_items_are_the_name_none(tmp_path: Path) -> None:
    with pytest.raises(DefinitionFileError, match="unknown tool 'bash'"):
        read_md(_tools_file(tmp_path, b"tools: Read, bash\n"), {"Read": make_tool("Read")})
    with pytest.raises(DefinitionFileError, match="unknown tool 'None'"):
        read_md(_tools_file(tmp_path, b"tools: [Read, null]\n"), {"Read": make_tool("Read")})


def test_unknown_tool_without_a_registry(tmp_path: Path) -> None:
    with pytest.raises(DefinitionFileError, match=r"none \(the tools registry is empty\)"):
        read_md(_tools_file(tmp_path, b"tools: lookup\n"))


def test_two_keys_for_one_tool_give_one_tool(tmp_path: Path) -> None:
    read_tool = make_tool("Read")
    d = read_md(
        _tools_file(tmp_path, b"tools: Read, read\n"), {"Read": read_tool, "read": read_tool}
    )
    assert d.tools == (read_tool,)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b"", None),
        (b"disallowedTools:\n", None),
        (b"disallowedTools: []\n", ()),
        (b"disallowedTools: ''\n", ()),
        # A Claude Code name denies itself and the deputy tool it maps to.
        (b"disallowedTools: Bash, Write, bash\n", ("bash", "write", "write_file")),
        (b"disallowedTools: [Write, ' Bash ']\n", ("write", "write_file", "bash")),
    ],
)
def test_disallowed_tools(tmp_path: Path, line: bytes, expected: object) -> None:
    d = read_md(_tools_file(tmp_path, line), tool_registry())
    assert d.disallowed_tools == expected
    assert len(d.tools) == len(tool_registry())  # removal happens when the agent is built


def test_disallowed_tools_wrong_type(tmp_path: Path) -> None:
    with pytest.raises(DefinitionFileError, match="disallowedTools must be a list"):
        read_md(_tools_file(tmp_path, b"disallowedTools: 3\n"))


# --- Claude Code keys ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "mode"),
    [
        (b"default", "standard"),
        (b"acceptEdits", "standard"),
        (b"plan", "plan"),
        (b"bypassPermissions", "full"),
        (b"dontAsk", "standard"),
        (b"auto", "standard"),
        (b"standard", "standard"),
        (b"readonly", "readonly"),
        (b"full", "full"),
        (b"' plan '", "plan"),
        (b"null", None),
    ],
)
def test_permission_modes(tmp_path: Path, value: bytes, mode: str | None) -> None:
    data = b"---\nname: a\ndescription: d\npermissionMode: " + value + b"\n---\nb"
    assert read_md(write_bytes(tmp_path, data)).permission_mode == mode


@pytest.mark.parametrize("value", [b"Plan", b"true", b"[plan]", b"ask"])
def test_permission_modes_without_equivalent(tmp_path: Path, value: bytes) -> None:
    data = b"---\nname: a\ndescription: d\n\npermissionMode: " + value + b"\n---\nb"
    with pytest.raises(
        DefinitionFileError, match="no deputy equivalent; use one of default"
    ) as info:
        read_md(write_bytes(tmp_path, data))
    assert info.value.line == 5


@pytest.mark.parametrize(
    ("value", "expected"), [(b"12", 12), (b"0", 0), (b"null", None), (b"2147483647", 2**31 - 1)]
)
def test_max_turns(tmp_path: Path, value: bytes, expected: int | None) -> None:
    data = b"---\nname: a\ndescription: d\nmaxTurns: " + value + b"\n---\nb"
    assert read_md(write_bytes(tmp_path, data)).max_requests == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (b"'12'", "maxTurns must be a whole number"),
        (b"12.0", "maxTurns must be a whole number"),
        (b"true", "maxTurns must be a whole number"),
        (b"-1", r"maxTurns \(max_requests\): expected a non-negative int"),
        (b"2147483648", r"maxTurns \(max_requests\)"),
    ],
)
def test_max_turns_invalid(tmp_path: Path, value: bytes, message: str) -> None:
    data = b"---\nname: a\ndescription: d\nmaxTurns: " + value + b"\n---\nb"
    with pytest.raises(DefinitionFileError, match=message) as info:
        read_md(write_bytes(tmp_path, data))
    assert info.value.line == 4


def test_skills_mcp_servers_and_initial_prompt(tmp_path: Path) -> None:
    data = (
        b"---\nname: a\ndescription: d\nskills: [api-style, sql-review]\n"
        b"mcpServers: github, slack, github\ninitialPrompt: Start by listing the open PRs.\n---\nb"
    )
    skills = skill_registry()
    d = read_md(write_bytes(tmp_path, data), skills=skills)
    assert d.skills == (skills["api-style"], "/srv/skills/sql-review")
    assert d.mcp_servers == ("github", "slack")
    assert d.initial_prompt == "Start by listing the open PRs."


def test_unknown_skill(tmp_path: Path) -> None:
    data = b"---\nname: a\ndescription: d\nskills: [api-style, sql]\n---\nb"
    with pytest.raises(DefinitionFileError, match=r"unknown skill 'sql'.*api-style, sql-review"):
        read_md(write_bytes(tmp_path, data), skills=skill_registry())


def test_paths_and_permission_patterns_are_not_names(tmp_path: Path) -> None:
    data = b"---\nname: a\ndescription: d\nskills: [api-style, /etc/passwd]\n---\nb"
    with pytest.raises(DefinitionFileError, match="'/etc/passwd' is not a registry name"):
        read_md(write_bytes(tmp_path, data), skills=skill_registry())
    data = b"---\nname: a\ndescription: d\ntools: Read, Bash(git:*)\n---\nb"
    with pytest.raises(DefinitionFileError, match="would grant all of Bash") as info:
        read_md(write_bytes(tmp_path, data), tool_registry())
    assert info.value.line == 4


def test_inline_mcp_server_configuration_is_an_error(tmp_path: Path) -> None:
    data = (
        b"---\nname: a\ndescription: d\nmcpServers:\n  - github\n  - slack: {command: npx}\n---\nb"
    )
    with pytest.raises(DefinitionFileError, match="inline configuration") as info:
        read_md(write_bytes(tmp_path, data))
    assert info.value.line == 6


def test_unknown_keys_are_ignored(tmp_path: Path) -> None:
    data = (
        b"---\nname: a\ndescription: d\ncolor: blue\neffort: high\nisolation: worktree\n"
        b"memory: project\nbackground: true\nhooks:\n  Stop: [{hooks: [{command: echo}]}]\n"
        b"disallowed_tools: [Bash]\nDisallowedTools: Bash\nallowed-tools: Read\n"
        b"instructions: not the prompt\n---\nthe prompt"
    )
    seen: list[DefinitionProblem] = []
    d = read_md(write_bytes(tmp_path, data), tool_registry(), on_warning=seen.append)
    assert d.disallowed_tools is None
    assert d.memory is None
    assert d.prompt == "the prompt"
    assert len(d.tools) == len(tool_registry())
    # Claude Code's own keys it honours and this runtime does not are named, each on its
    # line; keys Claude Code does not know either (allowed-tools, ...) stay silent.
    assert d.color == "blue"
    assert [(p.field, p.line) for p in seen] == [
        ("isolation", 6),
        ("memory", 7),
        ("background", 8),
    ]
    assert all("is not honoured here" in p.message for p in seen)
    # hooks are read (checked as they will run) and kept, frozen.
    assert d.hooks == {"Stop": ({"hooks": ({"command": "echo"},)},)}


def test_an_unknown_color_is_a_warning_and_the_agent_loads_without_one(tmp_path: Path) -> None:
    data = b"---\nname: a\ndescription: d\ncolor: mauve\n---\nb"
    seen: list[DefinitionProblem] = []
    d = read_md(write_bytes(tmp_path, data), tool_registry(), on_warning=seen.append)
    assert d.color is None
    [problem] = seen
    assert (problem.field, problem.line) == ("color", 4)
    assert problem.message.startswith("color must be one of red, blue, green")


def test_effort_becomes_the_reasoning_effort_param(tmp_path: Path) -> None:
    data = b"---\nname: a\ndescription: d\neffort: XHigh\nmodel_args: {temperature: 0.2}\n---\nb"
    d = read_md(write_bytes(tmp_path, data), tool_registry())
    assert d.params == {"temperature": 0.2, "reasoning_effort": "xhigh"}
    # model_args naming reasoning_effort itself is the more specific setting.
    data = (
        b"---\nname: a\ndescription: d\neffort: high\nmodel_args: {reasoning_effort: low}\n---\nb"
    )
    assert read_md(write_bytes(tmp_path, data), tool_registry()).params == {
        "reasoning_effort": "low"
    }


@pytest.mark.parametrize("value", ["'extreme'", "3", "[high]"])
def test_an_unknown_effort_is_an_error_naming_the_levels(tmp_path: Path, value: str) -> None:
    data = f"---\nname: a\ndescription: d\neffort: {value}\n---\nb".encode()
    with pytest.raises(DefinitionFileError, match="effort must be one of low, medium") as info:
        read_md(write_bytes(tmp_path, data), tool_registry())
    assert (info.value.path, info.value.line) == (tmp_path / "agent.md", 4)


def test_hooks_are_checked_as_they_will_run(tmp_path: Path) -> None:
    data = b"---\nname: a\ndescription: d\nhooks:\n  PreToolUse: [{matcher: '('}]\n---\nb"
    with pytest.raises(DefinitionFileError, match=r"hooks: hooks\.PreToolUse\[0\]") as info:
        read_md(write_bytes(tmp_path, data), tool_registry())
    assert info.value.line == 4
    seen: list[DefinitionProblem] = []
    data = b"---\nname: a\ndescription: d\nhooks:\n  Stop: [{hooks: [{type: prompt}]}]\n---\nb"
    d = read_md(write_bytes(tmp_path, data), tool_registry(), on_warning=seen.append)
    assert d.hooks is not None
    assert [p.message for p in seen] == [
        "hooks.Stop[0].hooks[0]: 'prompt' hooks are not run here (only 'command')"
    ]


# --- file safety and arguments -------------------------------------------------------------


def test_registries_are_checked_before_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.md"
    with pytest.raises(DefinitionFileError, match="tools registry key 'package::read'"):
        read_md(missing, {"package::read": make_tool("read")})
    with pytest.raises(DefinitionFileError, match="skills registry entry 'ok' is int"):
        read_md(missing, skills={"ok": 42})
    with pytest.raises(DefinitionFileError, match="tools registry must be a mapping"):
        read_md(missing, [make_tool("read")])  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [None, b"agent.md", "", 3])
def test_path_argument(bad: object) -> None:
    with pytest.raises(DefinitionFileError, match="Expected a file path"):
        read_md(bad)  # type: ignore[arg-type]


def test_directory_missing_and_oversized_files(tmp_path: Path) -> None:
    with pytest.raises(DefinitionFileError, match="directory"):
        read_md(tmp_path)
    with pytest.raises(DefinitionFileError, match="does not exist"):
        read_md(tmp_path / "missing.md")
    big = write_bytes(tmp_path, MINIMAL + b"x" * (1024 * 1024), "big.md")
    with pytest.raises(DefinitionFileError, match="at most 1 MiB"):
        read_md(big)


@pytest.mark.skipif(sys.platform == "win32", reason="FIFOs are POSIX")
def test_fifo_is_rejected_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "agent.md"
    os.mkfifo(fifo)
    with pytest.raises(DefinitionFileError, match="FIFO"):
        read_md(fifo)


def test_pathlike_and_str_paths(tmp_path: Path) -> None:
    path = write_bytes(tmp_path, MINIMAL)
    assert read_md(str(path)) == read_md(path)
