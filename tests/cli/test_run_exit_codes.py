"""``run``'s exit status tells a script whether any subagent's work stands behind the answer."""

from __future__ import annotations

from pathlib import Path

from tests.cli._runhelp import REPO_ROOT, run_cli

SUMMARIZER = (REPO_ROOT / "examples" / "agents" / "summarizer.yaml").read_text(encoding="utf-8")


def _agents(tmp_path: Path, max_requests: int) -> Path:
    # The offline test model needs two requests for an agent with tools (call, then answer);
    # a limit of one stops every delegation at request_limit.
    agents = tmp_path / "agents"
    agents.mkdir()
    text = SUMMARIZER.replace("max_requests: 3", f"max_requests: {max_requests}")
    assert f"max_requests: {max_requests}" in text
    (agents / "summarizer.yaml").write_text(text, encoding="utf-8")
    (tmp_path / "README.md").write_text("# A project\n\nIt does one thing.\n", encoding="utf-8")
    return agents


def test_every_delegation_stopped_is_exit_4(tmp_path: Path) -> None:
    done = run_cli("run", "--agents", str(_agents(tmp_path, 1)), "Summarise", cwd=tmp_path)
    assert done.returncode == 4, (done.stdout, done.stderr)
    assert "deputy-runtime run: every delegation failed or stopped; none completed" in (done.stderr)
    assert "summarizer stopped (request_limit) without an answer" in done.stdout


def test_a_completed_delegation_is_exit_0(tmp_path: Path) -> None:
    done = run_cli("run", "--agents", str(_agents(tmp_path, 3)), "Summarise", cwd=tmp_path)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "- summarizer found: README.md begins: It does one thing." in done.stdout
    assert "none completed" not in done.stderr
