"""max_active_delegations: a cap on how many of the model's delegations run at once."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from deputy_runtime import Chat, LeadAgent, agent_definition
from deputy_runtime.chat import ModelRequest, ScriptedProvider, reply, tool_calls

pytestmark = pytest.mark.anyio


async def _fan_out(tmp_path: Path, cap: int | None, n: int = 6) -> tuple[int, LeadAgent]:
    active = 0
    most = 0

    async def worker(request: ModelRequest) -> str:
        nonlocal active, most
        active += 1
        most = max(most, active)
        # Yield several times so every runnable delegation gets the chance to overlap.
        for _ in range(5):
            await anyio.lowlevel.checkpoint()
        active -= 1
        return "ok"

    calls = tool_calls(
        *[("delegate_to_agent", {"agent_name": "worker", "task": f"t{i}"}) for i in range(n)]
    )
    provider = ScriptedProvider({"lead": [calls, reply("done")], "worker": worker})
    lead = LeadAgent(
        Chat(provider),
        [agent_definition("worker", "works", "You work.", max_requests=1)],
        working_dir=tmp_path,
        max_active_delegations=cap,
    )
    with anyio.fail_after(10):
        await lead.run("go")
    return most, lead


@pytest.mark.parametrize("cap", [1, 2, 4])
async def test_cap_bounds_concurrent_delegations(tmp_path: Path, cap: int) -> None:
    most, lead = await _fan_out(tmp_path, cap)
    assert most == cap
    assert [r.status for r in lead.list_subagents()] == ["completed"] * 6


async def test_without_a_cap_a_turn_runs_all_at_once(tmp_path: Path) -> None:
    most, _ = await _fan_out(tmp_path, None)
    assert most == 6


def test_cap_must_be_positive(tmp_path: Path) -> None:
    provider = ScriptedProvider([])
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="max_active_delegations"):
            LeadAgent(Chat(provider), working_dir=tmp_path, max_active_delegations=bad)  # type: ignore[arg-type]
