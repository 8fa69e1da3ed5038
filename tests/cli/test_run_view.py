"""The run views on real event streams: tree folding, clipping, the summary table.

Events come from real lead runs on the offline ``scripted`` provider; the views write to
in-memory text streams.
"""

from __future__ import annotations

import io
import itertools
import re
from typing import Any

import anyio
import pytest

from deputy_runtime import LeadAgent, UsageLimits, agent_definition, chat
from deputy_runtime._cli.view import LiveView, PlainView, RunState, _clip, summary_table, tree_lines
from deputy_runtime.chat import reply, tool_calls
from deputy_runtime.runtime import (
    CompactionEnd,
    CompactionStart,
    DelegationStart,
    Event,
    McpLogEvent,
    McpProgressEvent,
    McpSamplingEvent,
)

pytestmark = pytest.mark.anyio


async def _events(max_requests: int = 10) -> tuple[LeadAgent, list[Event]]:
    """A lead delegating to two agents in one turn; ``beta`` fails its permission ceiling."""
    calls = [
        ("delegate_to_agent", {"agent_name": name, "task": f"job for {name}"})
        for name in ("alpha", "beta")
    ]
    script = {
        "lead": [tool_calls(*calls), reply("all done")],
        "alpha": [reply("alpha answer")],
        "beta": [reply("beta answer")],
    }
    definitions = [
        agent_definition("alpha", "A.", "A.", max_requests=2),
        agent_definition("beta", "B.", "B.", max_requests=2, permission_mode="full"),
    ]
    lead = LeadAgent(
        chat("scripted", script=script),
        definitions,
        usage_limits=UsageLimits(max_requests=max_requests),
    )
    events = [event async for event in lead.run_stream("Do the jobs")]
    return lead, events


async def test_tree_has_the_lead_and_every_delegation_including_setup_failures() -> None:
    lead, events = await _events()
    state = RunState()
    for event in events:
        state.apply(event)
    assert state.lead is not None
    nodes = {n.agent_name: n for n in state.delegations()}
    assert nodes["alpha"].status == "completed"
    # beta asks for 'full' under a 'standard' lead: it fails in setup and never starts,
    # but the tree still shows it.
    assert nodes["beta"].status == "failed"
    assert nodes["beta"].stop_reason == "setup_error"
    lines = tree_lines(state, state.now(), colour=False)
    assert re.match(r"^lead\s+completed\s", lines[1])
    assert {lines[2][:3], lines[3][:3]} == {"├─ ", "└─ "}
    ascii_lines = tree_lines(state, state.now(), colour=False, unicode=False)
    assert {ascii_lines[2][:3], ascii_lines[3][:3]} == {"|- ", "`- "}
    assert lead.last_result is not None
    assert state.lead.live_requests() == lead.last_result.usage.requests == 3


async def test_summary_table_matches_the_records() -> None:
    lead, _ = await _events()
    records = lead.list_subagents()
    assert lead.last_result is not None
    table = summary_table(records, lead.last_result)
    rows = table.splitlines()
    assert rows[0].split() == [
        "delegation",
        "agent",
        "status",
        "stop",
        "reason",
        "requests",
        "tokens",
        "cost",
    ]
    by_agent = {r.split()[1]: r.split() for r in rows[2:-1]}
    assert by_agent["lead"][:4] == ["-", "lead", "-", "complete"]
    assert by_agent["alpha"][2:5] == ["completed", "complete", "1/2"]
    assert by_agent["beta"][2:4] == ["failed", "setup_error"]
    assert rows[-1].split()[:4] == ["total", "lead", "+", "subagents"]
    assert lead.last_result is not None
    assert rows[-1].split()[4] == str(lead.last_result.usage.requests)
    # Each row is what that run used itself: the rows add up to the total.
    requests = [int(r.split()[4].split("/")[0]) for r in rows[2:-1]]
    tokens = [int(r.split()[5]) for r in rows[2:-1]]
    assert sum(requests) == lead.last_result.usage.requests
    assert sum(tokens) == lead.last_result.usage.total_tokens == int(rows[-1].split()[5])


async def test_plain_view_prints_one_line_per_milestone() -> None:
    _, events = await _events()
    out = io.StringIO()
    view = PlainView(out, RunState())
    for event in events:
        view.handle(event)
    text = out.getvalue()
    assert "\x1b" not in text
    assert re.search(r"alpha: delegation started \[delegation_[0-9a-f]{8}\]", text)
    assert re.search(r"alpha: delegation completed \(complete\)", text)
    assert re.search(r"beta: delegation failed \(setup_error\) .*: Sub-agent permission", text)
    assert text.splitlines()[-1].endswith("lead: run ended (complete) 3 requests, 45 tokens")


async def test_live_view_moves_back_over_its_previous_frame() -> None:
    _, events = await _events()
    out = io.StringIO()
    view = LiveView(out, RunState(), colour=True)
    for event in events:
        view.handle(event)
    view.close()
    text = out.getvalue()
    frames = text.split("\x1b[?25l")[1:]
    assert len(frames) >= 3
    for previous, frame in itertools.pairwise(frames):
        drawn = previous.count("\n")
        assert frame.startswith(f"\x1b[{drawn}F"), (previous, frame)
    assert text.endswith("\x1b[?25h")


async def test_a_definitions_colour_draws_its_delegations_name() -> None:
    _, events = await _events()
    state = RunState(colours={"alpha": "orange", "beta": "cyan"})
    for event in events:
        state.apply(event)
    lines = tree_lines(state, state.now(), colour=True)
    by_agent = {re.sub(r"\x1b\[[0-9;]*m", "", line).split()[1]: line for line in lines[2:]}
    # The name only, after the tree's branch, in its colour; the columns still line up.
    assert re.match(r"^(├─ |└─ )\x1b\[38;5;208malpha\x1b\[0m ", by_agent["alpha"])
    assert re.match(r"^(├─ |└─ )\x1b\[36mbeta\x1b\[0m ", by_agent["beta"])
    plain = tree_lines(state, state.now(), colour=False)
    assert [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in lines] == plain
    assert not any("\x1b" in line for line in plain)  # NO_COLOR: no colour at all


def test_clip_counts_only_visible_characters() -> None:
    coloured = "ab\x1b[32mcdef\x1b[0mgh"
    assert _clip(coloured, 100) == coloured
    clipped = _clip(coloured, 4)
    assert re.sub(r"\x1b\[[0-9;]*m", "", clipped) == "abcd"
    assert clipped.endswith("\x1b[0m")  # colour is reset after a cut


def test_views_survive_a_closed_pipe() -> None:
    class Closed(io.StringIO):
        def write(self, s: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

        def fileno(self) -> int:
            raise io.UnsupportedOperation

    _, events = anyio.run(_events)
    view = PlainView(Closed(), RunState())
    for event in events:
        view.handle(event)  # must not raise: the sink runs inside the agents' tasks


async def test_mcp_progress_shows_in_the_tree_and_warnings_in_the_plain_log() -> None:
    _, events = await _events()
    start = next(e for e in events if isinstance(e, DelegationStart) and e.agent_name == "alpha")
    ids: dict[str, Any] = {
        "agent_id": start.agent_id,
        "agent_name": start.agent_name,
        "run_id": start.run_id,
        "delegation_id": start.delegation_id,
        "parent_agent_id": start.parent_agent_id,
        "parent_run_id": start.parent_run_id,
    }
    at = events.index(start) + 1
    mcp_events: list[Event] = [
        McpProgressEvent(**ids, server="probe", tool="mcp__probe__count", progress=2, total=3),
        McpLogEvent(**ids, server="probe", level="info", logger="counter", data="quiet"),
        McpLogEvent(**ids, server="probe", level="warning", logger="counter", data="disk low"),
        McpSamplingEvent(**ids, server="probe", model="m", input_tokens=7, output_tokens=3),
        McpSamplingEvent(**ids, server="probe", error="the run's budget is spent"),
    ]
    state = RunState()
    for event in events[:at] + mcp_events[:1]:
        node = state.apply(event)
    assert node is not None
    assert node.last_tool == "mcp__probe__count 2/3"

    out = io.StringIO()
    view = PlainView(out, RunState())
    for event in events[:at] + mcp_events + events[at:]:
        view.handle(event)
    text = out.getvalue()
    assert "alpha: mcp probe counter warning: disk low" in text
    assert "quiet" not in text
    # A refused sampling request is a line; an answered one is only in the usage.
    assert "alpha: mcp probe sampling refused: the run's budget is spent" in text
    assert text.count("sampling") == 1


async def test_a_compaction_shows_in_the_tree_and_the_plain_log() -> None:
    _, events = await _events()
    start = next(e for e in events if isinstance(e, DelegationStart) and e.agent_name == "alpha")
    ids: dict[str, Any] = {
        "agent_id": start.agent_id,
        "agent_name": start.agent_name,
        "run_id": start.run_id,
        "delegation_id": start.delegation_id,
        "parent_agent_id": start.parent_agent_id,
        "parent_run_id": start.parent_run_id,
    }
    at = events.index(start) + 1
    begin = CompactionStart(
        **ids, strategy="summarize", tokens=1700, window=2000, threshold=1600, turns=40
    )
    end = CompactionEnd(
        **ids,
        strategy="summarize",
        tokens_before=1700,
        tokens_after=600,
        turns_before=40,
        turns_after=9,
        requests=1,
    )
    state = RunState()
    for event in [*events[:at], begin]:
        node = state.apply(event)
    assert node is not None
    assert node.last_tool == "compacting the conversation (summarize)"
    out = io.StringIO()
    view = PlainView(out, RunState())
    for event in [*events[:at], begin, end, *events[at:]]:
        view.handle(event)
    assert (
        "alpha: compacted (summarize): ~1700 -> ~600 tokens, 40 -> 9 turns, 1 request\n"
        in out.getvalue()
    )
