"""Compaction: long runs stay inside their model's context window.

Everything runs the real runtime (Agent, LeadAgent, delegations, hooks, meters) on a
ScriptedProvider given a small ``context_window``. The scripts answer the compaction
requests (recognised by their system prompt) as a model would, with a short summary;
every other request gets the next scripted tool call. The assertions are on what the
provider actually received: every request it saw is measured with the same estimate the
runtime uses, and none is over the window.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deputy_runtime import (
    Agent,
    Chat,
    Compaction,
    CompactionEnd,
    CompactionStart,
    ContextWindowExceeded,
    DelegationPolicy,
    HookDecision,
    HookEvent,
    HookInput,
    Hooks,
    LeadAgent,
    ModelRequestEvent,
    RateLimitError,
    StopReason,
    UsageLimits,
)
from deputy_runtime.chat import (
    AssistantTurn,
    ContentText,
    ContentToolResult,
    ModelRequest,
    ScriptedProvider,
    Turn,
    Usage,
    estimate_tokens,
    reply,
    tool_call,
)
from deputy_runtime.runtime import (
    CompactionJob,
    DropToolResults,
    Event,
    SummarizeOldest,
    decode_event,
    encode_event,
)
from deputy_runtime.runtime._compaction import DROPPED_RESULT_TEXT, SUMMARY_HEADER
from tests.runtime.helpers import definition, delegate, delegate_results, make_tool, outcome

pytestmark = pytest.mark.anyio

#: The first words of the system prompt of every summary request.
SUMMARY_PROMPT_START = "You compact the transcript"


def is_compaction(request: ModelRequest) -> bool:
    return (request.system_prompt or "").startswith(SUMMARY_PROMPT_START)


def worker(turns: int, *, summary: str = "Looked at items so far; keep going.") -> Any:
    """A responder: ``turns`` tool calls, then a final answer; summaries when asked."""
    counter = itertools.count(1)

    def respond(request: ModelRequest) -> AssistantTurn | str:
        if is_compaction(request):
            return summary
        n = next(counter)
        if n > turns:
            return f"finished after {turns} lookups"
        return tool_call("lookup", {"item": n})

    return respond


def lookup_tool(size: int = 300) -> Any:
    return make_tool("lookup", lambda **kw: f"item {kw.get('item')}: " + "x" * size)


def assert_pairs_intact(request: ModelRequest) -> None:
    """Every tool result answers a request of the assistant turn just before it."""
    turns = request.turns
    for i, turn in enumerate(turns):
        answered = {c.request_id for c in turn.contents if isinstance(c, ContentToolResult)}
        if answered:
            assert i > 0
            assert turns[i - 1].role == "assistant"
            assert answered == {r.id for r in turns[i - 1].tool_requests}
        if turn.tool_requests and i + 1 < len(turns):
            assert {r.id for r in turn.tool_requests} == {
                c.request_id for c in turns[i + 1].contents if isinstance(c, ContentToolResult)
            }


def collect(events: list[Event]) -> Callable[[Event], None]:
    return events.append


async def test_a_200_turn_subagent_run_completes_inside_a_small_window() -> None:
    window = 2000
    provider = ScriptedProvider(
        {
            "lead": [delegate("worker", "Look up every item"), reply("all done")],
            "worker": worker(200),
        },
        context_window=window,
    )
    hooks = Hooks()
    fired: list[HookInput] = []
    hooks.add(HookEvent.PreCompact, fired.append)
    hooks.add(HookEvent.PostCompact, fired.append)
    lead = LeadAgent(
        Chat(provider),
        [definition("worker", tools=[lookup_tool()], max_requests=1000)],
        usage_limits=UsageLimits(max_requests=2000),
        hooks=hooks,
        delegation_policy=DelegationPolicy(observers=(HookEvent.PreCompact, HookEvent.PostCompact)),
    )
    events: list[Event] = []
    result = await lead.run("go", on_event=collect(events))

    assert result.stop_reason == StopReason.COMPLETE
    assert result.response == "all done"
    (record,) = lead.delegations.list_records()
    assert record.stop_reason == StopReason.COMPLETE
    (delegated,) = delegate_results(provider)
    assert outcome(delegated)["answer"] == "finished after 200 lookups"

    # No request the provider saw was over the window (compaction requests included).
    log = provider.request_log
    assert log, "the provider saw requests"
    assert max(estimate_tokens(request) for _, request in log) <= window
    worker_requests = provider.requests_for("worker")
    summaries = [r for r in worker_requests if is_compaction(r)]
    assert summaries, "the worker's conversation was compacted"
    # 200 tool turns + the final answer + the compaction requests, all counted.
    assert record.usage.requests == 201 + len(summaries)
    assert record.usage.tool_calls == 200
    assert result.usage.requests == 2 + record.usage.requests

    # The compaction events add up to the compaction requests; hooks fired around each.
    starts = [e for e in events if isinstance(e, CompactionStart) and e.agent_name == "worker"]
    ends = [e for e in events if isinstance(e, CompactionEnd) and e.agent_name == "worker"]
    assert len(starts) == len(ends) >= 1
    assert sum(e.requests for e in ends) == len(summaries)
    for end in ends:
        assert end.error is None
        assert end.tokens_after < end.tokens_before
        assert end.turns_after < end.turns_before
    pre = [h for h in fired if h.event is HookEvent.PreCompact]
    post = [h for h in fired if h.event is HookEvent.PostCompact]
    assert len(pre) == len(post) == len(starts)
    for before, after in zip(pre, post, strict=True):
        assert before.agent_name == "worker"
        assert before.delegation_id == record.delegation_id
        assert before.reason == "auto"
        assert before.context_window == window
        assert before.context_tokens is not None
        assert after.context_tokens is not None
        assert after.context_tokens < before.context_tokens

    # The task stays the first user message and tool requests keep their results.
    chat_requests = [r for r in worker_requests if not is_compaction(r)]
    task = chat_requests[0].turns[0].contents[0]
    for request in chat_requests:
        assert request.turns[0].role == "user"
        assert request.turns[0].contents[0] == task
        assert_pairs_intact(request)
    assert any(
        isinstance(c, ContentText) and c.text.startswith(SUMMARY_HEADER)
        for c in chat_requests[-1].turns[0].contents
    )


async def test_drop_tool_results_replaces_old_results_and_sends_no_extra_request() -> None:
    # Results dominate the conversation: emptying them is enough (a run whose requests
    # alone outgrow the window needs the summary strategy).
    window = 2000
    provider = ScriptedProvider({"solo": worker(15)}, context_window=window)
    agent = Agent(
        Chat(provider),
        tools=[lookup_tool(1000)],
        name="solo",
        usage_limits=UsageLimits(max_requests=100),
        compaction=Compaction(strategy=DropToolResults(keep_recent=2)),
    )
    events: list[Event] = []
    result = await agent.run("look everything up", on_event=collect(events))

    assert result.stop_reason == StopReason.COMPLETE
    assert result.usage.requests == 16  # no summary requests
    log = provider.requests_for("solo")
    assert not any(is_compaction(r) for r in log)
    assert max(estimate_tokens(r) for r in log) <= window
    ends = [e for e in events if isinstance(e, CompactionEnd)]
    assert ends
    assert all(e.strategy == "drop_tool_results" and e.requests == 0 for e in ends)
    last = log[-1]
    dropped = [
        c
        for turn in last.turns
        for c in turn.contents
        if isinstance(c, ContentToolResult) and c.value == DROPPED_RESULT_TEXT
    ]
    assert dropped
    # The newest results are never dropped; every request still has its result.
    final_results = [c for c in last.turns[-1].contents if isinstance(c, ContentToolResult)]
    assert final_results
    assert all(c.value != DROPPED_RESULT_TEXT for c in final_results)
    assert_pairs_intact(last)
    assert len(last.turns) == 2 * 15 + 1  # nothing removed, only emptied


async def test_a_window_too_small_even_after_compaction_is_refused() -> None:
    # The task alone (kept by every compaction) is bigger than the window.
    provider = ScriptedProvider({"tiny": ["never sent"]}, context_window=100)
    agent = Agent(Chat(provider), name="tiny")
    events: list[Event] = []
    result = await agent.run("x" * 2000, on_event=collect(events))
    assert result.stop_reason == StopReason.CONTEXT_WINDOW
    assert result.error is not None
    assert "context window of 100 tokens" in result.error
    assert provider.requests == 0
    assert result.usage.requests == 0

    strict = Agent(Chat(provider), name="tiny", usage_limits=UsageLimits(on_exceed="error"))
    with pytest.raises(ContextWindowExceeded) as info:
        await strict.run("y" * 2000)
    assert info.value.stop_reason == "context_window"
    assert info.value.result is strict.last_result
    assert provider.requests == 0


async def test_compaction_off_refuses_the_first_request_over_the_window() -> None:
    window = 1200
    provider = ScriptedProvider({"solo": worker(100)}, context_window=window)
    agent = Agent(
        Chat(provider),
        tools=[lookup_tool(300)],
        name="solo",
        usage_limits=UsageLimits(max_requests=200),
        compaction=Compaction(strategy=None),
    )
    result = await agent.run("go")
    assert result.stop_reason == StopReason.CONTEXT_WINDOW
    assert result.error is not None
    assert "compaction is off" in result.error
    log = provider.requests_for("solo")
    assert log
    assert max(estimate_tokens(r) for r in log) <= window
    # The refused request is the one after the last sent: it would have been over.
    refused = ModelRequest(agent.system_prompt, result.turns, log[-1].tools, {})
    assert estimate_tokens(refused) > window


async def test_thresholds_per_lead_and_per_definition() -> None:
    window = 4000
    provider = ScriptedProvider(
        {
            "lead": [delegate("plain", "a"), delegate("eager", "b"), reply("done")],
            "plain": worker(40),
            "eager": worker(40),
        },
        context_window=window,
    )
    lead = LeadAgent(
        Chat(provider),
        [
            definition("plain", tools=[lookup_tool()], max_requests=200),
            definition("eager", tools=[lookup_tool()], max_requests=200, compact_at=0.25),
        ],
        usage_limits=UsageLimits(max_requests=1000),
        compaction=Compaction(threshold=0.5),
    )
    events: list[Event] = []
    result = await lead.run("go", on_event=collect(events))
    assert result.stop_reason == StopReason.COMPLETE
    thresholds = {(e.agent_name, e.threshold) for e in events if isinstance(e, CompactionStart)}
    assert thresholds == {("plain", 2000), ("eager", 1000)}
    for name, limit in (("plain", 2000), ("eager", 1000)):
        sent = provider.requests_for(name)
        assert max(estimate_tokens(r) for r in sent) < limit


async def test_the_leads_own_conversation_is_compacted_at_its_threshold() -> None:
    window = 3000
    turns = iter([*(delegate("w", f"task {i}") for i in range(30)), reply("done")])

    def lead_model(request: ModelRequest) -> AssistantTurn | str:
        return "delegated tasks 0 to n" if is_compaction(request) else next(turns)

    provider = ScriptedProvider(
        {"lead": lead_model, "w": lambda r: "summary" if is_compaction(r) else "ok " * 60},
        context_window=window,
    )
    lead = LeadAgent(
        Chat(provider),
        [definition("w")],
        usage_limits=UsageLimits(max_requests=500),
        compaction=Compaction(threshold=0.6),
    )
    events: list[Event] = []
    result = await lead.run("go", on_event=collect(events))
    assert result.stop_reason == StopReason.COMPLETE
    assert result.response == "done"
    lead_starts = [e for e in events if isinstance(e, CompactionStart) and e.agent_name == "lead"]
    assert lead_starts
    assert all(e.threshold == 1800 for e in lead_starts)
    sent = provider.requests_for("lead")
    assert any(is_compaction(r) for r in sent)
    assert max(estimate_tokens(r) for r in sent) <= 1800
    for request in sent:
        assert_pairs_intact(request)


async def test_compaction_requests_count_against_max_requests() -> None:
    window = 1500
    provider = ScriptedProvider({"solo": worker(100)}, context_window=window)
    agent = Agent(Chat(provider), tools=[lookup_tool(300)], name="solo")
    # Find where the first compaction happens, then allow exactly the requests before it.
    events: list[Event] = []
    await agent.run("go", usage_limits=UsageLimits(max_requests=500), on_event=collect(events))
    position = next(i for i, e in enumerate(events) if isinstance(e, CompactionStart))
    sent_before = sum(1 for e in events[:position] if isinstance(e, ModelRequestEvent))
    assert sent_before > 0

    limited_provider = ScriptedProvider({"solo": worker(100)}, context_window=window)
    limited = Agent(Chat(limited_provider), tools=[lookup_tool(300)], name="solo")
    events = []
    result = await limited.run(
        "go", usage_limits=UsageLimits(max_requests=sent_before), on_event=collect(events)
    )
    assert result.stop_reason == StopReason.REQUEST_LIMIT
    assert limited_provider.requests == sent_before  # the compaction request was not sent
    (end,) = [e for e in events if isinstance(e, CompactionEnd)]
    assert end.requests == 0
    assert end.error == "compaction stopped: request_limit"


def answer(decision: HookDecision) -> Callable[[HookInput], HookDecision]:
    def hook(_: HookInput) -> HookDecision:
        return decision

    return hook


async def test_pre_compact_deny_skips_and_stop_ends_the_run() -> None:
    window = 1500
    for decision, reason in (
        (HookDecision.deny("keep it all"), StopReason.CONTEXT_WINDOW),
        (HookDecision.stop("enough"), StopReason.HOOK_REQUESTED_STOP),
    ):
        provider = ScriptedProvider({"solo": worker(100)}, context_window=window)
        hooks = Hooks()
        hooks.add(HookEvent.PreCompact, answer(decision))
        post: list[HookInput] = []
        hooks.add(HookEvent.PostCompact, post.append)
        agent = Agent(
            Chat(provider),
            tools=[lookup_tool(300)],
            name="solo",
            hooks=hooks,
            usage_limits=UsageLimits(max_requests=200),
        )
        events: list[Event] = []
        result = await agent.run("go", on_event=collect(events))
        assert result.stop_reason == reason
        assert not any(isinstance(e, CompactionStart) for e in events)
        assert post == []
        sent = provider.requests_for("solo")
        assert not any(is_compaction(r) for r in sent)
        assert max(estimate_tokens(r) for r in sent) <= window


async def test_an_unknown_window_never_compacts() -> None:
    provider = ScriptedProvider({"solo": worker(20)})  # no context_window
    agent = Agent(Chat(provider), tools=[lookup_tool(2000)], name="solo")
    events: list[Event] = []
    result = await agent.run("go", on_event=collect(events))
    assert result.stop_reason == StopReason.COMPLETE
    assert not any(isinstance(e, CompactionStart | CompactionEnd) for e in events)


async def test_the_agents_window_overrides_the_providers() -> None:
    provider = ScriptedProvider({"solo": worker(40)}, context_window=1_000_000)
    agent = Agent(
        Chat(provider),
        tools=[lookup_tool(300)],
        name="solo",
        usage_limits=UsageLimits(max_requests=200),
        compaction=Compaction(window=1500),
    )
    events: list[Event] = []
    result = await agent.run("go", on_event=collect(events))
    assert result.stop_reason == StopReason.COMPLETE
    assert {e.window for e in events if isinstance(e, CompactionStart)} == {1500}
    assert max(estimate_tokens(r) for r in provider.requests_for("solo")) <= 1500


async def test_reported_input_tokens_calibrate_the_estimate_upwards() -> None:
    # The provider reports twice the characters/4 estimate: compaction starts earlier.
    window = 3000

    def respond(request: ModelRequest) -> AssistantTurn | str:
        tokens = 2 * estimate_tokens(request)
        if is_compaction(request):
            return AssistantTurn(
                (ContentText("summary"),), msgspec_usage(tokens), finish_reason="stop"
            )
        return msgspec.structs.replace(
            tool_call("lookup", {"item": len(request.turns)}), usage=msgspec_usage(tokens)
        )

    provider = ScriptedProvider({"solo": respond}, context_window=window)
    agent = Agent(
        Chat(provider),
        tools=[lookup_tool(300)],
        name="solo",
        usage_limits=UsageLimits(max_requests=60),
    )
    result = await agent.run("go")
    assert result.stop_reason == StopReason.REQUEST_LIMIT
    chat_requests = [r for r in provider.requests_for("solo") if not is_compaction(r)]
    # What the provider counted (twice the estimate) never reached the window.
    assert max(2 * estimate_tokens(r) for r in chat_requests) <= window


def msgspec_usage(tokens: int) -> Usage:
    return Usage(requests=1, input_tokens=tokens, output_tokens=5)


async def test_a_strategy_that_parts_a_request_from_its_result_is_an_error() -> None:
    class Broken:
        name = "broken"

        async def compact(self, job: CompactionJob) -> list[Turn]:
            # Drops the assistant turn before the last results: they answer nothing.
            return [job.turns[0], *job.turns[-1:]]

    provider = ScriptedProvider({"solo": worker(50)}, context_window=1500)
    agent = Agent(
        Chat(provider),
        tools=[lookup_tool(300)],
        name="solo",
        compaction=Compaction(strategy=Broken()),
        usage_limits=UsageLimits(max_requests=100),
    )
    with pytest.raises(ValueError, match=r"compaction strategy 'broken': turn 1 answers"):
        await agent.run("go")
    assert agent.last_result is not None
    assert agent.last_result.stop_reason == StopReason.ERROR


def test_compaction_settings_are_checked() -> None:
    with pytest.raises(ValueError, match=r"Compaction.threshold must be above 0.0"):
        Compaction(threshold=0)
    with pytest.raises(ValueError, match=r"Compaction.threshold must be above 0.0 and at most 1"):
        Compaction(threshold=1.5)
    with pytest.raises(TypeError, match=r"Compaction.threshold must be a number"):
        Compaction(threshold=True)
    with pytest.raises(ValueError, match=r"Compaction.target must be at least 0.1"):
        Compaction(target=0.05)
    with pytest.raises(TypeError, match=r"Compaction.strategy must be a CompactionStrategy"):
        Compaction(strategy="summarize")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"Compaction.window must be an int"):
        Compaction(window=True)
    with pytest.raises(ValueError, match=r"Compaction.window must be between 1"):
        Compaction(window=0)
    with pytest.raises(ValueError, match=r"SummarizeOldest.recent_share"):
        SummarizeOldest(recent_share=1.0)
    with pytest.raises(ValueError, match=r"DropToolResults.keep_recent must be >= 0"):
        DropToolResults(keep_recent=-1)
    with pytest.raises(TypeError, match=r"compaction must be a Compaction or None"):
        Agent(Chat(ScriptedProvider([])), compaction=0.5)  # type: ignore[arg-type]


def test_compaction_events_round_trip() -> None:
    start = CompactionStart(
        agent_id="a", run_id="r", strategy="summarize", tokens=10, window=20, threshold=16, turns=3
    )
    end = CompactionEnd(
        agent_id="a",
        run_id="r",
        strategy="summarize",
        tokens_before=10,
        tokens_after=4,
        turns_before=9,
        turns_after=3,
        requests=1,
    )
    for event in (start, end):
        assert decode_event(encode_event(event)) == event
    assert b'"type":"compaction_start"' in encode_event(start)
    assert b'"type":"compaction_end"' in encode_event(end)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=1500), min_size=1, max_size=40),
    window=st.integers(min_value=200, max_value=3000),
    drop=st.booleans(),
)
def test_no_request_over_the_window_is_ever_sent(
    sizes: list[int], window: int, drop: bool, anyio_backend: str
) -> None:
    """Whatever the tool results and the window: every request the provider receives is
    inside the window, and a run either completes or stops with a typed reason."""
    results = iter(sizes)
    tool = make_tool("lookup", lambda **kw: "r" * next(results, 0))
    provider = ScriptedProvider({"solo": worker(len(sizes))}, context_window=window)
    strategy = DropToolResults(keep_recent=0) if drop else SummarizeOldest()
    agent = Agent(
        Chat(provider),
        tools=[tool],
        name="solo",
        usage_limits=UsageLimits(max_requests=400),
        compaction=Compaction(strategy=strategy),
    )
    result = anyio.run(agent.run, "go", backend=anyio_backend)
    assert result.stop_reason in (StopReason.COMPLETE, StopReason.CONTEXT_WINDOW)
    for _, request in provider.request_log:
        assert estimate_tokens(request) <= window


async def test_a_transcript_bigger_than_one_request_is_summarised_in_pieces() -> None:
    window = 2000
    pieces = itertools.count(1)
    calls = iter([tool_call("lookup", {"item": 1}), reply("read it all")])

    def respond(request: ModelRequest) -> AssistantTurn | str:
        if is_compaction(request):
            return f"summary of piece {next(pieces)}"
        return next(calls)

    provider = ScriptedProvider({"solo": respond}, context_window=window)
    # One result of ~5000 tokens: over the window on its own, so it is summarised away.
    agent = Agent(Chat(provider), tools=[lookup_tool(20_000)], name="solo")
    events: list[Event] = []
    result = await agent.run("read the big item", on_event=collect(events))
    assert result.stop_reason == StopReason.COMPLETE
    assert result.response == "read it all"
    (end,) = [e for e in events if isinstance(e, CompactionEnd)]
    summaries = [r for r in provider.requests_for("solo") if is_compaction(r)]
    assert end.requests == len(summaries) >= 2
    threshold = math.floor(window * 0.8)
    for i, request in enumerate(summaries):
        assert estimate_tokens(request) <= threshold
        if i:  # every piece after the first carries the summary so far
            assert f"Earlier summary:\nsummary of piece {i}" in request.turns[0].text
    final = provider.requests_for("solo")[-1]
    assert final.turns[0].text.endswith(f"summary of piece {len(summaries)}")
    assert len(final.turns) == 1  # everything after the task was summarised


async def test_a_failed_compaction_request_ends_the_run_provider_error() -> None:
    calls = worker(100)

    def respond(request: ModelRequest) -> AssistantTurn | str:
        if is_compaction(request):
            raise RateLimitError("slow down", provider="scripted", status=429)
        result: AssistantTurn | str = calls(request)
        return result

    provider = ScriptedProvider({"solo": respond}, context_window=1500)
    agent = Agent(
        Chat(provider),
        tools=[lookup_tool(300)],
        name="solo",
        usage_limits=UsageLimits(max_requests=200),
    )
    events: list[Event] = []
    result = await agent.run("go", on_event=collect(events))
    assert result.stop_reason == StopReason.PROVIDER_ERROR
    assert result.error == "compaction request failed: slow down"
    (end,) = [e for e in events if isinstance(e, CompactionEnd)]
    assert end.error == "ProviderFailure: compaction request failed: slow down"
    # The failed request was sent, so it counts; the conversation is left as it was.
    sent = provider.requests_for("solo")
    assert result.usage.requests == len(sent)
    assert len(result.turns) == end.turns_before
