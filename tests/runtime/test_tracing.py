"""OpenTelemetry spans of runs, delegations, model requests and tool calls.

Every test records into the SDK's real ``InMemorySpanExporter`` through a real
``TracerProvider``; nothing is mocked.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from deputy_runtime import Agent, Chat, DelegationPolicy, ProviderError, tracing
from deputy_runtime.chat import ScriptedProvider, reply, tool_call, tool_calls
from deputy_runtime.chat._types import ModelRequest
from tests.runtime.helpers import definition, delegate_many, make_tool, scripted_lead

pytestmark = pytest.mark.anyio


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on (content off) into an in-memory exporter; off again afterwards."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.configure(provider)
    try:
        yield exporter
    finally:
        tracing.disable()
        provider.shutdown()


Tree = tuple[str, tuple["Tree", ...]]


def tree(finished: tuple[ReadableSpan, ...]) -> list[Tree]:
    """The finished spans as (name, children) trees, siblings sorted by name."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in finished if s.context is not None}
    for s in finished:
        parent = s.parent.span_id if s.parent is not None else None
        by_parent.setdefault(parent if parent in ids else None, []).append(s)

    def build(s: ReadableSpan) -> Tree:
        assert s.context is not None
        children = by_parent.get(s.context.span_id, [])
        return (s.name, tuple(sorted(build(c) for c in children)))

    return sorted(build(s) for s in by_parent.get(None, []))


def tracing_provider(exporter: InMemorySpanExporter) -> TracerProvider:
    """Another provider into the same exporter (for a host's own spans)."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def named(finished: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in finished if s.name == name]


def only(finished: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    [found] = named(finished, name)
    return found


def attrs(s: ReadableSpan) -> dict[str, Any]:
    return dict(s.attributes or {})


async def test_a_lead_with_three_parallel_delegations_one_failing_one_interrupted(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    started = anyio.Event()
    release = anyio.Event()

    async def slow(request: ModelRequest) -> Any:
        started.set()
        await release.wait()
        return tool_call("noop", {}, id="call_noop")

    noop = make_tool("noop", read_only=True)
    lead, _ = scripted_lead(
        {
            "lead": [
                delegate_many(("good", "a"), ("bad", "b"), ("slow", "c")),
                reply("all done"),
            ],
            "good": ["good answer"],
            "bad": [ProviderError("model unavailable", provider="scripted")],
            "slow": slow,
        },
        [definition("good"), definition("bad"), definition("slow", tools=[noop], max_requests=3)],
        tmp_path,
        name="lead",
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(lead.run, "go")
        with anyio.fail_after(10):
            await started.wait()
        [record] = [r for r in lead.list_subagents() if r.agent_name == "slow"]
        assert lead.interrupt_subagent(record.delegation_id, "enough")
        release.set()

    finished = spans.get_finished_spans()
    delegation = ("execute_tool delegate_to_agent",)
    assert tree(finished) == [
        (
            "invoke_agent lead",
            (
                ("chat scripted", ()),
                ("chat scripted", ()),
                (*delegation, (("invoke_agent bad", (("chat scripted", ()),)),)),
                (*delegation, (("invoke_agent good", (("chat scripted", ()),)),)),
                (
                    *delegation,
                    (
                        (
                            "invoke_agent slow",
                            (("chat scripted", ()), ("execute_tool noop", ())),
                        ),
                    ),
                ),
            ),
        )
    ]
    # Every span is in one trace.
    assert len({s.context.trace_id for s in finished if s.context is not None}) == 1

    root = attrs(only(finished, "invoke_agent lead"))
    assert root["gen_ai.operation.name"] == "invoke_agent"
    assert root["gen_ai.agent.name"] == "lead"
    assert root["gen_ai.agent.id"] == lead.agent_id
    assert root["gen_ai.provider.name"] == "scripted"
    assert root["gen_ai.request.model"] == "scripted"
    assert root["deputy.stop_reason"] == "complete"
    assert lead.last_result is not None
    assert root["deputy.run.id"] == lead.last_result.run_id
    assert root["gen_ai.usage.input_tokens"] == lead.last_result.usage.input_tokens
    assert root["gen_ai.usage.output_tokens"] == lead.last_result.usage.output_tokens
    assert only(finished, "invoke_agent lead").status.status_code == trace.StatusCode.UNSET

    records = {r.agent_name: r for r in lead.list_subagents()}
    expected = {
        "good": ("completed", "complete"),
        "bad": ("failed", "provider_error"),
        "slow": ("stopped", "interrupted"),
    }
    for name, (status, stop_reason) in expected.items():
        s = only(finished, f"invoke_agent {name}")
        a = attrs(s)
        r = records[name]
        assert (a["deputy.delegation.status"], a["deputy.stop_reason"]) == (status, stop_reason)
        assert a["gen_ai.operation.name"] == "invoke_agent"
        assert a["gen_ai.agent.name"] == name
        assert a["gen_ai.agent.id"] == r.agent_id
        assert a["deputy.delegation.id"] == r.delegation_id
        assert a["deputy.run.id"] == r.run_id
        assert a["deputy.parent.agent_id"] == lead.agent_id
        assert a["deputy.parent.run_id"] == lead.last_result.run_id
        assert a["gen_ai.tool.call.id"] == r.tool_call_id
        assert a["deputy.resource_modes"] == ("shared",)
        assert a["deputy.budget.granted.max_requests"] >= 1
        assert a["deputy.usage.requests"] == r.usage.requests
        assert a["gen_ai.usage.input_tokens"] == r.usage.input_tokens
        # The delegate call's span is the delegation span's parent, with the same call id.
        parent = next(
            p
            for p in named(finished, "execute_tool delegate_to_agent")
            if p.context is not None
            and s.parent is not None
            and p.context.span_id == s.parent.span_id
        )
        assert attrs(parent)["gen_ai.tool.call.id"] == r.tool_call_id
        assert attrs(parent)["deputy.permission.decision"] == "allow"

    bad = only(finished, "invoke_agent bad")
    assert bad.status.status_code == trace.StatusCode.ERROR
    assert attrs(bad)["error.type"] == "provider_error"
    [bad_chat] = [
        s
        for s in named(finished, "chat scripted")
        if s.parent is not None
        and bad.context is not None
        and s.parent.span_id == bad.context.span_id
    ]
    assert bad_chat.status.status_code == trace.StatusCode.ERROR
    assert attrs(bad_chat)["error.type"] == "ProviderError"
    failed_call = next(
        p
        for p in named(finished, "execute_tool delegate_to_agent")
        if p.context is not None
        and bad.parent is not None
        and p.context.span_id == bad.parent.span_id
    )
    assert failed_call.status.status_code == trace.StatusCode.ERROR
    assert attrs(failed_call)["error.type"] == "ToolRejection"
    for name in ("good", "slow"):
        assert only(finished, f"invoke_agent {name}").status.status_code == trace.StatusCode.UNSET

    # The interrupted subagent's tool call was refused by the gate.
    refused = attrs(only(finished, "execute_tool noop"))
    assert refused["gen_ai.tool.name"] == "noop"
    assert refused["gen_ai.tool.call.id"] == "call_noop"
    assert refused["deputy.permission.decision"] == "deny"
    assert "deputy.tool.refusal" not in refused  # its message is content

    good_chat = next(
        s for s in named(finished, "chat scripted") if attrs(s).get("gen_ai.agent.name") == "good"
    )
    chat_attrs = attrs(good_chat)
    assert good_chat.kind == trace.SpanKind.CLIENT
    assert chat_attrs["gen_ai.operation.name"] == "chat"
    assert chat_attrs["gen_ai.provider.name"] == "scripted"
    assert chat_attrs["gen_ai.request.model"] == "scripted"
    assert chat_attrs["gen_ai.response.finish_reasons"] == ("stop",)
    assert chat_attrs["gen_ai.usage.input_tokens"] == records["good"].usage.input_tokens
    assert chat_attrs["gen_ai.usage.output_tokens"] == records["good"].usage.output_tokens

    # Content is off by default: no prompt, completion, argument or result anywhere.
    for s in finished:
        keys = set(attrs(s))
        assert not keys & {
            "gen_ai.input.messages",
            "gen_ai.output.messages",
            "gen_ai.system_instructions",
            "gen_ai.tool.call.arguments",
            "gen_ai.tool.call.result",
            "deputy.tool.refusal",
        }, s.name


async def test_parallel_delegate_responders_nest_under_the_hosts_span(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    names = ("a", "b", "c")
    lead, _ = scripted_lead(
        {n: [f"answer {n}"] for n in names}, [definition(n) for n in names], tmp_path
    )
    tracer = trace.get_tracer("host", tracer_provider=tracing_provider(spans))
    with tracer.start_as_current_span("host batch"):
        result = await lead.parallel_delegate({"a": "ta", "b": "tb", "c": "tc"}, max_active=2)
    assert result.statuses == ("completed",) * 3
    finished = spans.get_finished_spans()
    assert tree(finished) == [
        (
            "host batch",
            tuple((f"invoke_agent {n}", (("chat scripted", ()),)) for n in names),
        )
    ]
    for n, delegation_id in zip(names, result.delegation_ids, strict=True):
        a = attrs(only(finished, f"invoke_agent {n}"))
        assert a["deputy.delegation.id"] == delegation_id
        assert a["deputy.delegation.status"] == "completed"
        assert a["deputy.budget.granted.max_requests"] == 1


async def test_a_delegation_over_its_cap_ends_its_span_not_started(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    lead, _ = scripted_lead(
        {"lead": [delegate_many(("w", "one"), ("w", "two")), reply("done")], "w": ["ok"]},
        [definition("w")],
        tmp_path,
        name="lead",
        delegation_policy=DelegationPolicy(max_delegations=1),
    )
    await lead.run("go")
    finished = spans.get_finished_spans()
    delegations = named(finished, "invoke_agent w")
    assert sorted(attrs(s)["deputy.delegation.status"] for s in delegations) == [
        "completed",
        "not_started",
    ]
    [unstarted] = [s for s in delegations if attrs(s)["deputy.delegation.status"] == "not_started"]
    assert attrs(unstarted)["deputy.stop_reason"] == "delegation_limit"
    assert unstarted.status.status_code == trace.StatusCode.UNSET
    # Every span ended and the lead's context is back to none: nothing leaked.
    assert trace.get_current_span() is trace.INVALID_SPAN
    assert {s.name for s in finished} >= {"invoke_agent lead"}


async def test_content_is_recorded_when_enabled(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracing.configure(provider, capture_content=True)
    echo = make_tool("echo", lambda **kw: f"echoed {kw['text']}", read_only=True)
    agent = Agent(
        Chat(
            ScriptedProvider(
                [
                    tool_calls(("echo", {"text": "SECRET-ARG"}), ("nope", {})),
                    reply("SECRET-ANSWER"),
                ]
            ),
            system_prompt="SECRET-SYSTEM",
        ),
        tools=[echo],
        name="solo",
        working_dir=tmp_path,
    )
    await agent.run("SECRET-TASK")
    finished = spans.get_finished_spans()
    assert tree(finished) == [
        (
            "invoke_agent solo",
            (
                ("chat scripted", ()),
                ("chat scripted", ()),
                ("execute_tool echo", ()),
                ("execute_tool nope", ()),
            ),
        )
    ]
    root = attrs(only(finished, "invoke_agent solo"))
    assert json.loads(root["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "SECRET-TASK"}]}
    ]
    assert "SECRET-ANSWER" in root["gen_ai.output.messages"]
    refused = attrs(only(finished, "execute_tool nope"))
    assert refused["deputy.permission.decision"] == "deny"
    assert refused["deputy.tool.refusal"].startswith("Unknown tool: nope")
    tool = attrs(only(finished, "execute_tool echo"))
    assert json.loads(tool["gen_ai.tool.call.arguments"]) == {"text": "SECRET-ARG"}
    assert json.loads(tool["gen_ai.tool.call.result"]) == "echoed SECRET-ARG"
    first, second = sorted(named(finished, "chat scripted"), key=lambda s: s.start_time or 0)
    assert "SECRET-SYSTEM" in attrs(first)["gen_ai.system_instructions"]
    assert "SECRET-TASK" in attrs(first)["gen_ai.input.messages"]
    assert "SECRET-ARG" in attrs(first)["gen_ai.output.messages"]
    assert "echoed SECRET-ARG" in attrs(second)["gen_ai.input.messages"]
    assert "SECRET-ANSWER" in attrs(second)["gen_ai.output.messages"]


async def test_content_is_off_by_default(spans: InMemorySpanExporter, tmp_path: Path) -> None:
    agent = Agent(
        Chat(ScriptedProvider(["SECRET-ANSWER"]), system_prompt="SECRET-SYSTEM"),
        name="solo",
        working_dir=tmp_path,
    )
    await agent.run("SECRET-TASK")
    finished = spans.get_finished_spans()
    assert [s.name for s in finished] == ["chat scripted", "invoke_agent solo"]
    for s in finished:
        assert "SECRET" not in repr(attrs(s))


async def test_a_failed_tool_marks_its_span_with_the_exception_type(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    def broken(**kwargs: Any) -> str:
        raise KeyError("missing")

    agent = Agent(
        Chat(ScriptedProvider([tool_call("broken", {}, id="c1"), reply("ok")])),
        tools=[make_tool("broken", broken, read_only=True)],
        name="solo",
        working_dir=tmp_path,
    )
    await agent.run("go")
    span = only(spans.get_finished_spans(), "execute_tool broken")
    assert span.status.status_code == trace.StatusCode.ERROR
    assert attrs(span)["error.type"] == "KeyError"
    assert attrs(span)["deputy.permission.decision"] == "allow"


async def test_a_provider_failure_marks_the_run_span(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    agent = Agent(
        Chat(ScriptedProvider([ProviderError("down", provider="scripted")])),
        name="solo",
        working_dir=tmp_path,
    )
    result = await agent.run("go")
    assert result.stop_reason == "provider_error"
    root = only(spans.get_finished_spans(), "invoke_agent solo")
    assert root.status.status_code == trace.StatusCode.ERROR
    assert attrs(root)["error.type"] == "ProviderError"
    assert attrs(root)["deputy.stop_reason"] == "provider_error"


async def test_traceparent_round_trip_continues_the_callers_trace(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer = provider.get_tracer("caller")
    with tracer.start_as_current_span("caller") as caller:
        headers = tracing.inject_traceparent()
    assert headers["traceparent"].split("-")[1] == format(
        caller.get_span_context().trace_id, "032x"
    )
    agent = Agent(Chat(ScriptedProvider(["ok"])), name="solo", working_dir=tmp_path)
    with tracing.continue_trace(headers):
        await agent.run("go")
    root = only(spans.get_finished_spans(), "invoke_agent solo")
    assert root.context is not None
    assert root.parent is not None
    assert root.context.trace_id == caller.get_span_context().trace_id
    assert root.parent.span_id == caller.get_span_context().span_id
    assert root.parent.is_remote
    assert tracing.extract_traceparent({"traceparent": "garbage"}) is None
    assert tracing.extract_traceparent({}) is None


def test_helpers_do_nothing_while_tracing_is_off() -> None:
    assert not tracing.is_enabled()
    assert tracing.inject_traceparent() == {}
    assert tracing.inject_traceparent({"a": "b"}) == {"a": "b"}
    assert (
        tracing.extract_traceparent(
            {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
        )
        is None
    )
    with tracing.continue_trace({}):
        pass


def test_configure_refuses_bad_arguments_by_name() -> None:
    with pytest.raises(TypeError, match="capture_content must be a bool"):
        tracing.configure(capture_content="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tracer_provider must be an OpenTelemetry"):
        tracing.configure(object())
    assert not tracing.is_enabled()


_NO_OTEL = """
import sys
import deputy_runtime
from deputy_runtime import Agent, Chat, LeadAgent, ScriptedProvider, agent_definition
from deputy_runtime.chat import tool_call
lead = LeadAgent(
    Chat(ScriptedProvider({
        "lead": [tool_call("delegate_to_agent", {"agent_name": "w", "task": "t"}), "done"],
        "w": ["answer"],
    })),
    [agent_definition("w", description="A worker.", prompt="Work.")],
    name="lead",
)
result = lead.run_sync("go")
assert result.response == "done", result
loaded = sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")
assert not loaded, loaded
print("ok")
"""


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_an_untraced_run_imports_no_opentelemetry(backend: str, tmp_path: Path) -> None:
    code = _NO_OTEL.replace(
        'lead.run_sync("go")', f"__import__('anyio').run(lead.run, 'go', backend={backend!r})"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


_NO_EXTRA = """
import sys
sys.modules["opentelemetry"] = None  # as if the otel extra were not installed
from deputy_runtime import Agent, Chat, ScriptedProvider, tracing
try:
    tracing.configure()
except ImportError as exc:
    assert "pip install '.[otel]' from a checkout" in str(exc), exc
else:
    raise AssertionError("configure() without opentelemetry did not raise")
assert not tracing.is_enabled()
assert tracing.inject_traceparent() == {}
parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
with tracing.continue_trace({"traceparent": parent}):
    result = Agent(Chat(ScriptedProvider(["fine"]))).run_sync("go")
assert result.response == "fine", result
print("ok")
"""


@pytest.mark.slow
def test_without_the_extra_everything_runs_untraced(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _NO_EXTRA],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
