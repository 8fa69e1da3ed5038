"""The holder's W3C ``traceparent`` stored with each lease and reservation, against a real
redis-server; spans come from the OpenTelemetry SDK with its ``InMemorySpanExporter``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span

from deputy_runtime import DelegationPolicy, ExclusiveResource, tracing
from deputy_runtime.chat import ModelRequest, reply
from deputy_runtime.redis import Lease, RedisBudget, RedisCoordinator, RedisLeases
from tests.redis.test_delegations import counted_coordinator, evalsha_calls
from tests.runtime.helpers import definition, delegate, scripted_lead

pytestmark = pytest.mark.anyio


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    """Where this test's spans are recorded."""
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


def traceparent(span: Span | ReadableSpan) -> str:
    """The W3C ``traceparent`` naming ``span``."""
    context = span.get_span_context()
    assert context is not None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


async def test_a_lease_records_its_holders_traceparent(
    provider: TracerProvider, redis_url: str, namespace: str
) -> None:
    tracer = provider.get_tracer("test")
    async with RedisLeases(redis_url, namespace=namespace, ttl=1.0) as leases:
        with tracer.start_as_current_span("holder") as holder_span:
            lease = await leases.acquire("repo", "d1", wait=False)
            # Acquiring again for the same holder returns the same lease.
            assert await leases.acquire("repo", "d1", wait=False) == lease
        assert lease.traceparent == traceparent(holder_span)
        assert await leases.current("repo") == lease
        # Renewal and compare-and-delete still recognise the holder.
        lost: list[str] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(leases.hold, lease, lost.append)
            until = anyio.current_time() + 2.0
            while anyio.current_time() < until:
                assert await leases.current("repo") == lease
                await anyio.sleep(0.2)
            tg.cancel_scope.cancel()
        assert lost == []
        await leases.release(lease)
        assert await leases.current("repo") is None


async def test_without_tracing_nothing_is_recorded(redis_url: str, namespace: str) -> None:
    assert not tracing.is_enabled()
    async with RedisLeases(redis_url, namespace=namespace) as leases:
        lease = await leases.acquire("repo", "d1", wait=False)
        assert lease == Lease(key="repo", holder="d1", token=lease.token)
        assert await leases.current("repo") == lease
        await leases.release(lease)
    async with RedisBudget(redis_url, "shared", {"requests": 5}, namespace=namespace) as budget:
        await budget.reserve("d1", {"requests": 2})
        state = await budget.state()
        assert (state.holders, state.traceparents) == (1, {})
        await budget.settle("d1", {"requests": 1})


async def test_a_reservation_records_its_holders_traceparent(
    provider: TracerProvider, redis_url: str, namespace: str
) -> None:
    tracer = provider.get_tracer("test")
    async with RedisBudget(
        redis_url, "shared", {"requests": 5}, namespace=namespace, ttl=0.2
    ) as budget:
        with tracer.start_as_current_span("first") as first:
            assert (await budget.reserve("d1", {"requests": 2}))["requests"] == 2
            # A retried reserve returns the same grant (the stored value parses).
            assert (await budget.reserve("d1", {"requests": 2}))["requests"] == 2
        await budget.reserve("d2", {"requests": 1})  # no current span: nothing recorded
        state = await budget.state()
        assert state.traceparents == {"d1": traceparent(first)}
        assert (state.reserved.requests, state.remaining.requests) == (3, 2)
        await budget.settle("d1", {"requests": 1})
        assert (await budget.state()).traceparents == {}
        # An expired reservation returns its grant (its stored value parses there too).
        with tracer.start_as_current_span("second"):
            await budget.reserve("d3", {"requests": 2})
        with anyio.fail_after(30):
            while (await budget.state()).holders:
                await anyio.sleep(0.05)
        state = await budget.state()
        assert (state.reserved.requests, state.used.requests, state.traceparents) == (0, 1, {})


async def test_the_coordinator_records_one_traceparent_on_both(
    provider: TracerProvider, redis_url: str, namespace: str
) -> None:
    tracer = provider.get_tracer("test")
    async with RedisCoordinator(
        redis_url, budget_name="shared", limits={"requests": 5}, namespace=namespace
    ) as coord:
        with tracer.start_as_current_span("delegation") as span:
            lease, grant = await coord.acquire_and_reserve(
                "repo", "d1", {"requests": 2}, wait=False
            )
        assert grant["requests"] == 2
        assert lease.traceparent == traceparent(span)
        assert await coord.leases.current("repo") == lease
        assert (await coord.budget.state()).traceparents == {"d1": traceparent(span)}
        await coord.release_and_settle(lease, {"requests": 1})
        assert await coord.leases.current("repo") is None
        state = await coord.budget.state()
        assert (state.used.requests, state.traceparents) == (1, {})


async def test_a_delegations_lease_names_the_delegations_span(
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    redis_url: str,
    namespace: str,
    tmp_path: Path,
) -> None:
    async with RedisLeases(redis_url, namespace=namespace) as leases:
        seen: list[Lease | None] = []

        async def worker(request: ModelRequest) -> str:
            seen.append(await leases.current("repo"))
            return "done"

        lead, _ = scripted_lead(
            {"lead": [delegate("worker"), reply("ok")], "worker": worker},
            [definition("worker", max_requests=1)],
            tmp_path,
            delegation_policy=DelegationPolicy(
                resource_modes=(ExclusiveResource("repo", backend=leases),)
            ),
        )
        await lead.run("go")
        assert await leases.current("repo") is None
    held = seen[0]
    assert held is not None
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent worker"]
    assert held.holder == lead.list_subagents()[0].delegation_id
    assert held.traceparent == traceparent(span)


async def test_a_combined_lease_and_reservation_name_the_delegations_span_in_two_round_trips(
    provider: TracerProvider, exporter: InMemorySpanExporter, redis_url: str, namespace: str
) -> None:
    async with counted_coordinator(redis_url, namespace) as coord:
        seen: list[tuple[Lease | None, dict[str, str]]] = []

        async def worker(request: ModelRequest) -> str:
            state = await coord.budget.state()
            seen.append((await coord.leases.current("repo"), state.traceparents))
            return "done"

        lead, _ = scripted_lead(
            {"lead": [delegate("worker"), reply("ok")], "worker": worker},
            [definition("worker", max_requests=1)],
            delegation_policy=DelegationPolicy(
                resource_mode="exclusive", resource_key="repo", lease_backend=coord.leases
            ),
            shared_budget=coord.budget,
        )
        # Load the scripts into the server first (a first run also sends the script).
        lease, _ = await coord.acquire_and_reserve("warm", "warm", {"requests": 0}, wait=False)
        await coord.release_and_settle(lease, {})
        before = await evalsha_calls(redis_url)
        await lead.run("go")
        after = await evalsha_calls(redis_url)
    # Taking both and giving both back, the traceparent included: two scripts, plus the
    # worker's two reads, plus the lead's own two requests and its spare one (a
    # reservation and a settlement each).
    assert after - before == 2 + 2 + 3 * 2
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent worker"]
    held, traceparents = seen[0]
    holder = lead.list_subagents()[0].delegation_id
    assert held is not None
    assert (held.holder, held.traceparent) == (holder, traceparent(span))
    # The lead's spare and next request, held while the delegation runs, name the lead's.
    assert traceparents[holder] == traceparent(span)
    assert len(traceparents) == 3
