"""Two worker processes, one exclusive resource and one budget, kept in Redis.

Each worker is a separate OS process running its own LeadAgent. Both delegate to a
``deployer`` sub-agent whose work must never overlap (an exclusive resource on the key
``"staging"``) and both spend from one shared budget of 16 requests. Redis keeps the
lease and the budget, so the exclusivity and the limit hold across the processes:

* every delegation takes the lease and its share of the budget in one round trip,
  waits while the other process holds the key, and gives both back in one round trip;
* the fencing token each holder gets is strictly increasing across both processes;
* the budget's ``used`` is exactly what both workers used: each lead's own two requests
  and its two delegations' four.

    python examples/redis_two_workers.py redis://127.0.0.1:6379/0 [asyncio|trio]

Needs the ``redis`` extra (``pip install '.[redis]'``) and a Redis server.
Offline otherwise: the models are scripted, so no API key is needed.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
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
from deputy_runtime.chat import ModelRequest, ScriptedProvider, tool_call, tool_calls
from deputy_runtime.redis import RedisBudget, RedisCoordinator
from deputy_runtime.runtime import DelegationContext

NAMESPACE = "example"
LIMIT = 16


def deployer_turn(request: ModelRequest) -> Any:
    """The deployer calls its ``deploy`` tool once, then reports."""
    if any(getattr(c, "name", None) == "deploy" for t in request.turns for c in t.contents):
        return "deployed"
    return tool_call("deploy", {})


async def worker(url: str, budget: str, number: int) -> None:
    def resources(
        agent: Any, definition: AgentDefinition, context: DelegationContext
    ) -> DelegationResources:
        def deploy() -> str:
            # A real resource would refuse writes carrying a token older than the newest
            # it has seen; here the token is only printed.
            print(f"worker {number}: deploying with fencing token {context.lease_token}")
            return "ok"

        tool = Tool(
            name="deploy",
            description="Deploys to staging.",
            parameters={"type": "object", "properties": {}},
            function=deploy,
        )
        return DelegationResources(tools=(tool,))

    # The host opens the connection (async with) and closes it after the lead's run.
    async with RedisCoordinator(
        url, budget_name=budget, limits={"requests": LIMIT}, namespace=NAMESPACE
    ) as redis:
        calls = [
            ("delegate_to_agent", {"agent_name": "deployer", "task": f"deploy #{i}"})
            for i in (1, 2)
        ]
        provider = ScriptedProvider(
            {"lead": [tool_calls(*calls), "both deployed"], "deployer": deployer_turn}
        )
        lead = LeadAgent(
            Chat(provider),
            [AgentDefinition("deployer", description="Deploys.", prompt="Deploy.", max_requests=2)],
            delegation_policy=DelegationPolicy(
                resource_modes=(
                    ExclusiveResource("staging", wait=True, backend=redis.leases),
                    OwnedResources(resources),
                )
            ),
            shared_budget=redis.budget,
        )
        await lead.run("Deploy twice.")
        for record in lead.list_subagents():
            print(f"worker {number}: {record.status}, {record.usage.requests} requests")


async def report(url: str, budget: str) -> None:
    async with RedisBudget(url, budget, {"requests": LIMIT}, namespace=NAMESPACE) as ledger:
        state = await ledger.state()
    print(
        f"budget: used {state.used.requests} of {LIMIT} requests, "
        f"{state.reserved.requests} reserved, {state.remaining.requests} remaining"
    )


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: redis_two_workers.py REDIS_URL [asyncio|trio]")
    url = sys.argv[1]
    backend = sys.argv[2] if len(sys.argv) > 2 else "asyncio"
    if len(sys.argv) > 4 and sys.argv[3] == "--worker":
        anyio.run(worker, url, sys.argv[4], int(sys.argv[5]), backend=backend)
        return
    budget = f"two-workers-{uuid.uuid4().hex[:8]}"
    processes = [
        subprocess.Popen([sys.executable, __file__, url, backend, "--worker", budget, str(n)])
        for n in (1, 2)
    ]
    for process in processes:
        if process.wait() != 0:
            sys.exit(f"a worker failed with exit status {process.returncode}")
    anyio.run(report, url, budget, backend=backend)


if __name__ == "__main__":
    main()
