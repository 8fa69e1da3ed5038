"""Control and failure handling on a real Temporal dev server: the interrupt signal
reaches every running child, the events query pages the log, the permission ceiling is
checked before a child starts, and model errors follow the providers' retry rules."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest
from temporalio.client import (
    Client,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)

from deputy_runtime import (
    AgentDefinition,
    AuthenticationError,
    LeadAgent,
    PermissionMode,
    Permissions,
    RateLimitError,
    UsageLimits,
    chat,
    decode_event,
    register_provider,
    tool,
    tools_file,
)
from deputy_runtime.chat import (
    AssistantTurn,
    ContentToolResult,
    ModelRequest,
    ScriptedProvider,
    TestProvider,
    reply,
    tool_call,
    unregister_provider,
)
from deputy_runtime.runtime import DelegationStart, RunStart, StopEvent
from deputy_runtime.temporal import (
    DeputyActivities,
    LeadOutput,
    LeadWorkflow,
    deputy_worker,
    lead_input,
    start_lead,
)
from tests.temporal.helpers import assert_replays, run_workflow_ids, was_signalled

pytestmark = pytest.mark.anyio

WAIT_SECONDS = 120.0  # generous: the machine is shared; every wait is on a condition


class Gate:
    """A tool that blocks until released, counting the calls that reached it."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.started = 0
        self.all_started = asyncio.Event()
        self.release = asyncio.Event()

        @tool(read_only=True)
        async def hold() -> str:
            """Wait for the test to let the call finish."""
            self.started += 1
            if self.started >= self.expected:
                self.all_started.set()
            await self.release.wait()
            return "released"

        self.tool = hold


async def _start(
    client: Client,
    task_queue: str,
    definitions: list[AgentDefinition],
    *,
    usage_limits: UsageLimits,
    permissions: Permissions | None = None,
) -> WorkflowHandle[LeadWorkflow, LeadOutput]:
    request = lead_input(
        "Do the work",
        definitions,
        model="test",
        usage_limits=usage_limits,
        permissions=permissions,
    )
    return await start_lead(
        client, request, workflow_id=f"lead-{uuid.uuid4().hex}", task_queue=task_queue
    )


@pytest.fixture
async def gated_worker(client: Client, task_queue: str, workdir: Path) -> AsyncIterator[Gate]:
    gate = Gate(expected=3)
    activities = DeputyActivities([gate.tool], working_dir=workdir)
    async with deputy_worker(client, activities, task_queue=task_queue):
        yield gate
        gate.release.set()  # never leave a held call behind


async def test_interrupt_reaches_every_running_child(
    client: Client, task_queue: str, gated_worker: Gate
) -> None:
    gate = gated_worker
    definitions = [
        AgentDefinition(name, f"The {name}.", "You wait.", tools=(gate.tool,), max_requests=3)
        for name in ("one", "two", "three")
    ]
    handle = await _start(client, task_queue, definitions, usage_limits=UsageLimits(20))
    with anyio.fail_after(WAIT_SECONDS):
        await gate.all_started.wait()  # every child is inside its tool call
    await handle.signal("interrupt", "test stop")
    child_ids = []
    with anyio.fail_after(WAIT_SECONDS):
        starts: list[DelegationStart] = []
        while len(starts) < 3:  # the lead's log names the three children
            events = [decode_event(e) for e in await handle.query("events", 0)]
            starts = [e for e in events if isinstance(e, DelegationStart)]
        child_ids = [f"{handle.id}/{e.delegation_id}" for e in starts]
        for child_id in child_ids:  # the forwarded signal is in each child's history
            while not await was_signalled(client, child_id):
                await anyio.sleep(0.1)  # poll interval of the history check above
    gate.release.set()
    with anyio.fail_after(WAIT_SECONDS):
        out = await handle.result()
    assert out.result.stop_reason == "interrupted"
    assert [(r.status, r.stop_reason) for r in out.subagents] == [("stopped", "interrupted")] * 3
    for result in out.subagent_results:
        assert result is not None
        # The call that finished keeps its real result; no request followed it.
        answer = result.turns[-1].contents[0]
        assert isinstance(answer, ContentToolResult)
        assert answer.value == "released"
        assert result.usage.requests == 1
    # A run that was signalled mid-way replays too.
    assert await assert_replays(client, run_workflow_ids(handle.id, out)) == 4


async def test_events_query_pages_the_log(
    client: Client, task_queue: str, workdir: Path, running_worker: DeputyActivities
) -> None:
    files = {t.name: t for t in tools_file(workdir)}
    definitions = [
        AgentDefinition(n, "Reads.", "You read.", tools=(files["read_file"],), max_requests=2)
        for n in ("a", "b")
    ]
    handle = await _start(client, task_queue, definitions, usage_limits=UsageLimits(10))
    out = await handle.result()
    everything = [decode_event(e) for e in await handle.query("events", 0)]
    assert isinstance(everything[0], RunStart)
    assert everything[0].agent_id == out.result.agent_id
    assert isinstance(everything[-1], StopEvent)
    assert everything[-1].agent_id == out.result.agent_id
    tail = [decode_event(e) for e in await handle.query("events", 5)]
    assert tail == everything[5:]
    # Each child's own events joined the lead's log, tagged with its delegation.
    delegation_ids = {r.delegation_id for r in out.subagents}
    child_stops = [e for e in everything if isinstance(e, StopEvent) and e.delegation_id]
    assert {e.delegation_id for e in child_stops} == delegation_ids
    assert await handle.query("events", len(everything)) == []
    with pytest.raises(WorkflowQueryFailedError, match="offset"):
        await handle.query("events", -1)


async def test_ceiling_violation_fails_before_the_child_starts(
    client: Client, task_queue: str, workdir: Path, running_worker: DeputyActivities
) -> None:
    files = {t.name: t for t in tools_file(workdir)}
    writer = AgentDefinition(
        "writer", "Writes.", "You write.", tools=(files["write_file"],), permission_mode="full"
    )
    limits = UsageLimits(10)
    permissions = Permissions(mode=PermissionMode.READONLY)
    lead = LeadAgent(
        chat("test"), [writer], usage_limits=limits, permissions=permissions, working_dir=workdir
    )
    await lead.run("Write things")
    [expected] = lead.list_subagents()
    handle = await _start(
        client, task_queue, [writer], usage_limits=limits, permissions=permissions
    )
    out = await handle.result()
    [record] = out.subagents
    assert (record.status, record.stop_reason) == (expected.status, expected.stop_reason)
    assert (record.status, record.stop_reason) == ("failed", "setup_error")
    assert record.error == expected.error
    assert out.subagent_results == (None,)
    assert lead.last_result is not None
    assert out.result.usage == lead.last_result.usage
    # No child workflow was started for it.
    child = client.get_workflow_handle(f"{handle.id}/{record.delegation_id}")
    with pytest.raises(Exception, match="not found"):
        await child.describe()
    assert not (workdir / "test").exists()


class FlakyProvider(TestProvider):
    """The test model, failing its first ``failures`` requests with ``error``."""

    calls = 0

    def __init__(self, error: Exception, failures: int, *, model: str) -> None:
        super().__init__(model=model)
        self.error = error
        self.failures = failures

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        FlakyProvider.calls += 1
        if FlakyProvider.calls <= self.failures:
            raise self.error
        return await super().complete(request)


@pytest.fixture
def flaky() -> Iterator[str]:
    name = f"flaky{uuid.uuid4().hex[:8]}"
    FlakyProvider.calls = 0
    yield name
    unregister_provider(name)


@pytest.mark.parametrize(
    ("error", "failures", "calls", "stop_reason"),
    [
        pytest.param(AuthenticationError("bad key"), 99, 1, "provider_error", id="auth-no-retry"),
        # The failed attempt is retried, then the lead makes its two requests (a delegate
        # call the test model makes to the empty roster, and its answer).
        pytest.param(RateLimitError("slow down"), 1, 3, "complete", id="rate-limit-retried"),
    ],
)
async def test_model_errors_follow_the_provider_retry_rules(
    client: Client,
    task_queue: str,
    running_worker: DeputyActivities,
    flaky: str,
    error: Exception,
    failures: int,
    calls: int,
    stop_reason: str,
) -> None:
    register_provider(
        flaky, lambda model, **kw: FlakyProvider(error, failures, model=model), default_model="m"
    )
    request = lead_input("Hello", [], model=f"{flaky}/m", usage_limits=UsageLimits(5))
    handle = await start_lead(
        client, request, workflow_id=f"lead-{uuid.uuid4().hex}", task_queue=task_queue
    )
    out = await handle.result()
    assert out.result.stop_reason == stop_reason
    assert FlakyProvider.calls == calls
    if stop_reason == "provider_error":
        assert out.result.error is not None
        assert "bad key" in out.result.error


@pytest.fixture
def scripted() -> Iterator[str]:
    """A fresh provider name for this test, unregistered afterwards."""
    name = f"scripted{uuid.uuid4().hex[:8]}"
    yield name
    unregister_provider(name)


async def test_narrowing_the_lead_narrows_a_running_child(
    client: Client,
    task_queue: str,
    workdir: Path,
    scripted: str,
) -> None:
    name = scripted
    gate = Gate(expected=1)
    files = {t.name: t for t in tools_file(workdir)}
    # The child holds, then tries to write; the lead is narrowed to readonly meanwhile.
    provider = ScriptedProvider(
        {
            "lead": [tool_call("delegate_to_agent", {"agent_name": "writer", "task": "Write"}),
                     reply("lead done")],
            "writer": [tool_call("hold", {}),
                       tool_call("write_file", {"path": "out.txt", "content": "x"}),
                       reply("writer done")],
        }
    )  # fmt: skip
    register_provider(name, lambda model, **kw: provider, default_model="m")
    writer = AgentDefinition(
        "writer", "Writes.", "You write.", tools=(gate.tool, files["write_file"]), max_requests=5
    )
    activities = DeputyActivities([gate.tool, files["write_file"]], working_dir=workdir)
    async with deputy_worker(client, activities, task_queue=task_queue):
        request = lead_input(
            "Write", [writer], model=f"{name}/m", usage_limits=UsageLimits(10),
            permissions=Permissions(mode=PermissionMode.STANDARD),
        )  # fmt: skip
        handle = await start_lead(
            client, request, workflow_id=f"lead-{uuid.uuid4().hex}", task_queue=task_queue
        )
        with anyio.fail_after(WAIT_SECONDS):
            await gate.all_started.wait()
        with pytest.raises(WorkflowUpdateFailedError) as widening:
            await handle.execute_update("set_permission_mode", "full")
        assert "only narrowing is allowed" in str(widening.value.cause)
        assert await handle.execute_update("set_permission_mode", "readonly") == "readonly"
        events = [decode_event(e) for e in await handle.query("events", 0)]
        [start] = [e for e in events if isinstance(e, DelegationStart)]
        child_id = f"{handle.id}/{start.delegation_id}"
        with anyio.fail_after(WAIT_SECONDS):
            while not await was_signalled(client, child_id):
                await anyio.sleep(0.1)  # poll interval of the history check above
        gate.release.set()
        with anyio.fail_after(WAIT_SECONDS):
            out = await handle.result()
    [result] = out.subagent_results
    assert result is not None
    [denied] = [
        c for t in result.turns for c in t.contents if isinstance(c, ContentToolResult) and c.error
    ]
    assert denied.error is not None
    assert denied.error.startswith("Permission denied: ")
    assert denied.error.endswith("(lead's current permissions)")
    assert not (workdir / "out.txt").exists()
    assert out.result.stop_reason == "complete"
    assert await assert_replays(client, run_workflow_ids(handle.id, out)) == 2


async def test_interrupting_one_child_stops_only_that_delegation(
    client: Client, task_queue: str, workdir: Path
) -> None:
    gate = Gate(expected=2)
    definitions = [
        AgentDefinition(name, f"The {name}.", "You wait.", tools=(gate.tool,), max_requests=3)
        for name in ("one", "two")
    ]
    activities = DeputyActivities([gate.tool], working_dir=workdir)
    async with deputy_worker(client, activities, task_queue=task_queue):
        handle = await _start(client, task_queue, definitions, usage_limits=UsageLimits(20))
        with anyio.fail_after(WAIT_SECONDS):
            await gate.all_started.wait()
            starts: list[DelegationStart] = []
            while len(starts) < 2:
                events = [decode_event(e) for e in await handle.query("events", 0)]
                starts = [e for e in events if isinstance(e, DelegationStart)]
        target = next(e for e in starts if e.agent_name == "one")
        child_id = f"{handle.id}/{target.delegation_id}"
        await client.get_workflow_handle(child_id).signal("interrupt", "just this one")
        with anyio.fail_after(WAIT_SECONDS):
            while not await was_signalled(client, child_id):
                await anyio.sleep(0.1)  # poll interval of the history check above
        gate.release.set()
        with anyio.fail_after(WAIT_SECONDS):
            out = await handle.result()
    outcomes = {r.agent_name: (r.status, r.stop_reason) for r in out.subagents}
    assert outcomes == {"one": ("stopped", "interrupted"), "two": ("completed", "complete")}
    assert out.result.stop_reason == "complete"
