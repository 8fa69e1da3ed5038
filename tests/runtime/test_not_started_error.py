"""A delegation the budget cannot start tells the lead's model why, in its tool result.

The outcome's ``error`` names the limit, what is left of it, what the run used and what
running delegations hold, so the model can tell a spent budget from a busy one.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from deputy_runtime import UsageLimits
from deputy_runtime.chat import ModelRequest, reply
from tests.runtime.helpers import (
    definition,
    delegate_many,
    delegate_results,
    outcome,
    scripted_lead,
)

pytestmark = pytest.mark.anyio


async def test_a_delegation_the_budget_cannot_start_names_the_limit(tmp_path: Path) -> None:
    release = anyio.Event()
    seen: list[str] = []

    async def worker(request: ModelRequest) -> str:
        seen.append("request")
        await release.wait()
        return "ok"

    lead, p = scripted_lead(
        {
            "lead": [delegate_many(("worker", "a"), ("worker", "b")), reply("done")],
            "worker": worker,
        },
        [definition("worker", max_requests=None)],
        tmp_path,
        usage_limits=UsageLimits(max_requests=3),
    )

    async def release_when_running() -> None:
        with anyio.fail_after(30):
            while not seen:
                await anyio.sleep(0)
        release.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(release_when_running)
        result = await lead.run("go")
    outcomes = [outcome(r) for r in delegate_results(p)]
    skipped = [o for o in outcomes if o["status"] == "not_started"]
    assert result.usage.requests <= 3
    assert len(skipped) == 1, outcomes
    error = skipped[0]["error"]
    assert error.startswith("Not started: the run's max_requests of 3 leaves 0 model requests")
    assert "1 used" in error
    assert "held by running delegations" in error
    [record] = [r for r in lead.list_subagents() if r.status == "not_started"]
    assert record.error == error
