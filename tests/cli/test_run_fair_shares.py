"""`run` on definitions without `max_requests`: the turn's delegations share the lead's
budget, and one the budget cannot start is visible in the table, the notes under it and
the `--json` event stream, with the reason."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli._runhelp import run_cli, tool_free_agents

NAMES = ("alpha", "beta", "gamma")


def _uncapped(directory: Path) -> Path:
    tool_free_agents(directory, *NAMES)
    for name in NAMES:
        path = directory / f"{name}.yaml"
        text = path.read_text(encoding="utf-8").replace("max_requests: 4", "max_requests: null")
        path.write_text(text, encoding="utf-8")
    return directory


def _rows(stdout: str) -> dict[str, list[str]]:
    return {
        line.split()[1]: line.split()
        for line in stdout.splitlines()
        if line.startswith("delegation_") and len(line.split()) >= 5
    }


def test_three_uncapped_agents_under_twelve_requests_all_complete(tmp_path: Path) -> None:
    agents = _uncapped(tmp_path / "agents")
    done = run_cli("run", "--max-requests", "12", "--agents", str(agents), "Do it", cwd=tmp_path)
    assert done.returncode == 0, (done.stdout, done.stderr)
    rows = _rows(done.stdout)
    assert set(rows) == set(NAMES)
    assert {rows[n][2] for n in NAMES} == {"completed"}
    # 11 left after the lead's first request: the lead keeps 1, the three share 10.
    assert sorted(rows[n][4] for n in NAMES) == ["1/3", "1/3", "1/4"]


def test_delegations_the_budget_cannot_start_are_reported(tmp_path: Path) -> None:
    agents = _uncapped(tmp_path / "agents")
    done = run_cli("run", "--max-requests", "3", "--agents", str(agents), "Do it", cwd=tmp_path)
    assert done.returncode == 0, (done.stdout, done.stderr)
    rows = _rows(done.stdout)
    skipped = [n for n in NAMES if rows[n][2] == "not_started"]
    assert len(skipped) == 2
    assert all(rows[n][3] == "request_limit" for n in skipped)
    for name in skipped:
        note = f"  {name}: error: Not started: the run's max_requests of 3 leaves 0 model"
        assert note in done.stdout
    assert "1 kept for the lead's own next request" in done.stdout

    streamed = run_cli(
        *("run", "--json", "--max-requests", "3", "--agents", str(agents), "Do it"),
        cwd=tmp_path,
    )
    assert streamed.returncode == 0, streamed.stderr
    events = [json.loads(line) for line in streamed.stdout.splitlines() if line.strip()]
    ends = [e for e in events if e["type"] == "delegation_end"]
    starts = {e["delegation_id"] for e in events if e["type"] == "delegation_start"}
    alone = [e for e in ends if e["delegation_id"] not in starts]
    assert len(ends) == 3
    assert [(e["status"], e["stop_reason"]) for e in alone] == [
        ("not_started", "request_limit")
    ] * 2
    assert all(e["error"].startswith("Not started: the run's max_requests") for e in alone)
