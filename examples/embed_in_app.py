"""Embed a lead agent in an async application that owns the event loop.

The app runs a LeadAgent over the definitions in ``examples/agents``, streams every event
to its own handler (here: a per-agent activity log), and reads the per-delegation records
afterwards. The same code runs on asyncio and on trio, because the runtime only uses anyio.

    python examples/embed_in_app.py            # both backends, one after the other
    python examples/embed_in_app.py trio       # just one

Offline: the model is the deterministic ``test`` provider unless you pass another spec
as the second argument (e.g. ``openai/gpt-4.1-mini`` with OPENAI_API_KEY set).
"""

from __future__ import annotations

import sys
from collections import Counter
from contextlib import aclosing
from pathlib import Path

import anyio

from deputy_runtime import (
    Event,
    LeadAgent,
    Permissions,
    UsageLimits,
    agent_definitions,
    chat,
    tools_file,
)

HERE = Path(__file__).resolve().parent


class ActivityLog:
    """The app's own event handler: counts what each agent did, prints milestones."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str]] = Counter()

    def __call__(self, event: Event) -> None:
        who = event.agent_name or event.agent_id
        self.counts[(who, type(event).__name__)] += 1
        kind = type(event).__name__
        if kind in ("DelegationStart", "DelegationEnd"):
            status = getattr(event, "status", "started")
            print(f"  {kind:<15} {who:<14} {status}  (delegation {event.delegation_id})")


async def main(model: str = "test") -> int:
    # Sub-agents take their tools from this registry, scoped to the repository root.
    registry = {t.name: t for t in tools_file(HERE.parent)}
    definitions = agent_definitions(HERE / "agents", tools=registry, markdown=True)
    lead = LeadAgent(
        chat(model),
        definitions,
        tools=[registry["read_file"], registry["list_files"]],
        permissions=Permissions(mode="standard"),
        usage_limits=UsageLimits(max_requests=60),
        working_dir=HERE.parent,
    )
    log = ActivityLog()
    async with aclosing(lead.run_stream("Review the examples directory")) as events:
        async for event in events:
            log(event)
    result = lead.last_result
    assert result is not None
    print(f"  lead stopped: {result.stop_reason}; usage: {result.usage.requests} requests")
    for record in lead.list_subagents():
        why = f"  ({record.error.splitlines()[0][:70]}...)" if record.error else ""
        print(f"  {record.agent_name:<14} {record.status:<10} {record.stop_reason}{why}")
    return 0 if result.stop_reason == "complete" else 1


if __name__ == "__main__":
    backends = [a for a in sys.argv[1:2] if a in ("asyncio", "trio")] or ["asyncio", "trio"]
    spec = sys.argv[2] if len(sys.argv) > 2 else "test"
    status = 0
    for backend in backends:
        print(f"[{backend}]")
        status |= anyio.run(main, spec, backend=backend)
    sys.exit(status)
