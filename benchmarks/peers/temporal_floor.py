"""The Temporal floor of the delegation benchmark: the same workflow shape with no agent.

A lead workflow and one child workflow per delegation, every "model request" an activity
returning a canned string at once, on Temporal's own default data converter and
sandboxed runner. It makes the same activities and child workflows as the agent
contenders (``seq``: a lead request before each delegation and one at the end; ``par``:
one request, N children started together, one request), so the difference between it
and an agent contender is what the agent framework adds on top of Temporal.

Imported by name (``temporal_floor``) so Temporal's workflow sandbox can re-import it.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import activity, workflow

CHILD_ANSWER = "subagent-done"
_TIMEOUT = timedelta(minutes=1)

__all__ = ["FloorChild", "FloorLead", "model_request"]


@activity.defn(name="floor_model_request")
async def model_request(who: str) -> str:
    """A canned model reply."""
    return CHILD_ANSWER if who == "child" else "lead-turn"


@workflow.defn(name="FloorChild")
class FloorChild:
    """One delegation: one model request."""

    @workflow.run
    async def run(self, task: str) -> str:
        """Answer ``task`` with one activity."""
        return await workflow.execute_activity(
            model_request, "child", start_to_close_timeout=_TIMEOUT
        )


@workflow.defn(name="FloorLead")
class FloorLead:
    """The lead: ``"<seq|par> <n>"`` delegations, then ``done:K``."""

    @workflow.run
    async def run(self, prompt: str) -> str:
        """Run the delegations the prompt asks for."""
        mode, _, count = prompt.partition(" ")
        n = int(count)
        prefix = workflow.info().workflow_id

        async def delegate(i: int) -> str:
            return await workflow.execute_child_workflow(
                FloorChild.run, f"task {i}", id=f"{prefix}/{i}"
            )

        async def lead_request() -> None:
            await workflow.execute_activity(model_request, "lead", start_to_close_timeout=_TIMEOUT)

        results: list[str] = []
        if mode == "seq":
            for i in range(n):
                await lead_request()
                results.append(await delegate(i))
        elif n:
            await lead_request()
            results = list(await asyncio.gather(*(delegate(i) for i in range(n))))
        await lead_request()
        return f"done:{sum(1 for r in results if r == CHILD_ANSWER)}"
