"""validate picks the reader by the same extension table as convert; list tells
"every host tool" (a markdown file without ``tools``) from "no tools" (``tools: []``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from deputy_runtime._cli.definitions import ALL_HOST_TOOLS
from deputy_runtime.cli import main
from deputy_runtime.definitions._discovery import FORMAT_BY_SUFFIX, definition_format

YAML = "version: 1\nname: a\ndescription: d\nprompt: p\n"
MARKDOWN = "---\nname: a\ndescription: d\n---\nBe brief.\n"
# Invalid in a way each reader words differently, so the message shows which one read it.
BAD_YAML = "version: 1\nname: a\ndescription: d\n"
BAD_MARKDOWN = "---\nname: a\n---\nBe brief.\n"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_one_table_names_every_extension() -> None:
    assert FORMAT_BY_SUFFIX == {
        ".yaml": "yaml",
        ".yml": "yaml",
        ".md": "markdown",
        ".markdown": "markdown",
    }
    assert definition_format(Path("A.MarkDown")) == "markdown"
    assert definition_format(Path("a.YML")) == "yaml"
    assert definition_format(Path("a.txt")) is None


# (good text, bad text, what validate says about the bad one after the path)
_AS_MARKDOWN = (
    MARKDOWN,
    BAD_MARKDOWN,
    ":1: description is required: add 'description: <when the lead should use this "
    "agent>' to the frontmatter\n",
)
_AS_YAML = (YAML, BAD_YAML, ": Required fields: name, description, prompt; missing: prompt\n")


@pytest.mark.parametrize(
    ("name", "good", "bad", "problem"),
    [(n, *_AS_MARKDOWN) for n in ("a.md", "a.markdown", "A.MD", "a.Markdown")]
    # anything else is read as YAML
    + [(n, *_AS_YAML) for n in ("a.yaml", "a.yml", "A.YAML", "a.Yml", "a.txt")],
)
def test_validate_reads_each_extension_in_its_format(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    good: str,
    bad: str,
    problem: str,
) -> None:
    path = tmp_path / name
    path.write_text(good)
    assert run(capsys, "validate", str(path)) == (0, "", "checked 1 file(s): no problems\n")
    path.write_text(bad)
    status, out, _ = run(capsys, "validate", str(path))
    assert status == 1
    assert out == f"{path}{problem}"


def test_list_tells_every_host_tool_from_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a.yaml names a tool first: the markdown file without 'tools' must not pick it up.
    (tmp_path / "a.yaml").write_text(YAML + "tools: [read_file]\n")
    (tmp_path / "b.md").write_text(MARKDOWN.replace("name: a", "name: b"))
    (tmp_path / "c.md").write_text(MARKDOWN.replace("name: a", "name: c\ntools: []"))
    (tmp_path / "d.md").write_text(
        MARKDOWN.replace("name: a", "name: d\ntools: read_file, grep_files")
    )
    status, out, err = run(capsys, "list", str(tmp_path))
    assert (status, err) == (0, "")
    header, *lines = out.splitlines()
    start, end = header.index("TOOLS"), header.index("PERMISSION")
    tools = {line.split()[0]: line[start:end].strip() for line in lines}
    assert tools == {
        "a": "read_file",
        "b": "(all host tools)",
        "c": "-",
        "d": "read_file, grep_files",
    }
    assert ALL_HOST_TOOLS == "(all host tools)"


def test_validate_markdown_without_tools_is_valid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.md").write_text(MARKDOWN + "")
    (tmp_path / "b.yaml").write_text(YAML.replace("name: a", "name: b") + "tools: [read_file]\n")
    assert run(capsys, "validate", str(tmp_path)) == (0, "", "checked 2 file(s): no problems\n")


def test_validate_names_a_malformed_tool_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "a.yaml"
    path.write_text(YAML + "tools: [read_file, 'bad key']\n")
    status, out, _ = run(capsys, "validate", str(path))
    assert status == 1
    assert out == (
        f"{path}:5: Unknown or duplicate tools references: 'bad key' is not a registry key; "
        "keys are a letter followed by letters, digits, '_', '.' or '-' (e.g. 'read_file')\n"
    )
