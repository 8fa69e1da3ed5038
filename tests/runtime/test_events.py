"""Events: one JSON-encodable tagged union, and the JSON-lines log writer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deputy_runtime import Agent, Chat, EventLogWriter, decode_event, encode_event, tool
from deputy_runtime.chat import ScriptedProvider, reply, tool_call

pytestmark = pytest.mark.anyio


@tool(read_only=True)
def echo(text: str) -> str:
    """Echo text."""
    return text


async def test_every_event_round_trips_through_json(tmp_path: Path) -> None:
    provider = ScriptedProvider({"a": [tool_call("echo", {"text": "hi"}), reply("bye")]})
    agent = Agent(Chat(provider), tools=[echo], name="a")
    events = [e async for e in agent.run_stream("go")]
    kinds = [type(e).__name__ for e in events]
    assert kinds[0] == "RunStart"
    assert kinds[-2:] == ["UsageEvent", "StopEvent"]
    for event in events:
        data = encode_event(event)
        assert decode_event(data) == event
        parsed: dict[str, Any] = json.loads(data)
        assert parsed["agent_id"] == agent.agent_id
        assert parsed["run_id"] == events[0].run_id
        assert parsed["agent_id"].startswith("agent_")
        assert parsed["run_id"].startswith("run_")

    log = tmp_path / "events.jsonl"
    with EventLogWriter(log) as writer:
        for event in events:
            writer(event)
    lines = log.read_bytes().splitlines()
    assert [decode_event(line) for line in lines] == events


def test_writer_needs_one_target() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        EventLogWriter()


async def test_on_event_receives_every_event_and_a_failing_sink_is_raised_after() -> None:
    provider = ScriptedProvider({"a": [tool_call("echo", {"text": "x"}), reply("done")]})
    agent = Agent(Chat(provider), tools=[echo], name="a")
    seen: list[Any] = []
    result = await agent.run("go", on_event=seen.append)
    assert [type(e).__name__ for e in seen][-1] == "StopEvent"
    assert result.response == "done"

    def broken(event: Any) -> None:
        raise RuntimeError("display crashed")

    provider2 = ScriptedProvider({"a": [tool_call("echo", {"text": "x"}), reply("done")]})
    agent2 = Agent(Chat(provider2), tools=[echo], name="a")
    with pytest.raises(RuntimeError, match="display crashed"):
        await agent2.run("go", on_event=broken)
    # The run itself finished: the tool ran and the model answered.
    assert agent2.last_result is not None
    assert agent2.last_result.response == "done"
    provider2.assert_complete()
