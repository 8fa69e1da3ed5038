"""``convert`` to markdown keeps the prompt and description exactly or refuses, naming the
field; ``--strip-whitespace`` accepts losing their surrounding whitespace, with a warning
per field. (Markdown readers strip both, so a markdown file cannot carry that whitespace.)
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deputy_runtime import tools_file
from deputy_runtime.cli import main
from deputy_runtime.definitions import (
    AgentDefinition,
    agent_definition,
    agent_definition_from_markdown,
    agent_definition_read,
    agent_definition_write,
)
from deputy_runtime.definitions._frontmatter import LINE_BREAKS

REPO = Path(__file__).resolve().parents[2]
PROMPT = "    indented code\nline two  "


def _convert(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    status = main(["convert", *map(str, args)])
    out, err = capsys.readouterr()
    return status, out, err


def _yaml(directory: Path, **fields: object) -> Path:
    values: dict[str, object] = {"name": "a", "description": "d", "prompt": "p", **fields}
    return agent_definition_write(agent_definition(**values), directory / "a.yaml")  # type: ignore[arg-type]


def test_indented_prompt_is_refused_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _yaml(tmp_path, prompt=PROMPT)
    status, out, err = _convert(capsys, source, tmp_path / "a.md")
    assert (status, out) == (1, "")
    assert err == (
        f"deputy-runtime convert: {tmp_path / 'a.md'}: prompt cannot be written to markdown "
        "exactly: it starts with '    ' and ends with '  ', and markdown readers strip the "
        "body, so that whitespace would be lost; remove it or keep this definition in YAML. "
        "Pass --strip-whitespace to accept losing the surrounding whitespace of the prompt\n"
    )
    assert os.listdir(tmp_path) == ["a.yaml"]


def test_both_fields_are_named_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _yaml(tmp_path, prompt=PROMPT, description=" Reviews. ", memory=["x"])
    status, _, err = _convert(capsys, source, tmp_path / "a.md")
    assert status == 1
    assert "3 fields cannot be written to a markdown agent file (description, prompt, memory)" in (
        err
    )
    assert "description cannot be written to markdown exactly: it starts with ' ' and " in err
    assert "prompt cannot be written to markdown exactly: it starts with '    '" in err
    assert err.endswith("surrounding whitespace of the prompt and description\n")
    assert os.listdir(tmp_path) == ["a.yaml"]


def test_a_yaml_literal_blocks_one_final_newline_converts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 'prompt: |' ends the prompt with one line break; it means nothing to a model and a
    # markdown body ends with one too, so it is not a loss worth refusing.
    source = REPO / "examples" / "agents" / "code_reviewer.yaml"
    assert source.read_text().count("prompt: |\n") == 1
    status, _, err = _convert(capsys, source, tmp_path / "a.md")
    assert (status, err) == (0, "")
    tools = {t.name: t for t in tools_file(REPO)}
    back = agent_definition_from_markdown(tmp_path / "a.md", tools)
    original = agent_definition_read(source, tools)
    assert original.prompt.endswith(".\n")
    assert back.prompt == original.prompt[:-1]


def test_more_than_one_final_newline_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _yaml(tmp_path, prompt="Review.\n\n")
    status, _, err = _convert(capsys, source, tmp_path / "a.md")
    assert status == 1
    assert "prompt cannot be written to markdown exactly: it ends with '\\n\\n'" in err
    assert os.listdir(tmp_path) == ["a.yaml"]


def test_strip_whitespace_converts_with_a_warning_per_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _yaml(tmp_path, prompt=PROMPT, description="Reviews.\n\n")
    out = tmp_path / "a.md"
    status, stdout, err = _convert(capsys, source, out, "--strip-whitespace")
    assert (status, stdout) == (0, f"wrote {out}\n")
    assert err.splitlines() == [
        f"deputy-runtime convert: warning: {out}: prompt starts with '    ' and ends with "
        "'  '; markdown readers strip it, so that whitespace was dropped (--strip-whitespace)",
        f"deputy-runtime convert: warning: {out}: description ends with '\\n\\n'; markdown "
        "readers strip it, so that whitespace was dropped (--strip-whitespace)",
    ]
    back = agent_definition_from_markdown(out)
    assert (back.prompt, back.description) == (PROMPT.strip(), "Reviews.")


def test_strip_whitespace_does_not_excuse_other_fields(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _yaml(tmp_path, prompt=PROMPT, memory=["x"])
    status, _, err = _convert(capsys, source, tmp_path / "a.md", "--strip-whitespace")
    assert status == 1
    assert err.splitlines() == [
        f"deputy-runtime convert: {tmp_path / 'a.md'}: memory cannot be written to a markdown "
        "agent file: Claude Code's 'memory' key names a memory scope (user, project or local), "
        "not memory entries; move the entries into the prompt, leave memory out (null), or keep "
        "this definition in YAML"
    ]
    assert os.listdir(tmp_path) == ["a.yaml"]


def test_no_warning_when_nothing_is_written_or_stripped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _yaml(tmp_path, prompt=PROMPT)
    (tmp_path / "a.md").write_bytes(b"keep me")
    status, _, err = _convert(capsys, source, tmp_path / "a.md", "--strip-whitespace")
    assert status == 1
    assert err == (
        f"deputy-runtime convert: {tmp_path / 'a.md'}: File already exists; pass --overwrite "
        "to replace it\n"
    )
    assert (tmp_path / "a.md").read_bytes() == b"keep me"
    other = tmp_path / "sub"
    other.mkdir()
    status, _, err = _convert(capsys, _yaml(other), other / "b.md", "--strip-whitespace")
    assert (status, err) == (0, "")


def test_markdown_to_yaml_is_unaffected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "a.md"
    source.write_text("---\nname: a\ndescription:   d  \ntools: []\n---\n\n   Body.  \n\n")
    status, _, err = _convert(capsys, source, tmp_path / "a.yaml")
    assert (status, err) == (0, "")
    back = agent_definition_read(tmp_path / "a.yaml")
    assert (back.prompt, back.description) == ("Body.", "d")


# --- property: exact round trip, or the clear error; with the flag, the stripped text -----

_EXOTIC = LINE_BREAKS.replace("\n", "")
_SURROGATES: tuple[Literal["Cs"]] = ("Cs",)  # lone surrogates cannot be encoded
_core = (
    st.text(
        st.characters(exclude_categories=_SURROGATES, exclude_characters=_EXOTIC),
        min_size=1,
        max_size=60,
    )
    .map(str.strip)
    .filter(bool)
)
_space = st.lists(
    st.sampled_from([" ", "\t", "\n", "\u3000", "\xa0", "\x0c", "\r\n"]), max_size=3
).map("".join)


@st.composite
def _padded(draw: st.DrawFn) -> str:
    return draw(_space) + draw(_core) + draw(_space)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(prompt=_padded(), description=_padded())
def test_convert_is_exact_or_names_the_field(
    capsys: pytest.CaptureFixture[str], prompt: str, description: str
) -> None:
    definition = agent_definition("a", description, prompt)
    padded = [f for f in ("prompt", "description") if _has_surrounding_whitespace(definition, f)]
    with tempfile.TemporaryDirectory() as raw:
        directory = Path(raw)
        source = agent_definition_write(definition, directory / "a.yaml")
        status, _, err = _convert(capsys, source, directory / "a.md")
        if not padded:
            assert (status, err) == (0, "")
            # Exact, apart from a prompt's one final line break.
            assert agent_definition_from_markdown(directory / "a.md") == _stripped(definition)
        else:
            assert status == 1
            for field in padded:
                assert f"{field} cannot be written to markdown exactly: it " in err
            assert "Pass --strip-whitespace" in err
            assert sorted(os.listdir(directory)) == ["a.yaml"]
        status, _, err = _convert(capsys, source, directory / "b.md", "--strip-whitespace")
        assert status == 0
        assert len(err.splitlines()) == len(padded)
        stripped = _stripped(definition)
        assert agent_definition_from_markdown(directory / "b.md") == stripped
        assert _convert(capsys, directory / "b.md", directory / "b.yaml")[:2] == (
            0,
            f"wrote {directory / 'b.yaml'}\n",
        )
        assert agent_definition_read(directory / "b.yaml") == stripped


def _has_surrounding_whitespace(definition: AgentDefinition, field: str) -> bool:
    value: str = getattr(definition, field)
    if field == "prompt" and value.endswith("\n") and not value.endswith("\n\n"):
        value = value[:-1]  # one final line break (YAML 'prompt: |') is not a loss
    return value != value.strip()


def _stripped(definition: AgentDefinition) -> AgentDefinition:
    return definition.replace(
        prompt=definition.prompt.strip(), description=definition.description.strip()
    )
