"""The trio bridge: a trio (or asyncio) host drives the asyncio-only Temporal client
through :class:`TemporalBridge`, a thread running its own asyncio loop."""

from __future__ import annotations

import asyncio
import threading
import uuid
from pathlib import Path

import anyio
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from deputy_runtime import AgentDefinition, UsageLimits, tools_file, tracing
from deputy_runtime.temporal import (
    DeputyActivities,
    LeadOutput,
    TemporalBridge,
    data_converter,
    deputy_worker,
    lead_input,
    run_in_asyncio_thread,
    start_lead,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The bridge is for non-asyncio hosts: these tests run on both backends."""
    return str(request.param)


async def _loop_thread() -> tuple[str, bool]:
    asyncio.get_running_loop()  # raises unless this runs on an asyncio loop
    return threading.current_thread().name, True


async def test_call_runs_on_the_bridge_loop_thread() -> None:
    async with TemporalBridge() as bridge:
        name, on_asyncio = await bridge.call(_loop_thread)
        assert (name, on_asyncio) == ("deputy-temporal-asyncio", True)
        assert name != threading.current_thread().name
    assert await run_in_asyncio_thread(_loop_thread) == ("deputy-temporal-asyncio", True)


async def test_cancelling_the_host_cancels_the_bridged_coroutine() -> None:
    started, cancelled = threading.Event(), threading.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async with TemporalBridge() as bridge, anyio.create_task_group() as tg:
        tg.start_soon(bridge.call, forever)
        await anyio.to_thread.run_sync(started.wait)
        tg.cancel_scope.cancel()
    assert await anyio.to_thread.run_sync(cancelled.wait, 30.0)


async def test_call_without_start_is_refused() -> None:
    with pytest.raises(RuntimeError, match="not started"):
        await TemporalBridge().call(_loop_thread)


async def test_a_trio_host_runs_a_lead_on_temporal(temporal_address: str, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("TODO: test the bridge\n")
    files = {t.name: t for t in tools_file(tmp_path)}
    reviewer = AgentDefinition(
        "reviewer", "Reviews.", "You review.", tools=(files["grep_files"],), max_requests=3
    )
    task_queue = f"deputy-bridge-{uuid.uuid4().hex}"
    request = lead_input("Find TODOs", [reviewer], model="test", usage_limits=UsageLimits(10))

    async def run_on_temporal() -> LeadOutput:
        from temporalio.client import Client

        client = await Client.connect(temporal_address, data_converter=data_converter)
        activities = DeputyActivities(files.values(), working_dir=tmp_path)
        async with deputy_worker(client, activities, task_queue=task_queue):
            handle = await start_lead(
                client, request, workflow_id=f"bridge-{uuid.uuid4().hex}", task_queue=task_queue
            )
            return await handle.result()

    async with TemporalBridge() as bridge:
        out = await bridge.call(run_on_temporal)
    assert out.result.stop_reason == "complete"
    [record] = out.subagents
    assert (record.agent_name, record.status) == ("reviewer", "completed")
    [result] = out.subagent_results
    assert result is not None
    assert "notes.txt" in result.response


async def test_a_bridged_start_continues_the_hosts_trace(
    temporal_address: str, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("TODO: trace the bridge\n")
    files = {t.name: t for t in tools_file(tmp_path)}
    reviewer = AgentDefinition(
        "reviewer", "Reviews.", "You review.", tools=(files["grep_files"],), max_requests=3
    )
    task_queue = f"deputy-bridge-{uuid.uuid4().hex}"
    request = lead_input("Find TODOs", [reviewer], model="test", usage_limits=UsageLimits(10))

    async def run_on_temporal() -> LeadOutput:
        from temporalio.client import Client

        client = await Client.connect(temporal_address, data_converter=data_converter)
        activities = DeputyActivities(files.values(), working_dir=tmp_path)
        async with deputy_worker(client, activities, task_queue=task_queue):
            handle = await start_lead(
                client, request, workflow_id=f"bridge-{uuid.uuid4().hex}", task_queue=task_queue
            )
            return await handle.result()

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.configure(provider)
    try:
        with provider.get_tracer("host").start_as_current_span("host") as host:
            async with TemporalBridge() as bridge:
                out = await bridge.call(run_on_temporal)
    finally:
        tracing.disable()
        provider.shutdown()
    assert out.result.stop_reason == "complete"
    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    assert len(chats) == out.result.usage.requests
    trace_id = host.get_span_context().trace_id
    assert all(s.context is not None and s.context.trace_id == trace_id for s in chats)
