"""Trace context from the process that starts a lead into its workflows and activities.

A real dev server and a worker in this process (asyncio only, as every Temporal test);
spans go to the OpenTelemetry SDK's real ``InMemorySpanExporter``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client

from deputy_runtime import AgentDefinition, UsageLimits, tools_file, tracing
from deputy_runtime.temporal import DeputyActivities, deputy_worker, lead_input, start_lead
from tests.temporal.helpers import assert_replays, run_workflow_ids

pytestmark = pytest.mark.anyio


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    """Where the spans of this test are recorded."""
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    """Tracing on into ``exporter``; off again afterwards."""
    traced = TracerProvider()
    traced.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.configure(traced)
    try:
        yield traced
    finally:
        tracing.disable()
        traced.shutdown()


def _definitions(workdir: Path) -> list[AgentDefinition]:
    files = {t.name: t for t in tools_file(workdir)}
    return [
        AgentDefinition(
            "reviewer",
            "Reviews code.",
            "You review code.",
            tools=(files["read_file"], files["grep_files"]),
            max_requests=4,
        ),
        AgentDefinition(
            "explorer", "Lists files.", "You explore.", tools=(files["list_files"],), max_requests=4
        ),
    ]


def _attribute(span: ReadableSpan, name: str) -> object:
    assert span.attributes is not None
    return span.attributes[name]


def _ancestors(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> list[str]:
    names = []
    parent = span.parent
    while parent is not None and parent.span_id in by_id:
        found = by_id[parent.span_id]
        names.append(found.name)
        parent = found.parent
    return names


async def test_activity_spans_join_the_callers_trace_under_their_workflow(
    exporter: InMemorySpanExporter,
    provider: TracerProvider,
    client: Client,
    task_queue: str,
    workdir: Path,
) -> None:
    tracer = provider.get_tracer("the caller")
    activities = DeputyActivities(tools_file(workdir), working_dir=workdir)
    request = lead_input(
        "Review the project and report every TODO.",
        _definitions(workdir),
        model="test",
        usage_limits=UsageLimits(max_requests=12),
    )
    async with deputy_worker(client, activities, task_queue=task_queue):
        workflow_id = f"lead-{uuid.uuid4().hex}"
        with tracer.start_as_current_span("caller") as caller_span:
            caller = caller_span.get_span_context()
            handle = await start_lead(
                client, request, workflow_id=workflow_id, task_queue=task_queue
            )
        output = await handle.result()
    # The traced histories replay without nondeterminism.
    assert await assert_replays(client, run_workflow_ids(workflow_id, output)) > 1
    assert output.result.stop_reason == "complete"
    assert output.subagents, "the test model delegates"

    finished = exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in finished if s.context is not None}
    chats = [s for s in finished if s.name.startswith("chat ")]
    tools = [s for s in finished if s.name.startswith("execute_tool ")]
    assert chats
    assert tools
    for s in (*chats, *tools):
        assert s.context is not None
        assert s.context.trace_id == caller.trace_id, s.name
        chain = _ancestors(s, by_id)
        activity_type = "deputy_model_request" if s in chats else "deputy_tool_call"
        assert chain[:2] == [f"RunActivity:{activity_type}", f"StartActivity:{activity_type}"]
        assert "StartWorkflow:DeputyLead" in chain
        assert chain[-1] == "caller"
    [run] = [s for s in finished if s.name == "RunWorkflow:DeputyLead"]
    assert _ancestors(run, by_id) == ["StartWorkflow:DeputyLead", "caller"]
    # A subagent's activities sit under the start of its own child workflow.
    nested = [s for s in chats if "StartChildWorkflow:DeputySubagent" in _ancestors(s, by_id)]
    assert {_attribute(s, "gen_ai.agent.name") for s in nested} == {
        r.agent_name for r in output.subagents
    }
    lead_chats = [s for s in chats if s not in nested]
    assert lead_chats
    assert all(_attribute(s, "gen_ai.agent.name") == "lead" for s in lead_chats)
    decisions = {_attribute(s, "deputy.permission.decision") for s in tools}
    assert decisions <= {"allow", "deny"}
