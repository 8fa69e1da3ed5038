"""The continue-as-new checkpoint as pure code (no server): what a run carries into the
next run of its chain, how a lead's event log is trimmed to fit the payload limit, and
that it crosses the durable boundary intact inside ``LeadInput``."""

from __future__ import annotations

from deputy_runtime import UsageLimits, encode_event
from deputy_runtime.chat import ContentText, Turn, Usage
from deputy_runtime.runtime import Event, ModelRequestEvent, RunStart
from deputy_runtime.temporal import LeadInput, LoopCheckpoint, PermissionSpec, data_converter
from deputy_runtime.temporal._checkpoint import checkpoint_of, resume
from deputy_runtime.temporal._loop import AgentLoop, Ids


def _loop(*, lead_permissions: PermissionSpec | None = None) -> AgentLoop:
    return AgentLoop(
        ids=Ids(agent_id="agent_1", agent_name="lead", run_id="run_1"),
        model="test",
        system_prompt=None,
        tools=(),
        limits=UsageLimits(max_requests=9),
        permissions=PermissionSpec(mode="standard"),
        events=[],
        lead_permissions=lead_permissions,
    )


def _events(count: int) -> list[Event]:
    ids = {"agent_id": "agent_1", "agent_name": "lead", "run_id": "run_1"}
    first: Event = RunStart(**ids, task="t", limits=UsageLimits(9))
    return [first] + [ModelRequestEvent(**ids, index=i, model="test") for i in range(1, count)]


def test_a_checkpoint_carries_the_loop_state_into_the_next_run() -> None:
    loop = _loop(lead_permissions=PermissionSpec(mode="full"))
    loop.meter.start_request()
    loop.meter.add_response(Usage(input_tokens=7, output_tokens=3, cost_usd=0.5))
    loop.permissions = PermissionSpec(mode="readonly")
    loop.lead_permissions = PermissionSpec(mode="standard")
    turns = [Turn("user", (ContentText("task"),)), Turn("assistant", (ContentText("hi"),))]
    events = _events(5)
    checkpoint = checkpoint_of(loop, turns, 1, events=events, previous=None)
    assert (checkpoint.agent_id, checkpoint.run_id, checkpoint.requests) == ("agent_1", "run_1", 1)
    assert checkpoint.events_base == 0
    assert len(checkpoint.events) == 5  # a child's whole log
    assert checkpoint.runs == 2

    again = _loop()
    carried: list[Event] = []
    assert resume(checkpoint, again, carried) == turns
    assert again.meter.snapshot() == loop.meter.snapshot()
    assert again.meter.snapshot().cost_usd == 0.5
    assert again.permissions == PermissionSpec(mode="readonly")
    assert again.lead_permissions == PermissionSpec(mode="standard")
    assert carried == events
    # The next boundary of the chain counts on from this one.
    assert checkpoint_of(again, turns, 1, events=carried, previous=checkpoint).runs == 3


def test_a_lead_carries_the_newest_events_that_fit() -> None:
    events = _events(40)
    sizes = [len(encode_event(e)) for e in events]
    budget = sum(sizes[-10:])  # exactly the last ten fit
    first = checkpoint_of(_loop(), [], 0, events=events, previous=None, keep_bytes=budget)
    assert first.events_base == 30
    assert [e.encode() for e in first.events] == [encode_event(e) for e in events[-10:]]
    # A second trim counts the events dropped before, so offsets span the whole chain.
    more = _events(3)
    second = checkpoint_of(
        _loop(), [], 0, events=more, previous=first, keep_bytes=len(encode_event(more[-1]))
    )
    assert second.events_base == 30 + 2
    assert len(second.events) == 1


def test_a_checkpoint_crosses_the_boundary_inside_the_lead_input() -> None:
    loop = _loop()
    loop.interrupt("stop")
    checkpoint = checkpoint_of(
        loop, [Turn("user", (ContentText("task"),))], 2, events=_events(3), previous=None
    )
    request = LeadInput(task="task", model="test", sub_agents=(), checkpoint=checkpoint)
    converter = data_converter.payload_converter
    [decoded] = converter.from_payloads(converter.to_payloads([request]), [LeadInput])
    assert decoded == request
    assert isinstance(decoded.checkpoint, LoopCheckpoint)
    assert decoded.checkpoint.interrupt == "stop"
