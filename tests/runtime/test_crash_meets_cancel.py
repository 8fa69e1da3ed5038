"""A subagent that crashes while the lead is being cancelled, holding an exclusive lease.

The crash must settle the delegation, the lease must be released, and the cancellation
must be what leaves the lead's run: never the crash, and never an exception group mixing
the two (which the caller's cancel scope would strip down to the bare crash).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from deputy_runtime import Chat, DelegationPolicy, LeadAgent
from deputy_runtime.chat import ScriptedProvider, reply
from deputy_runtime.chat._types import ModelRequest
from deputy_runtime.runtime import IN_PROCESS_LEASES
from tests.runtime.helpers import definition, delegate

pytestmark = pytest.mark.anyio


async def test_a_crash_during_cancellation_leaves_as_the_cancellation(tmp_path: Path) -> None:
    scope = anyio.CancelScope()

    async def lead_turn(request: ModelRequest) -> Any:
        if len(request.turns) > 1:
            return reply("done")
        return delegate("worker", "crash while the lead is cancelled")

    async def child(request: ModelRequest) -> Any:
        scope.cancel()
        raise RuntimeError("crash at the moment of cancellation")

    lead = LeadAgent(
        Chat(ScriptedProvider({"lead": lead_turn, "worker": child})),
        [definition("worker", max_requests=3)],
        working_dir=tmp_path,
        delegation_policy=DelegationPolicy("exclusive", resource_key="crash-key"),
    )
    with scope:
        await lead.run("go")
    assert scope.cancelled_caught
    [record] = lead.list_subagents()
    assert record.status in ("failed", "stopped"), record
    assert record.completed_at is not None
    assert "crash-key" not in IN_PROCESS_LEASES.held()
    assert lead.delegations.active == {}
    assert not lead.running
