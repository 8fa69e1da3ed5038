"""deputy-runtime validate, list and schema on real files, in-process and as a command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deputy_runtime.cli import main
from deputy_runtime.definitions import AGENT_DEFINITION_SCHEMA

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "examples" / "agents"
MIN = "version: 1\nname: reviewer\ndescription: Reviews text\nprompt: Read carefully\n"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_validate_examples(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "validate", str(EXAMPLES))
    assert status == 0
    assert out == ""
    count = len([p for p in EXAMPLES.iterdir() if p.suffix in {".yaml", ".yml", ".md"}])
    assert err == f"checked {count} file(s): no problems\n"


def test_validate_reports_each_problem_with_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "good.yaml").write_text(MIN + "tools: [read_file]\n")
    (tmp_path / "bad.yaml").write_text(MIN + "name: again\n")
    (tmp_path / "worse.yml").write_text(MIN.replace("version: 1", "version: 3"))
    (tmp_path / "notes.txt").write_text("ignored")
    single = tmp_path / "single.txt"
    single.write_text(MIN + "max_requests: -1\n")
    status, out, err = run(capsys, "validate", str(tmp_path), str(single))
    assert status == 1
    assert out.splitlines() == [
        f"{tmp_path / 'bad.yaml'}:5: Duplicate key 'name' (first at line 2); each key may "
        "appear only once in a mapping",
        f"{tmp_path / 'worse.yml'}:1: version must be the integer 1 or 2, got the number 3; "
        "this reader understands format versions 1 and 2 (version: 1, or version: 2 for a "
        "definition with an output_schema or compact_at)",
        f"{single}:5: max_requests: expected a non-negative integer (e.g. 10) or null, got "
        "the number -1",
    ]
    assert err == "checked 4 file(s): 3 error(s)\n"


def test_validate_missing_path_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.yaml").write_text(MIN)
    status, out, err = run(capsys, "validate", str(tmp_path), str(tmp_path / "missing.yaml"))
    assert (status, out) == (2, "")
    assert err == f"deputy-runtime validate: {str(tmp_path / 'missing.yaml')!r} does not exist\n"


def test_validate_duplicates_name_both_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.yaml").write_text(MIN)
    (tmp_path / "b.yaml").write_text(MIN.replace("reviewer", "Reviewer"))
    status, out, err = run(capsys, "validate", str(tmp_path))
    assert status == 1
    assert out.splitlines() == [
        f"{tmp_path / name}: duplicate agent name 'reviewer': also defined by {other} in the "
        "same directory; names must be unique after lowercasing, so none of these files was "
        "loaded"
        for name, other in (("a.yaml", "b.yaml"), ("b.yaml", "a.yaml"))
    ]
    assert err == "checked 2 file(s): 2 error(s)\n"


def test_validate_markdown_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    agent = tmp_path / "helper.md"
    agent.write_text("---\nname: helper\ndescription: Helps\n---\nBe helpful.\n")
    status, out, err = run(capsys, "validate", str(agent))
    try:
        import deputy_runtime.definitions._markdown  # noqa: F401
    except ModuleNotFoundError:
        assert status == 0
        assert "skipped: markdown agent files are not supported" in out
    else:
        assert (status, out) == (0, "")
        assert err == "checked 1 file(s): no problems\n"


def test_list_examples(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "list", str(EXAMPLES))
    assert status == 0
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "MODEL", "TOOLS", "PERMISSION", "MAX", "REQUESTS"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert set(rows) >= {path.stem for path in EXAMPLES.glob("*.yaml")}
    assert "read_file, list_files, grep_files" in rows["code_reviewer"]
    assert rows["code_reviewer"].split()[-2:] == ["readonly", "5"]


def test_list_errors_and_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "list", str(tmp_path / "missing"))
    assert (status, out) == (2, "")
    assert err == f"deputy-runtime list: {str(tmp_path / 'missing')!r} does not exist\n"
    status, out, err = run(capsys, "list", str(tmp_path))
    assert (status, out) == (2, "")
    assert "holds no definition files (*.yaml, *.yml or *.md" in err
    (tmp_path / "bad.yaml").write_text("- a list\n")
    (tmp_path / "good.yaml").write_text(MIN)
    status, out, err = run(capsys, "list", str(tmp_path))
    assert (status, err) == (1, "")
    table, bad = out.split("\n\n")
    assert [line.split()[0] for line in table.splitlines()] == ["NAME", "reviewer"]
    assert bad.splitlines() == [
        "1 file(s) did not load:",
        f"  {tmp_path / 'bad.yaml'}: Expected a mapping containing only documented fields "
        "(version: 1, name, description, prompt, ...), but it holds a sequence",
    ]


def test_list_documents_its_default_directory(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["list", "--help"])
    assert "(default: .deputy/agents)" in " ".join(capsys.readouterr().out.split())


def test_schema_prints_the_schema(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "schema")
    assert status == 0
    assert json.loads(out) == AGENT_DEFINITION_SCHEMA


@pytest.mark.slow
def test_as_a_real_command(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(MIN + "tools: null\n")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "deputy_runtime", "validate", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stdout == (
        f"{tmp_path / 'bad.yaml'}:5: tools may not be null; write tools: [] for none\n"
    )
