"""A worker process running a real LeadAgent on Redis (run as a module, not collected).

Usage: ``python -m tests.redis.delegation_worker BACKEND MODE JSON_ARGS``; prints JSON
lines (the last one is its result).

Modes:

* ``lease``: one lead, ``delegations`` parallel ``delegate_to_agent`` calls in one turn
  on the exclusive ``key`` (waiting) with a shared budget on the same connection (so
  the combined path runs). Each subagent's owned tool appends ``start TOKEN ID`` and
  ``end TOKEN ID`` to ``file`` (one ``O_APPEND`` write each) with its fencing token.
* ``budget``: one lead with the shared budget ``name`` (``limit`` requests) fans
  ``tasks`` tasks out with ``parallel_delegate``; prints the provider calls it made and
  the requests its records add up to.
* ``fanout``: one lead with the shared budget ``name`` whose model asks for ``tasks``
  delegations in one turn and then answers; prints every provider call (the lead's
  own included) and what its run counted.
* ``hold``: one delegation on ``key`` with the shared budget; its tool prints
  ``{"token": ...}`` and then waits forever (the test kills the process).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio

from deputy_runtime import (
    AgentDefinition,
    Chat,
    DelegationPolicy,
    DelegationResources,
    ExclusiveResource,
    LeadAgent,
    OwnedResources,
    Tool,
)
from deputy_runtime.chat import ScriptedProvider, tool_call, tool_calls
from deputy_runtime.chat._types import AssistantTurn, ModelRequest
from deputy_runtime.redis import RedisCoordinator
from deputy_runtime.runtime import DelegationContext, UsageLimits

DELEGATE = "delegate_to_agent"


def worker_turn(request: ModelRequest) -> AssistantTurn | str:
    """A subagent that calls its ``work`` tool once, then answers."""
    if any(getattr(c, "name", None) == "work" for t in request.turns for c in t.contents):
        return "done"
    return tool_call("work", {})


def coordinator(args: dict[str, Any]) -> RedisCoordinator:
    return RedisCoordinator(
        args["url"],
        budget_name=args.get("name", "lease-budget"),
        limits={"requests": args.get("limit", 1_000_000)},
        namespace=args["namespace"],
        lease_ttl=args.get("ttl", 5.0),
        reserve_ttl=args.get("ttl", 5.0),
    )


async def lease_mode(args: dict[str, Any]) -> dict[str, Any]:
    fd = os.open(args["file"], os.O_WRONLY | os.O_APPEND)
    try:

        def resources(
            agent: Any, definition: AgentDefinition, context: DelegationContext
        ) -> DelegationResources:
            async def work() -> str:
                line = f"{context.lease_token} {context.delegation_id}"
                os.write(fd, f"start {line}\n".encode())
                for _ in range(3):  # let the other delegations of this process run
                    await anyio.sleep(0)
                os.write(fd, f"end {line}\n".encode())
                return "worked"

            tool = Tool(
                name="work",
                description="Does the exclusive work.",
                parameters={"type": "object", "properties": {}},
                function=work,
            )
            return DelegationResources(tools=(tool,))

        async with coordinator(args) as coord:
            calls = tool_calls(
                *[
                    (DELEGATE, {"agent_name": "worker", "task": f"t{i}"})
                    for i in range(args["delegations"])
                ]
            )
            provider = ScriptedProvider({"lead": [calls, "all done"], "worker": worker_turn})
            policy = DelegationPolicy(
                resource_modes=(
                    ExclusiveResource(args["key"], wait=True, backend=coord.leases),
                    OwnedResources(resources),
                )
            )
            lead = LeadAgent(
                Chat(provider),
                [AgentDefinition("worker", description="w", prompt="w")],
                delegation_policy=policy,
                shared_budget=coord.budget,
                usage_limits=UsageLimits(max_requests=None),
            )
            result = await lead.run("go")
            records = lead.list_subagents()
    finally:
        os.close(fd)
    return {
        "stop_reason": result.stop_reason,
        "statuses": sorted({f"{r.status} {r.stop_reason} {r.error}"[:300] for r in records}),
        "completed": sum(r.status == "completed" for r in records),
        "requests": sum(r.usage.requests for r in records),
        "run_requests": result.usage.requests,
    }


async def budget_mode(args: dict[str, Any]) -> dict[str, Any]:
    calls = 0

    def answer(request: ModelRequest) -> str:
        nonlocal calls
        calls += 1
        return "answer"

    async with coordinator(args) as coord:
        provider = ScriptedProvider({"worker": answer})
        lead = LeadAgent(
            Chat(provider),
            [AgentDefinition("worker", description="w", prompt="w")],
            shared_budget=coord.budget,
            usage_limits=UsageLimits(max_requests=None),
        )
        tasks = [("worker", f"t{i}") for i in range(args["tasks"])]
        result = await lead.parallel_delegate(tasks, max_active=args["tasks"])
    return {
        "calls": calls,
        "requests": sum(r.usage.requests for r in result.results if r is not None),
        "completed": result.statuses.count("completed"),
        "stop_reason": result.run.stop_reason,
    }


async def fanout_mode(args: dict[str, Any]) -> dict[str, Any]:
    calls = 0

    def answer(request: ModelRequest) -> str:
        nonlocal calls
        calls += 1
        return "answer"

    def lead_turn(request: ModelRequest) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            return tool_calls(
                *[
                    (DELEGATE, {"agent_name": "worker", "task": f"t{i}"})
                    for i in range(args["tasks"])
                ]
            )
        return "done"

    async with coordinator(args) as coord:
        provider = ScriptedProvider({"lead": lead_turn, "worker": answer})
        lead = LeadAgent(
            Chat(provider),
            [AgentDefinition("worker", description="w", prompt="w")],
            shared_budget=coord.budget,
            usage_limits=UsageLimits(max_requests=None),
            max_active_delegations=None,
        )
        result = await lead.run("go")
        records = lead.list_subagents()
    return {
        "calls": calls,
        "run_requests": result.usage.requests,
        "stop_reason": result.stop_reason,
        "statuses": sorted({f"{r.status} {r.stop_reason}" for r in records}),
        "completed": sum(r.status == "completed" for r in records),
    }


async def hold_mode(args: dict[str, Any]) -> dict[str, Any]:
    async with coordinator(args) as coord:

        def resources(
            agent: Any, definition: AgentDefinition, context: DelegationContext
        ) -> DelegationResources:
            async def work() -> str:
                print(json.dumps({"token": context.lease_token}), flush=True)
                await anyio.sleep_forever()
                return "never"

            tool = Tool(
                name="work",
                description="Holds the resource.",
                parameters={"type": "object", "properties": {}},
                function=work,
            )
            return DelegationResources(tools=(tool,))

        provider = ScriptedProvider(
            {
                "lead": [tool_call(DELEGATE, {"agent_name": "worker", "task": "hold"}), "x"],
                "worker": worker_turn,
            }
        )
        policy = DelegationPolicy(
            resource_modes=(
                ExclusiveResource(args["key"], backend=coord.leases),
                OwnedResources(resources),
            )
        )
        lead = LeadAgent(
            Chat(provider),
            [AgentDefinition("worker", description="w", prompt="w", max_requests=2)],
            delegation_policy=policy,
            shared_budget=coord.budget,
        )
        await lead.run("go")
    return {"finished": True}


MODES = {"lease": lease_mode, "budget": budget_mode, "fanout": fanout_mode, "hold": hold_mode}


def main() -> None:
    backend, mode, raw = sys.argv[1:4]
    args = json.loads(raw)
    result = anyio.run(MODES[mode], args, backend=backend)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
