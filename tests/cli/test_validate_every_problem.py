"""``validate`` reports every problem of a file, not only the first."""

from __future__ import annotations

from pathlib import Path

from tests.cli._runhelp import run_cli

TWO_PROBLEMS = """\
version: 1
name: a
description: d
prompt: p
tools: [read_file]
max_requests: -3
permission_mode: bogus
"""


def test_a_bad_mode_is_not_hidden_behind_a_bad_request_limit(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(TWO_PROBLEMS, encoding="utf-8")
    done = run_cli("validate", "a.yaml", cwd=tmp_path)
    assert done.returncode == 1, (done.stdout, done.stderr)
    out = done.stdout + done.stderr
    assert "a.yaml:6: max_requests: expected a non-negative integer" in out
    assert "a.yaml:7: permission_mode: Invalid permission mode 'bogus'" in out
    assert "checked 1 file(s): 2 error(s)" in out
