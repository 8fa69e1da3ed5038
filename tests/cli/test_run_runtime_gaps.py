"""Runtime behaviours found while building ``deputy-runtime run``, for the lead to fix.

Marked ``xfail(strict=True)``: they pass (and so fail the suite, prompting removal of the
mark) once the runtime is fixed.
"""

from __future__ import annotations

import anyio
import pytest

from deputy_runtime import LeadAgent, UsageLimits, agent_definition, chat
from deputy_runtime.chat import ModelRequest

pytestmark = pytest.mark.anyio


async def _slow_answer(request: ModelRequest) -> str:
    await anyio.sleep(0.05)  # responders overlap, so their shares are reserved together
    return "done"


@pytest.mark.xfail(
    strict=True,
    reason="parallel_delegate dispatches a responder whose request share is 0 while the "
    "other shares are still reserved; deputy sizes waves by the remaining request budget, "
    "so such a task should stay not_started (issue 5: scheduling keeps slots busy but "
    "must check live reservations, not only usage, before dispatching)",
)
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
