"""A delegation granted nothing to run on settles ``not_started`` before anything is built.

The attack: a lead's model asks for 500 delegations in one turn while the lead has 50
requests in total. Only delegations that were granted a request may reach the host's
owned-resource factory, the chat factory or the provider; every other one settles
``not_started`` with the limit's stop reason, announces nothing and holds no budget.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from deputy_runtime import DelegationPolicy, UsageLimits
from deputy_runtime.chat import ContentToolResult, reply, tool_calls
from deputy_runtime.runtime import DelegationEnd, DelegationStart
from tests.runtime.helpers import Cleanups, definition, meter_spy, outcome, scripted_lead

pytestmark = pytest.mark.anyio

__all__ = ["meter_spy"]  # fixture used by name

N = 500
BUDGET = 50


@pytest.mark.parametrize("max_requests", [1, None])
async def test_a_flood_of_delegations_builds_only_what_can_run(
    tmp_path: Path, meter_spy: Any, max_requests: int | None
) -> None:
    factory = Cleanups()
    all_admitted = anyio.Event()

    async def worker(request: Any) -> str:
        # Real models take time: every delegation of the turn is admitted while the
        # granted ones are still in their first request.
        await all_admitted.wait()
        return "ok"

    flood = tool_calls(
        *[("delegate_to_agent", {"agent_name": "worker", "task": f"t{i}"}) for i in range(N)]
    )
    lead, p = scripted_lead(
        {"lead": [flood, reply("done")], "worker": worker},
        [definition("worker", max_requests=max_requests)],
        tmp_path,
        usage_limits=UsageLimits(max_requests=BUDGET),
        delegation_policy=DelegationPolicy("owned", resources=factory),
    )
    events: list[Any] = []
    out: list[Any] = []

    async def run() -> None:
        out.append(await lead.run("go", on_event=events.append))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(30):
            while len(lead.list_subagents()) < N:
                await anyio.sleep(0)
        all_admitted.set()
    [result] = out
    records = lead.list_subagents()
    started = [r for r in records if r.started_at is not None]
    skipped = [r for r in records if r.started_at is None]
    assert len(records) == N
    # The lead's first request leaves BUDGET - 1 for its children, and its final answer
    # needs none of theirs only if some are left: at most that many children ran.
    assert 1 <= len(started) <= BUDGET - 1
    assert len(factory.made) == len(started)  # the factory never built for nothing
    factory.assert_exactly_once()
    assert len(p.requests_for("worker")) == len(started)
    assert {(r.status, r.stop_reason) for r in skipped} == {("not_started", "request_limit")}
    assert all(r.usage.requests == 0 for r in skipped)
    announced = {e.delegation_id for e in events if isinstance(e, DelegationStart)}
    ended = {e.delegation_id for e in events if isinstance(e, DelegationEnd)}
    assert announced == {r.delegation_id for r in started}
    # Every delegation settles visibly: one that never started has its DelegationEnd
    # alone, not_started, with the error saying which limit and how much was left.
    assert ended == {r.delegation_id for r in records}
    for e in events:
        if isinstance(e, DelegationEnd) and e.delegation_id not in announced:
            assert (e.status, e.stop_reason) == ("not_started", "request_limit")
            assert e.error is not None
            assert e.error.startswith("Not started: the run's max_requests")
    assert meter_spy.open_reservations() == 0
    assert result.usage.requests <= BUDGET
    # The lead's model is told, per call, that the delegation did not start.
    answers = [
        c for turn in result.turns for c in turn.contents if isinstance(c, ContentToolResult)
    ]
    outcomes = [outcome(r) for r in answers]
    assert len(outcomes) == N
    assert sum(o["status"] == "not_started" for o in outcomes) == len(skipped)


async def test_a_zero_grant_settles_before_resources_are_built(tmp_path: Path) -> None:
    factory = Cleanups()
    both_admitted = anyio.Event()

    async def worker(request: Any) -> str:
        await both_admitted.wait()
        return "ok"

    lead_turn = tool_calls(
        ("delegate_to_agent", {"agent_name": "w", "task": "first"}),
        ("delegate_to_agent", {"agent_name": "w", "task": "second"}),
    )
    lead, p = scripted_lead(
        {"lead": [lead_turn, reply("ok")], "w": worker},
        [definition("w", max_requests=1)],
        tmp_path,
        # 2 requests left: the lead keeps 1, the first takes 1, the second is granted none.
        usage_limits=UsageLimits(max_requests=3),
        delegation_policy=DelegationPolicy("owned", resources=factory),
    )

    async def run() -> None:
        await lead.run("go")

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(10):
            while len(lead.list_subagents()) < 2:
                await anyio.sleep(0)
        both_admitted.set()
    first, second = lead.list_subagents()
    assert first.status == "completed"
    assert (second.status, second.stop_reason) == ("not_started", "request_limit")
    assert second.limits is not None
    assert second.limits.max_requests == 0
    assert factory.made == [first.delegation_id]
    factory.assert_exactly_once()
    assert len(p.requests_for("w")) == 1
