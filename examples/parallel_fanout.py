"""Fan one definition out over many inputs under a shared budget.

``LeadAgent.parallel_delegate`` runs stateless sub-agents (no tools; one request each),
``max_active`` at a time. The batch's ``usage_limits`` are reserved per responder before
it starts, so the batch can never exceed them: with 12 reviews and a budget of 8
requests, 8 are classified and the other 4 are not (``not_started``, or ``stopped`` with
``request_limit`` when one was admitted while the last shares were still reserved) -
there is never a 9th request.

    python examples/parallel_fanout.py [asyncio|trio]

Offline: the model is the ``scripted`` provider with a tiny keyword classifier standing
in for a real model, so the output is deterministic.
"""

from __future__ import annotations

import json
import sys

import anyio

from deputy_runtime import LeadAgent, UsageLimits, agent_definition, chat
from deputy_runtime.chat import ModelRequest

REVIEWS = [
    "Great battery life, I love it",
    "Broke after two days, terrible",
    "It is fine, does the job",
    "Excellent screen and great speakers",
    "Terrible support, never again",
    "Okay for the price",
    "Love the design",
    "Awful keyboard",
    "Works as described",
    "Great value, excellent build",
    "Bad packaging, broken on arrival",
    "Fine",
]
BUDGET = UsageLimits(max_requests=8)


def classify(request: ModelRequest) -> str:
    """Stands in for a model: the brief arrives as deputy_delegation_v1 JSON."""
    brief = json.loads(request.turns[-1].text)["brief"]["task"].lower()
    if any(w in brief for w in ("great", "love", "excellent")):
        return "positive"
    if any(w in brief for w in ("terrible", "awful", "bad", "broke")):
        return "negative"
    return "neutral"


async def main() -> int:
    sentiment = agent_definition(
        "sentiment",
        "Classifies one product review as positive, negative or neutral.",
        "Answer with exactly one word: positive, negative or neutral.",
    )
    lead = LeadAgent(chat("scripted", script={"sentiment": classify}), [sentiment])
    batch = await lead.parallel_delegate(
        [("sentiment", review) for review in REVIEWS], max_active=3, usage_limits=BUDGET
    )
    for review, status, result in zip(REVIEWS, batch.statuses, batch.results, strict=True):
        label = (result.response if result is not None else "") or "-"
        print(f"{status:<12} {label:<9} {review}")
    usage = batch.run.usage
    print(f"batch: {batch.run.stop_reason}; {usage.requests} of {BUDGET.max_requests} requests")
    assert usage.requests <= (BUDGET.max_requests or 0)  # the guarantee this example shows
    return 0


if __name__ == "__main__":
    backend = sys.argv[1] if len(sys.argv) > 1 else "asyncio"
    sys.exit(anyio.run(main, backend=backend))
