"""Typed results from a fan-out: a definition with an output schema.

The ``triage`` definition declares ``output_schema=Ticket`` (a ``msgspec.Struct``): each
responder's final answer must be JSON of that shape. The stand-in model answers one
ticket in prose first; the runtime sends that answer back with what was wrong, the model
answers again, and ``batch.outputs`` holds one ``Ticket`` per input, in input order.

    python examples/structured_results.py [asyncio|trio]

Offline: the model is the ``scripted`` provider with a tiny keyword rule standing in for
a real model, so the output is deterministic.
"""

from __future__ import annotations

import json
import sys

import anyio
import msgspec

from deputy_runtime import LeadAgent, agent_definition, chat
from deputy_runtime.chat import ModelRequest

TICKETS = [
    "The app crashes when I upload a photo",
    "Please add a dark mode",
    "Login fails with error 500 since this morning",
]


class Ticket(msgspec.Struct, frozen=True):
    kind: str  # "bug" or "feature"
    urgent: bool


def triage(request: ModelRequest) -> str:
    """Stands in for a model: the brief arrives as deputy_delegation_v1 JSON."""
    text = json.loads(request.turns[0].text)["brief"]["task"].lower()
    retried = len(request.turns) > 1  # the runtime sent an answer back
    if "dark mode" in text and not retried:
        return "This is a feature request, not urgent."  # prose: rejected, then retried
    kind = "feature" if "add" in text else "bug"
    return json.dumps({"kind": kind, "urgent": "500" in text or "crash" in text})


async def main() -> int:
    definition = agent_definition(
        "triage",
        "Classifies one support ticket.",
        "Classify the ticket.",
        output_schema=Ticket,
    )
    lead = LeadAgent(chat("scripted", script={"triage": triage}), [definition])
    batch = await lead.parallel_delegate([("triage", ticket) for ticket in TICKETS])
    for ticket, output in zip(TICKETS, batch.outputs, strict=True):
        assert isinstance(output, Ticket)  # typed: an instance of the schema's type
        print(f"{output.kind:<8} urgent={output.urgent!s:<5} {ticket}")
    print(f"batch: {batch.run.stop_reason}; {batch.run.usage.requests} requests")
    return 0


if __name__ == "__main__":
    backend = sys.argv[1] if len(sys.argv) > 1 else "asyncio"
    sys.exit(anyio.run(main, backend=backend))
