"""Runtime behaviours found while building ``deputy-runtime run`` (now fixed; kept as
regression tests)."""

from __future__ import annotations

import anyio
import pytest

from deputy_runtime import LeadAgent, UsageLimits, agent_definition, chat
from deputy_runtime.chat import ModelRequest

pytestmark = pytest.mark.anyio


async def _slow_answer(request: ModelRequest) -> str:
    await anyio.sleep(0.05)  # responders overlap, so their shares are reserved together
    return "done"


async def test_parallel_delegate_never_dispatches_a_zero_request_share() -> None:
    worker = agent_definition("worker", "Answers.", "Answer.")
    lead = LeadAgent(chat("scripted", script={"worker": _slow_answer}), [worker])
    batch = await lead.parallel_delegate(
        [("worker", f"task {i}") for i in range(3)],
        max_active=3,
        usage_limits=UsageLimits(max_requests=2),
    )
    assert batch.run.usage.requests == 2  # the budget itself holds either way
    assert batch.statuses == ("completed", "completed", "not_started")
