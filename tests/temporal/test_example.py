"""``examples/temporal_fanout.py`` runs as a user would run it, on both host backends,
against the session's dev server, and matches the in-process run of the same lead."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from deputy_runtime import LeadAgent, UsageLimits, agent_definitions, chat, tools_file

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = REPO_ROOT / "examples" / "temporal_fanout.py"

pytestmark = pytest.mark.slow  # a subprocess


def _in_process() -> tuple[dict[str, int], str]:
    """Per-agent requests and the lead's summary line of the same lead, in-process."""
    registry = {t.name: t for t in tools_file(REPO_ROOT)}
    definitions = agent_definitions(
        REPO_ROOT / "examples" / "agents", tools=registry, markdown=True
    )
    lead = LeadAgent(
        chat("test"),
        definitions,
        tools=[registry[n] for n in ("read_file", "list_files", "grep_files")],
        usage_limits=UsageLimits(max_requests=25),
        working_dir=REPO_ROOT,
    )
    result = anyio.run(lead.run, "Review the examples directory and summarise what each agent does")
    usage = result.usage
    line = f"lead: {result.stop_reason}, {usage.requests} requests, {usage.tool_calls} calls"
    return {r.agent_name: r.usage.requests for r in lead.list_subagents()}, line


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_temporal_fanout_example(temporal_address: str, backend: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), backend, "--temporal", temporal_address],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"[{backend}]\n")
    rows = re.findall(r"^  (\S+)\s+(\S+)\s+(\S+)\s+requests (\d+)/(\d+)$", done.stdout, re.M)
    names = sorted(p.stem for p in (REPO_ROOT / "examples" / "agents").iterdir())
    assert sorted(r[0] for r in rows) == names
    assert {(r[1], r[2]) for r in rows} == {("completed", "complete")}
    assert all(int(used) <= int(granted) for *_, used, granted in rows)
    per_agent, lead_line = _in_process()
    assert {r[0]: int(r[3]) for r in rows} == per_agent
    assert done.stdout.rstrip().splitlines()[-1] == lead_line
