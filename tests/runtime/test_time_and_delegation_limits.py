"""Wall-clock limits and per-agent delegation caps.

Hung models and tools wait on events that are never set; the time limits end them. No
test asserts how long anything took: only what the runtime reports and leaves behind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from deputy_runtime import (
    Agent,
    BudgetExceeded,
    Chat,
    DelegationPolicy,
    UsageLimits,
    tool,
)
from deputy_runtime.chat import ModelRequest, ScriptedProvider, reply, tool_call
from deputy_runtime.errors import DelegationBindingError
from tests.runtime.helpers import (
    Cleanups,
    definition,
    delegate,
    delegate_many,
    delegate_results,
    make_tool,
    meter_spy,
    outcome,
    scripted_lead,
)

pytestmark = pytest.mark.anyio

__all__ = ["meter_spy"]  # fixture used by name

SHORT = 0.05  # seconds: where nothing must happen before the limit but the first request
#: Where delegations must be admitted before the limit (a loaded machine can pause a
#: process for a while; the hung tasks keep the run waiting until the limit anyway).
ROOMY = 1.0


async def hang(request: ModelRequest) -> str:
    """A model that never answers."""
    await anyio.Event().wait()
    raise AssertionError("unreachable")


# -- validation ------------------------------------------------------------------------------


def test_time_and_cap_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="max_seconds must be finite and >= 0"):
        UsageLimits(max_seconds=-1)
    with pytest.raises(TypeError, match="max_seconds must be a number"):
        UsageLimits(max_seconds="1")  # type: ignore[arg-type]
    with pytest.raises(DelegationBindingError, match="max_seconds must be finite and > 0"):
        DelegationPolicy(max_seconds=0)
    with pytest.raises(DelegationBindingError, match="max_delegations must be >= 0"):
        DelegationPolicy(max_delegations=-1)
    with pytest.raises(DelegationBindingError, match=r"max_delegations\['w'\]"):
        DelegationPolicy(max_delegations={"w": 1.5})  # type: ignore[dict-item]
    with pytest.raises(DelegationBindingError, match="keys must be agent names"):
        DelegationPolicy(max_delegations={"": 1})
    policy = DelegationPolicy(max_delegations={" Worker ": 2})
    assert policy.delegation_cap("worker") == 2
    assert policy.delegation_cap("other") is None
    assert DelegationPolicy(max_delegations=3).delegation_cap("anyone") == 3


# -- a run's own time limit ------------------------------------------------------------------


async def test_a_hung_model_ends_the_run_with_time_limit(tmp_path: Path) -> None:
    agent = Agent(
        Chat(ScriptedProvider([hang, "now"])),
        working_dir=tmp_path,
        usage_limits=UsageLimits(max_seconds=SHORT),
    )
    result = await agent.run("go")
    assert result.stop_reason == "time_limit"
    assert result.usage.requests == 1
    # The next run starts with a fresh clock.
    again = await agent.run("again")
    assert (again.stop_reason, again.response) == ("complete", "now")


async def test_a_hung_tool_is_answered_as_cut_off(tmp_path: Path) -> None:
    @tool
    async def wait_forever() -> str:
        """Never returns."""
        await anyio.Event().wait()
        return "unreachable"

    agent = Agent(
        Chat(ScriptedProvider([tool_call("wait_forever", {})])),
        tools=[wait_forever],
        working_dir=tmp_path,
        usage_limits=UsageLimits(max_seconds=ROOMY),
    )
    result = await agent.run("go")
    assert result.stop_reason == "time_limit"
    answer = result.turns[-1].contents[0]
    assert "cancelled while this tool call was running" in (answer.error or "")  # type: ignore[union-attr]


async def test_time_limit_with_on_exceed_error_raises_budget_exceeded(tmp_path: Path) -> None:
    agent = Agent(
        Chat(ScriptedProvider([hang])),
        working_dir=tmp_path,
        usage_limits=UsageLimits(max_seconds=SHORT, on_exceed="error"),
    )
    with pytest.raises(BudgetExceeded, match="time limit") as info:
        await agent.run("go")
    assert info.value.stop_reason == "time_limit"


# -- a delegation's time limit -----------------------------------------------------------------


async def test_a_hung_subagent_times_out_softly_and_gives_back_its_budget(
    tmp_path: Path, meter_spy: Any
) -> None:
    cleanups = Cleanups(lambda: [make_tool("probe", read_only=True)])
    lead, p = scripted_lead(
        {"lead": [delegate("worker"), reply("moving on")], "worker": hang},
        [definition("worker", max_requests=5)],
        tmp_path,
        usage_limits=UsageLimits(max_requests=10),
        delegation_policy=DelegationPolicy("owned", resources=cleanups, max_seconds=ROOMY),
    )
    result = await lead.run("go")
    assert (result.stop_reason, result.response) == ("complete", "moving on")
    [record] = lead.list_subagents()
    assert (record.status, record.stop_reason) == ("stopped", "time_limit")
    assert record.limits is not None
    assert record.limits.max_seconds == ROOMY
    [res] = delegate_results(p)
    assert res.error is None  # a soft result the model can act on
    assert outcome(res)["stop_reason"] == "time_limit"
    cleanups.assert_exactly_once()
    assert meter_spy.open_reservations() == 0
    assert result.usage.requests == 2 + 1  # the lead's two, the child's one


async def test_a_subagent_gets_at_most_the_time_its_lead_has_left(tmp_path: Path) -> None:
    lead_seconds = 30.0
    lead, _ = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": ["done"]},
        [definition("worker")],
        tmp_path,
        usage_limits=UsageLimits(max_seconds=lead_seconds),
        delegation_policy=DelegationPolicy(max_seconds=10 * lead_seconds),
    )
    result = await lead.run("go")
    assert result.stop_reason == "complete"
    [record] = lead.list_subagents()
    assert record.limits is not None
    assert record.limits.max_seconds is not None
    assert 0 < record.limits.max_seconds <= lead_seconds


async def test_a_lead_time_limit_stops_its_hung_subagents_and_cleans_up(
    tmp_path: Path, meter_spy: Any
) -> None:
    cleanups = Cleanups()
    lead, _ = scripted_lead(
        {"lead": [delegate_many(("worker", "a"), ("worker", "b")), reply("x")], "worker": hang},
        [definition("worker", max_requests=1)],
        tmp_path,
        usage_limits=UsageLimits(max_seconds=ROOMY),
        delegation_policy=DelegationPolicy("owned", resources=cleanups),
    )
    result = await lead.run("go")
    assert result.stop_reason == "time_limit"
    records = lead.list_subagents()
    assert len(records) == 2
    assert all(r.status == "stopped" for r in records)
    assert {r.stop_reason for r in records} <= {"time_limit", "interrupted"}
    cleanups.assert_exactly_once()
    assert len(cleanups.made) == 2
    assert meter_spy.open_reservations() == 0
    assert lead.delegations.active == {}


# -- delegations per agent ---------------------------------------------------------------------


async def test_max_delegations_per_agent_gives_a_soft_budget_spent_outcome(
    tmp_path: Path,
) -> None:
    lead, p = scripted_lead(
        {
            "lead": [
                delegate_many(("worker", "1"), ("worker", "2"), ("worker", "3"), ("other", "4")),
                reply("ok"),
                delegate("worker", "5"),
                reply("again"),
            ],
            "worker": ["w1", "w2", "w5"],
            "other": ["o4"],
        },
        [definition("worker"), definition("other")],
        tmp_path,
        delegation_policy=DelegationPolicy(max_delegations={"worker": 2}),
    )
    result = await lead.run("go")
    assert result.stop_reason == "complete"
    records = lead.list_subagents()
    worker = [r for r in records if r.agent_name == "worker"]
    assert sorted(r.status for r in worker) == ["completed", "completed", "not_started"]
    [refused] = [r for r in worker if r.status == "not_started"]
    assert refused.stop_reason == "delegation_limit"
    assert refused.error is not None
    assert "budget for agent 'worker' is spent" in refused.error
    assert [r.status for r in records if r.agent_name == "other"] == ["completed"]
    assert len(p.requests_for("worker")) == 2
    refused_results = [r for r in delegate_results(p) if r.error is None]
    assert any(outcome(r)["stop_reason"] == "delegation_limit" for r in refused_results)
    # The cap is per lead run: the next run may delegate again.
    again = await lead.run("next")
    assert again.stop_reason == "complete"
    assert lead.list_subagents()[-1].status == "completed"


# -- parallel_delegate -------------------------------------------------------------------------


async def test_a_batch_time_limit_stops_hung_responders(tmp_path: Path, meter_spy: Any) -> None:
    lead, _ = scripted_lead({"w": hang}, [definition("w")], tmp_path)
    result = await lead.parallel_delegate(
        [("w", str(i)) for i in range(5)],
        max_active=2,
        usage_limits=UsageLimits(max_seconds=ROOMY),
    )
    assert result.run.stop_reason == "time_limit"
    assert set(result.statuses) <= {"stopped", "not_started"}
    assert "stopped" in result.statuses
    assert result.statuses[2:] == ("not_started",) * 3
    assert meter_spy.open_reservations() == 0
    assert not lead.running
    assert lead.delegations.active == {}


async def test_policy_max_seconds_bounds_each_responder(tmp_path: Path) -> None:
    async def first_hangs(request: ModelRequest) -> str:
        if '"task":"slow"' in request.turns[0].text:
            await anyio.Event().wait()
        return "fast answer"

    lead, _ = scripted_lead(
        {"w": first_hangs},
        [definition("w")],
        tmp_path,
        delegation_policy=DelegationPolicy(max_seconds=ROOMY),
    )
    result = await lead.parallel_delegate([("w", "slow"), ("w", "quick")])
    assert result.statuses == ("stopped", "completed")
    assert [o["stop_reason"] for o in result.outcomes] == ["time_limit", "complete"]
    assert result.run.stop_reason == "delegation_stopped"
    records = lead.list_subagents()
    assert all(r.limits is not None and r.limits.max_seconds == ROOMY for r in records)
