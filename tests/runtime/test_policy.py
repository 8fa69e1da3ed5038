"""DelegationPolicy resource modes, leases, owned cleanup and setup failures.

Every scenario runs real delegations on a ScriptedProvider keyed per agent name; the
provider's request log proves that setup failures make no model request, the lease table
(``IN_PROCESS_LEASES.held()``) and the run meters prove nothing is left behind.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from deputy_runtime import (
    Chat,
    DelegationBindingError,
    DelegationPolicy,
    DelegationResources,
    HookEvent,
    LeadAgent,
    PermissionCeilingError,
    PermissionMode,
    Permissions,
    ProviderError,
    ResourceBusyError,
    ask_user,
)
from deputy_runtime.chat import ScriptedProvider, reply, tool_call
from deputy_runtime.chat._types import ContentToolResult, ModelRequest
from deputy_runtime.runtime import IN_PROCESS_LEASES, Lease
from tests.runtime.helpers import (
    Cleanups,
    clean_leases,
    definition,
    delegate,
    delegate_many,
    delegate_results,
    make_tool,
    meter_spy,
    outcome,
    scripted_lead,
)

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("clean_leases")]

__all__ = ["clean_leases", "meter_spy"]  # fixtures used by name

EXCLUSIVE = DelegationPolicy("exclusive", resource_key="printer")


# -- constructor validation ----------------------------------------------------------------


def test_policy_validation() -> None:
    with pytest.raises(DelegationBindingError, match="require a resource_key"):
        DelegationPolicy("exclusive")
    with pytest.raises(DelegationBindingError, match="require a resource_key"):
        DelegationPolicy("exclusive", resource_key="  ")
    with pytest.raises(DelegationBindingError, match="only supported in exclusive mode"):
        DelegationPolicy("shared", resource_key="k")
    with pytest.raises(DelegationBindingError, match="require a factory"):
        DelegationPolicy("owned")
    with pytest.raises(DelegationBindingError, match="other modes cannot use one"):
        DelegationPolicy("shared", resources=lambda a, d, c: DelegationResources())
    with pytest.raises(DelegationBindingError, match="resource_mode"):
        DelegationPolicy("borrowed")
    with pytest.raises(DelegationBindingError, match="human_input must be callable"):
        DelegationPolicy(human_input=5)  # type: ignore[arg-type]
    with pytest.raises(DelegationBindingError, match="chat must be callable"):
        DelegationPolicy(chat="openai/gpt")  # type: ignore[arg-type]
    for event in ("PermissionRequest", "SubagentStart", "SubagentStop"):
        with pytest.raises(DelegationBindingError, match="never forwarded"):
            DelegationPolicy(observers=(event,))  # type: ignore[arg-type]
    with pytest.raises(DelegationBindingError, match="not a HookEvent"):
        DelegationPolicy(observers=("Nope",))  # type: ignore[arg-type]
    policy = DelegationPolicy(observers=("Stop", "Stop", "Notification"))  # type: ignore[arg-type]
    assert policy.observers == (HookEvent.Stop, HookEvent.Notification)
    with pytest.raises(AttributeError):
        policy.resource_mode = "owned"  # type: ignore[misc]
    with pytest.raises(TypeError, match="DelegationPolicy"):
        LeadAgent(Chat(ScriptedProvider([])), delegation_policy="shared")  # type: ignore[arg-type]


def test_delegation_resources_validation() -> None:
    # Construction never raises (it runs inside the host's factory, and raising there would
    # lose the cleanup); the runtime validates after taking the cleanup.
    bad_tools = DelegationResources(("invalid",))  # type: ignore[arg-type]
    with pytest.raises(DelegationBindingError, match="Tool objects"):
        bad_tools.validate()
    with pytest.raises(DelegationBindingError, match="cleanup must be callable"):
        DelegationResources((), cleanup=3).validate()  # type: ignore[arg-type]
    assert DelegationResources([make_tool("t")]).tools[0].name == "t"  # type: ignore[arg-type]


# -- shared ------------------------------------------------------------------------------------


async def test_shared_tool_state_is_shared_between_delegations(tmp_path: Path) -> None:
    counter = {"n": 0}

    def bump() -> int:
        counter["n"] += 1
        return counter["n"]

    count = make_tool("count", bump, read_only=True)
    lead, _ = scripted_lead(
        {
            "lead": [delegate("worker"), delegate("worker"), reply("ok")],
            "worker": [tool_call("count", {}), "one", tool_call("count", {}), "two"],
        },
        [definition("worker", tools=[count])],
        tmp_path,
    )
    await lead.run("go")
    assert counter["n"] == 2
    assert [r.status for r in lead.list_subagents()] == ["completed", "completed"]


# -- exclusive ---------------------------------------------------------------------------------


async def test_exclusive_overlap_fails_at_once_while_holder_completes(tmp_path: Path) -> None:
    holding = anyio.Event()
    release = anyio.Event()
    requests_seen: list[str] = []

    async def worker(request: ModelRequest) -> str:
        task = request.turns[0].text
        requests_seen.append(task)
        holding.set()
        await release.wait()
        return "held and done"

    lead, p = scripted_lead(
        {
            "lead": [delegate_many(("worker", "first"), ("worker", "second")), reply("ok")],
            "worker": worker,
        },
        [definition("worker", max_requests=2)],
        tmp_path,
        delegation_policy=EXCLUSIVE,
    )

    async def release_when_contender_failed() -> None:
        # The contender must fail while the holder is still blocked: no waiting.
        with anyio.fail_after(10):
            while not any(r.status == "failed" for r in lead.list_subagents()):
                await anyio.sleep(0)
        assert IN_PROCESS_LEASES.holder("printer") is not None
        release.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(release_when_contender_failed)
        await lead.run("go")
    records = lead.list_subagents()
    statuses = sorted((r.status, r.stop_reason) for r in records)
    assert statuses == [("completed", "complete"), ("failed", "setup_error")]
    failed = next(r for r in records if r.status == "failed")
    assert failed.error is not None
    assert "busy" in failed.error
    assert failed.started_at is None
    assert len(requests_seen) == 1  # the contender never reached the provider
    results = delegate_results(p)
    busy = next(r for r in results if r.error is not None)
    assert "busy" in busy.error  # type: ignore[operator]
    assert IN_PROCESS_LEASES.holder("printer") is None


async def test_exclusive_across_two_leads_sharing_the_key(tmp_path: Path) -> None:
    lead2_results: list[str] = []
    lead2, p2 = scripted_lead(
        {
            "lead": [delegate("worker"), reply("lead2 first"), delegate("worker"), reply("ok")],
            "worker": ["lead2 child"],
        },
        [definition("worker")],
        tmp_path,
        delegation_policy=EXCLUSIVE,
    )

    async def lead2_runs_during_lead1_child(h: Any) -> None:
        # While lead 1 holds the key, lead 2 tries to delegate with the same key.
        result = await lead2.run("try while busy")
        lead2_results.append(result.stop_reason)

    lead1, _p1 = scripted_lead(
        {"lead": [delegate("worker"), reply("lead1 done")], "worker": ["lead1 child"]},
        [definition("worker")],
        tmp_path,
        delegation_policy=EXCLUSIVE,
    )
    lead1.hooks.add(HookEvent.SubagentStart, lead2_runs_during_lead1_child)
    result1 = await lead1.run("go")
    assert result1.stop_reason == "complete"
    assert lead2_results == ["complete"]
    assert [r.status for r in lead2.list_subagents()] == ["failed"]
    assert p2.requests_for("worker") == []
    # once lead 1 has finished, lead 2 delegates successfully
    await lead2.run("again")
    assert [r.status for r in lead2.list_subagents()] == ["failed", "completed"]
    assert [r.status for r in lead1.list_subagents()] == ["completed"]
    assert "busy" in (delegate_results(p2)[0].error or "")


@pytest.mark.parametrize("how", ["provider_error", "interrupt", "cancel"])
async def test_exclusive_lease_released_after_failure_and_cancellation(
    tmp_path: Path, how: str
) -> None:
    in_request = anyio.Event()
    release = anyio.Event()

    async def worker(request: ModelRequest) -> Any:
        if how == "provider_error":
            raise ProviderError("child provider down")
        in_request.set()
        await release.wait()
        return tool_call("noop", {})

    noop = make_tool("noop", read_only=True)
    lead, _ = scripted_lead(
        {"lead": [delegate("worker"), reply("ok"), reply("ok")], "worker": worker},
        [definition("worker", tools=[noop])],
        tmp_path,
        delegation_policy=EXCLUSIVE,
    )
    if how == "provider_error":
        await lead.run("go")
        assert lead.list_subagents()[0].status == "failed"
    else:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lead.run, "go")
            await in_request.wait()
            assert IN_PROCESS_LEASES.holder("printer") is not None
            if how == "interrupt":
                lead.interrupt()
                release.set()
            else:
                tg.cancel_scope.cancel()
        assert lead.list_subagents()[0].status == "stopped"
    assert IN_PROCESS_LEASES.holder("printer") is None
    # a following delegation with the same key succeeds
    other, _ = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": ["fine"]},
        [definition("worker")],
        tmp_path,
        delegation_policy=EXCLUSIVE,
    )
    await other.run("go")
    assert [r.status for r in other.list_subagents()] == ["completed"]


async def test_failed_contender_never_frees_the_holders_lease(tmp_path: Path) -> None:
    lease = IN_PROCESS_LEASES.acquire_now("printer", "external-holder")
    try:
        lead, p = scripted_lead(
            {"lead": [delegate("worker"), reply("ok")], "worker": ["never"]},
            [definition("worker")],
            tmp_path,
            delegation_policy=EXCLUSIVE,
        )
        await lead.run("go")
        assert lead.list_subagents()[0].status == "failed"
        assert IN_PROCESS_LEASES.holder("printer") == "external-holder"
        stranger = Lease(key="printer", holder="someone-else", token=lease.token)
        assert IN_PROCESS_LEASES.release_now(stranger) is False
        stale = Lease(key="printer", holder="external-holder", token=lease.token - 1)
        assert IN_PROCESS_LEASES.release_now(stale) is False
        assert IN_PROCESS_LEASES.holder("printer") == "external-holder"
        assert p.requests_for("worker") == []
    finally:
        assert IN_PROCESS_LEASES.release_now(lease) is True


assert IN_PROCESS_LEASES.held() == {}


def test_lease_table_is_safe_under_thread_contention() -> None:
    """Many threads race for one key: exactly one wins each round, none waits."""
    wins: list[int] = []
    busy = 0
    lock = threading.Lock()
    barrier = threading.Barrier(8)

    def contend(i: int) -> None:
        nonlocal busy
        for _ in range(200):
            barrier.wait()
            lease: Lease | None = None
            try:
                lease = IN_PROCESS_LEASES.acquire_now("race", f"thread-{i}")
            except ResourceBusyError:
                with lock:
                    busy += 1
            else:
                with lock:
                    wins.append(i)
            barrier.wait()
            if lease is not None:
                IN_PROCESS_LEASES.release_now(lease)

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(wins) == 200
    assert busy == 200 * 7
    assert IN_PROCESS_LEASES.held() == {}


# -- owned -------------------------------------------------------------------------------------


def owned(factory: Any) -> DelegationPolicy:
    return DelegationPolicy("owned", resources=factory)


async def test_owned_one_factory_call_and_one_cleanup_per_delegation(tmp_path: Path) -> None:
    calls: list[str] = []
    factory = Cleanups(lambda: [make_tool("effect", calls=calls, read_only=True)])
    seen_agents: list[Any] = []
    original = factory.__call__

    def spy(agent: Any, definition: Any, context: Any) -> Any:
        seen_agents.append(agent)
        return original(agent, definition, context)

    lead, p = scripted_lead(
        {
            "lead": [delegate("worker"), delegate("worker"), reply("ok")],
            "worker": [tool_call("effect", {}), "one", tool_call("effect", {}), "two"],
        },
        [definition("worker")],
        tmp_path,
        delegation_policy=owned(spy),
        delegation_scope={"owner_id": "o", "conversation_id": "c"},
    )
    await lead.run("go")
    assert calls == ["effect", "effect"]
    assert len(factory.made) == 2
    factory.assert_exactly_once()
    records = lead.list_subagents()
    for record, context, agent in zip(records, factory.contexts, seen_agents, strict=True):
        assert context.delegation_id == record.delegation_id
        assert context.agent_id == record.agent_id == agent.agent_id
        assert context.parent_agent_id == lead.agent_id
        assert context.working_dir == str(lead.working_dir)
        assert context.scope == {"owner_id": "o", "conversation_id": "c"}
    # each delegation got its own fresh tool objects
    first, second = p.requests_for("worker")[0], p.requests_for("worker")[2]
    assert [t.name for t in first.tools] == [t.name for t in second.tools] == ["effect"]


@pytest.mark.parametrize("async_cleanup", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize(
    "scenario",
    [
        "succeeds",
        "fails",
        "setup_error_after_factory",
        "factory_alters_child",
        "interrupted_mid_request",
        "cancelled_mid_request",
        "lead_cancelled",
    ],
)
async def test_owned_cleanup_exactly_once(
    tmp_path: Path, scenario: str, async_cleanup: bool, meter_spy: Any
) -> None:
    in_request = anyio.Event()
    release = anyio.Event()

    def tools() -> list[Any]:
        effect = make_tool("effect", read_only=True)
        if scenario == "setup_error_after_factory":
            return [effect, ask_user]  # ask_user without human_input fails after the factory
        return [effect]

    factory = Cleanups(tools, async_cleanup=async_cleanup)
    resources: Any = factory
    if scenario == "factory_alters_child":

        def resources(agent: Any, definition: Any, context: Any) -> Any:
            made = factory(agent, definition, context)
            agent.set_tools([make_tool("sneaky")])
            return made

    async def worker(request: ModelRequest) -> Any:
        if scenario == "fails":
            raise ProviderError("boom")
        if scenario.endswith("mid_request") or scenario == "lead_cancelled":
            in_request.set()
            await release.wait()
            return tool_call("effect", {})
        return "done"

    lead, p = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": worker},
        [definition("worker", max_requests=3)],
        tmp_path,
        delegation_policy=owned(resources),
    )
    if scenario == "lead_cancelled":
        # the whole lead is cancelled after the factory returned, before the child runs
        async def start_hook(h: Any) -> None:
            in_request.set()
            await release.wait()

        lead.hooks.add(HookEvent.SubagentStart, start_hook)

    async def driver(tg: Any) -> None:
        await in_request.wait()
        assert factory.cleaned == []  # not before settlement
        if scenario == "interrupted_mid_request":
            lead.interrupt()
            release.set()
        else:
            tg.cancel_scope.cancel()

    async with anyio.create_task_group() as tg:
        if scenario.endswith("mid_request") or scenario == "lead_cancelled":
            tg.start_soon(driver, tg)
        await lead.run("go")
        tg.cancel_scope.cancel()
    assert len(factory.made) == 1
    factory.assert_exactly_once()
    [record] = lead.list_subagents()
    expected = {
        "succeeds": "completed",
        "fails": "failed",
        "setup_error_after_factory": "failed",
        "factory_alters_child": "failed",
        "interrupted_mid_request": "stopped",
        "cancelled_mid_request": "stopped",
        # cancelled before the child ran: deputy says not_started, we say stopped
        "lead_cancelled": "stopped",
    }[scenario]
    assert record.status == expected
    if scenario in ("setup_error_after_factory", "factory_alters_child"):
        assert record.stop_reason == "setup_error"
        assert p.requests_for("worker") == []
    if scenario == "factory_alters_child":
        assert "without changing or running the child" in (record.error or "")
    assert meter_spy.open_reservations() == 0


async def test_owned_cleanup_runs_for_every_child_when_the_whole_lead_is_cancelled(
    tmp_path: Path, meter_spy: Any
) -> None:
    """Three concurrent children in different phases; one host cancel; three cleanups."""
    in_request = anyio.Event()
    in_tool = anyio.Event()
    in_start_hook = anyio.Event()
    forever = anyio.Event()

    async def slow_tool() -> str:
        in_tool.set()
        await forever.wait()
        return "never"

    def tools() -> list[Any]:
        return [make_tool("effect", read_only=True), _async_tool("slow", slow_tool)]

    factory = Cleanups(tools, async_cleanup=True)

    async def worker(request: ModelRequest) -> Any:
        task = request.turns[0].text
        if '"task":"request"' in task:
            in_request.set()
            await forever.wait()
        return tool_call("slow", {})

    async def start_hook(h: Any) -> None:
        if h.task == "hook":
            in_start_hook.set()
            await forever.wait()

    lead, _ = scripted_lead(
        {
            "lead": [delegate_many(("worker", "request"), ("worker", "tool"), ("worker", "hook"))],
            "worker": worker,
        },
        [definition("worker", max_requests=2)],
        tmp_path,
        delegation_policy=owned(factory),
    )
    lead.hooks.add(HookEvent.SubagentStart, start_hook)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lead.run, "go")
        with anyio.fail_after(10):
            await in_request.wait()
            await in_tool.wait()
            await in_start_hook.wait()
        tg.cancel_scope.cancel()
    assert len(factory.made) == 3
    factory.assert_exactly_once()
    assert {r.status for r in lead.list_subagents()} <= {"stopped", "not_started"}
    assert all(r.completed_at is not None for r in lead.list_subagents())
    assert meter_spy.open_reservations() == 0


def _async_tool(name: str, fn: Any) -> Any:
    from deputy_runtime import Tool

    return Tool(
        name=name,
        description=name,
        parameters={"type": "object", "properties": {}},
        function=fn,
        read_only=True,
    )


async def test_cleanup_error_is_recorded_not_raised(tmp_path: Path) -> None:
    factory = Cleanups(fail_cleanup="cleanup fixture error")
    lead, p = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": ["done"]},
        [definition("worker")],
        tmp_path,
        delegation_policy=owned(factory),
    )
    result = await lead.run("go")
    assert result.stop_reason == "complete"
    [record] = lead.list_subagents()
    assert record.status == "completed"
    assert record.cleanup_error is not None
    assert "cleanup fixture error" in record.cleanup_error
    assert outcome(delegate_results(p)[0])["answer"] == "done"


async def test_owned_cleanup_when_subagent_start_interrupts(tmp_path: Path) -> None:
    factory = Cleanups(fail_cleanup="cleanup fixture error")
    lead, p = scripted_lead(
        {"lead": [delegate("worker")], "worker": ["never"]},
        [definition("worker")],
        tmp_path,
        delegation_policy=owned(factory),
    )
    lead.hooks.add(HookEvent.SubagentStart, lambda h: lead.interrupt("cancelled by owner"))
    await lead.run("go")
    [record] = lead.list_subagents()
    assert p.requests_for("worker") == []
    factory.assert_exactly_once()
    assert record.status == "not_started"
    assert "cleanup fixture error" in (record.cleanup_error or "")


async def test_owned_mode_rejects_definition_tools_without_calling_the_factory(
    tmp_path: Path,
) -> None:
    factory = Cleanups()
    lead, p = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": ["never"]},
        [definition("worker", tools=[make_tool("own")])],
        tmp_path,
        delegation_policy=owned(factory),
    )
    await lead.run("go")
    assert factory.made == []
    [record] = lead.list_subagents()
    assert (record.status, record.stop_reason) == ("failed", "setup_error")
    assert "owned mode requires tools from the resource factory" in (record.error or "")
    assert p.requests_for("worker") == []


async def test_factory_returning_the_wrong_type_fails_setup(tmp_path: Path) -> None:
    lead, p = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": ["never"]},
        [definition("worker")],
        tmp_path,
        delegation_policy=owned(lambda a, d, c: [make_tool("x")]),
    )
    await lead.run("go")
    [record] = lead.list_subagents()
    assert record.status == "failed"
    assert "must return DelegationResources" in (record.error or "")
    assert p.requests_for("worker") == []


async def test_async_factory_is_awaited(tmp_path: Path) -> None:
    cleaned: list[int] = []

    async def factory(agent: Any, definition: Any, context: Any) -> DelegationResources:
        await anyio.sleep(0)
        return DelegationResources(
            (make_tool("effect", read_only=True),), lambda: cleaned.append(1)
        )

    lead, p = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": ["done"]},
        [definition("worker")],
        tmp_path,
        delegation_policy=owned(factory),
    )
    await lead.run("go")
    assert [t.name for t in p.requests_for("worker")[0].tools] == ["effect"]
    assert cleaned == [1]


async def test_disallowed_tools_removes_a_tool_from_the_owned_factory(tmp_path: Path) -> None:
    calls: list[str] = []
    factory = Cleanups(
        lambda: [
            make_tool("effect", calls=calls, read_only=True),
            make_tool("keep", calls=calls, read_only=True),
        ]
    )
    lead, p = scripted_lead(
        {
            "lead": [delegate("worker"), delegate("solo"), reply("ok")],
            "worker": [tool_call("effect", {}), "done"],
            "solo": ["alone"],
        },
        [
            definition("worker", disallowed_tools=["Effect"]),
            definition("solo", disallowed_tools=["effect", "keep"]),
        ],
        tmp_path,
        delegation_policy=owned(factory),
    )
    await lead.run("go")
    worker_first = p.requests_for("worker")[0]
    assert [t.name for t in worker_first.tools] == ["keep"]
    assert calls == []  # the model asked for effect; it does not exist for this child
    assert p.requests_for("solo")[0].tools == ()
    factory.assert_exactly_once()


# -- setup failures: no request, no lease, no reservation ---------------------------------------


@pytest.mark.parametrize(
    "case",
    [
        "ceiling",
        "ceiling_exclusive",
        "human_input",
        "human_input_exclusive",
        "mcp_shared",
        "mcp_exclusive",
        "busy",
        "provider_native",
        "chat_factory_error",
        "missing_skill",
    ],
)
async def test_setup_failures_make_no_request_and_leave_nothing(
    tmp_path: Path, case: str, meter_spy: Any
) -> None:
    policy = DelegationPolicy()
    permissions = None
    worker = definition("worker")
    external: Lease | None = None
    if case.startswith("ceiling"):
        permissions = Permissions(mode=PermissionMode.READONLY)
        worker = definition("worker", permission_mode="full")
    elif case.startswith("human_input"):
        worker = definition("worker", tools=[ask_user])
    elif case == "mcp_shared":
        worker = definition("worker", mcp_servers=["host-server"])
    elif case == "mcp_exclusive":
        worker = definition("worker", mcp_servers=["host-server"])
        policy = EXCLUSIVE
    elif case == "busy":
        policy = EXCLUSIVE
        external = IN_PROCESS_LEASES.acquire_now("printer", "external-holder")
    if case.endswith("_exclusive"):
        policy = EXCLUSIVE  # the lease is taken first and must be given back
    elif case == "provider_native":
        worker = definition("worker", params={"tools": [{"type": "web_search"}]})
    elif case == "missing_skill":
        # skill paths are loaded only when the subagent is built
        worker = definition("worker", skills=[str(tmp_path / "no-such-skill")])
        policy = EXCLUSIVE
    elif case == "chat_factory_error":

        def broken(definition: Any, context: Any) -> Chat:
            raise RuntimeError("no credentials for the child")

        policy = DelegationPolicy(chat=broken)
    stops: list[Any] = []
    lead, p = scripted_lead(
        {"lead": [delegate("worker"), reply("understood")], "worker": ["never"]},
        [worker],
        tmp_path,
        delegation_policy=policy,
        permissions=permissions,
    )
    lead.hooks.add(HookEvent.SubagentStart, stops.append)
    try:
        result = await lead.run("go")
    finally:
        if external is not None:
            assert IN_PROCESS_LEASES.holder("printer") == "external-holder"
            IN_PROCESS_LEASES.release_now(external)
    assert result.stop_reason == "complete"  # a setup failure never raises out of run()
    assert p.requests_for("worker") == []
    assert stops == []  # SubagentStart never fired
    [record] = lead.list_subagents()
    assert (record.status, record.stop_reason) == ("failed", "setup_error")
    assert record.started_at is None
    [res] = delegate_results(p)
    assert res.error is not None
    assert res.error.startswith("Subagent 'worker' failed.\n")
    body = outcome(res)
    assert body["status"] == "failed"
    assert body["stop_reason"] == "setup_error"
    expected = {
        "ceiling": "Lead mode readonly cannot delegate with mode full",
        "ceiling_exclusive": "Lead mode readonly cannot delegate with mode full",
        "human_input": "human_input",
        "human_input_exclusive": "human_input",
        "mcp_shared": "owned resource factory",
        "mcp_exclusive": "owned resource factory",
        "busy": "busy",
        "provider_native": "provider-native",
        "chat_factory_error": "no credentials for the child",
        "missing_skill": "no-such-skill",
    }[case]
    assert expected in res.error
    assert IN_PROCESS_LEASES.held() == {}
    assert meter_spy.open_reservations() == 0
    assert record.usage.requests == 0


async def test_ceiling_error_text_reaches_the_leads_model(tmp_path: Path) -> None:
    lead, p = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": ["never"]},
        [definition("worker", permission_mode="full")],
        tmp_path,
        permissions=Permissions(mode=PermissionMode.READONLY),
    )
    with pytest.raises(PermissionCeilingError) as raised:
        lead.permissions.ceiling("full")
    await lead.run("go")
    [record] = lead.list_subagents()
    error = delegate_results(p)[0].error or ""
    assert str(raised.value) in error
    assert "Sub-agent permission mode cannot change under the lead policy" in error
    assert record.error == str(raised.value)


async def test_mcp_servers_allowed_in_owned_mode(tmp_path: Path) -> None:
    factory = Cleanups(lambda: [make_tool("mcp_lookup", read_only=True)])
    lead, p = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": ["done"]},
        [definition("worker", mcp_servers=["host-server"])],
        tmp_path,
        delegation_policy=owned(factory),
    )
    await lead.run("go")
    assert [r.status for r in lead.list_subagents()] == ["completed"]
    assert [t.name for t in p.requests_for("worker")[0].tools] == ["mcp_lookup"]


# -- human_input -------------------------------------------------------------------------------


async def test_human_input_answers_ask_user_with_the_childs_context(tmp_path: Path) -> None:
    asked: list[tuple[Any, Any]] = []

    async def human(questions: Any, context: Any) -> dict[str, str]:
        asked.append((questions, context))
        return {q["question"]: "blue" for q in questions}

    question = {"questions": [{"question": "Which colour?", "options": ["red", "blue"]}]}
    lead, p = scripted_lead(
        {
            "lead": [delegate("worker"), reply("ok")],
            "worker": [tool_call("ask_user", question), "picked"],
        },
        [definition("worker", tools=[ask_user], permission_mode="plan")],
        tmp_path,
        permissions=Permissions(mode=PermissionMode.FULL),
        delegation_policy=DelegationPolicy(human_input=human),
        delegation_scope={"owner_id": "owner-1", "conversation_id": "c1"},
    )
    await lead.run("go")
    [record] = lead.list_subagents()
    [(questions, context)] = asked
    assert questions == [{"question": "Which colour?", "options": ["red", "blue"]}]
    assert context.agent_id == record.agent_id
    assert context.delegation_id == record.delegation_id
    assert context.run_id == record.run_id
    assert context.scope == {"owner_id": "owner-1", "conversation_id": "c1"}
    answer = p.requests_for("worker")[1].turns[-1].contents[0]
    assert isinstance(answer, ContentToolResult)
    assert msgspec.json.decode(answer.value) == {"Which colour?": "blue"}


async def test_human_input_is_routed_per_lead(tmp_path: Path) -> None:
    """Two leads run concurrently; each handler sees only its own child."""
    both = anyio.Event()
    waiting = 0
    seen: dict[str, list[Any]] = {"owner-1": [], "owner-2": []}

    def handler_for(owner: str) -> Any:
        async def human(questions: Any, context: Any) -> dict[str, str]:
            nonlocal waiting
            seen[owner].append(context)
            waiting += 1
            if waiting == 2:
                both.set()
            await both.wait()
            return {"q": owner}

        return human

    leads = []
    for owner in ("owner-1", "owner-2"):
        lead, _ = scripted_lead(
            {
                "lead": [delegate("worker"), reply("ok")],
                "worker": [tool_call("ask_user", {"questions": [{"question": "q"}]}), "fine"],
            },
            [definition("worker", tools=[ask_user])],
            tmp_path,
            permissions=Permissions(mode=PermissionMode.FULL),
            delegation_policy=DelegationPolicy(human_input=handler_for(owner)),
            delegation_scope={"owner_id": owner, "conversation_id": "c"},
        )
        leads.append((owner, lead))
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for _, lead in leads:
                tg.start_soon(lead.run, "go")
    for owner, lead in leads:
        [context] = seen[owner]
        [record] = lead.list_subagents()
        assert context.scope["owner_id"] == owner
        assert context.delegation_id == record.delegation_id
        assert context.parent_agent_id == lead.agent_id


# -- chat factory ------------------------------------------------------------------------------


async def test_chat_factory_builds_each_subagents_chat(tmp_path: Path) -> None:
    child_provider = ScriptedProvider({"worker": ["from the factory"]}, model="cheap")
    contexts: list[Any] = []

    def make_chat(definition: Any, context: Any) -> Chat:
        contexts.append((definition.name, context))
        return Chat(child_provider, "IGNORED SYSTEM PROMPT")

    lead, p = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")]},
        [definition("worker")],
        tmp_path,
        delegation_policy=DelegationPolicy(chat=make_chat),
    )
    await lead.run("go")
    assert p.requests_for("worker") == []
    [request] = child_provider.requests_for("worker")
    assert request.system_prompt == "ROLE:worker"
    [(name, context)] = contexts
    [record] = lead.list_subagents()
    assert name == "worker"
    assert context.delegation_id == record.delegation_id
    assert outcome(delegate_results(p)[0])["answer"] == "from the factory"


async def test_chat_factory_may_not_return_the_leads_chat(tmp_path: Path) -> None:
    holder: list[LeadAgent] = []
    lead, p = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": ["never"]},
        [definition("worker")],
        tmp_path,
        delegation_policy=DelegationPolicy(chat=lambda d, c: holder[0].chat),
    )
    holder.append(lead)
    await lead.run("go")
    [record] = lead.list_subagents()
    assert record.status == "failed"
    assert "lead's own chat" in (record.error or "")
    assert p.requests_for("worker") == []


# -- time bounds on settlement ------------------------------------------------------------------


async def test_slow_cleanup_is_not_cut_short_without_cancellation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deputy_runtime.runtime import _coordinator

    monkeypatch.setattr(_coordinator, "SHIELDED_SECONDS", 0)  # "slow" = any checkpoint
    finished: list[str] = []

    async def factory(agent: Any, definition: Any, context: Any) -> DelegationResources:
        async def cleanup() -> None:
            await anyio.sleep(0)
            finished.append("closed")

        return DelegationResources((), cleanup)

    lead, _ = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": ["done"]},
        [definition("worker")],
        tmp_path,
        delegation_policy=owned(factory),
    )
    await lead.run("go")
    assert finished == ["closed"]
    assert lead.list_subagents()[0].cleanup_error is None


async def test_slow_subagent_stop_hook_is_not_dropped_silently(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deputy_runtime.runtime import _coordinator

    monkeypatch.setattr(_coordinator, "SHIELDED_SECONDS", 0)
    finished: list[str] = []

    async def audit(h: Any) -> None:
        await anyio.sleep(0)
        finished.append(h.status)

    lead, _ = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": ["done"]},
        [definition("worker")],
        tmp_path,
    )
    lead.hooks.add(HookEvent.SubagentStop, audit)
    await lead.run("go")
    [record] = lead.list_subagents()
    assert finished == ["completed"] or "SubagentStop" in (record.hook_error or "")


async def test_skill_paths_are_loaded_when_the_subagent_is_built(tmp_path: Path) -> None:
    skill_dir = tmp_path / "skills" / "review"
    lead, p = scripted_lead(
        {
            "lead": [delegate("worker"), delegate("worker"), reply("ok")],
            "worker": ["first", "second"],
        },
        [definition("worker", skills=[str(skill_dir)])],
        tmp_path,
    )
    # The skill did not exist when the lead was built; it is read at delegation time,
    # and read again for the next delegation (no stale copy).
    skill_dir.mkdir(parents=True)
    (skill_dir / "SKILL.md").write_text(
        "---\nname: review\ndescription: Review things v1\n---\nDo it.\n"
    )

    def bump(h: Any) -> None:
        (skill_dir / "SKILL.md").write_text(
            "---\nname: review\ndescription: Review things v2\n---\nDo it.\n"
        )

    lead.hooks.add(HookEvent.SubagentStop, bump)
    await lead.run("go")
    first, second = p.requests_for("worker")
    assert "Review things v1" in (first.system_prompt or "")
    assert "Review things v2" in (second.system_prompt or "")
    assert [t.name for t in first.tools] == ["load_skill"]


async def test_cleanup_runs_when_the_factory_returns_invalid_tools(tmp_path: Path) -> None:
    opened: list[str] = []
    closed: list[str] = []

    def factory(agent: Any, definition: Any, context: Any) -> DelegationResources:
        opened.append(context.delegation_id)  # e.g. a browser or an MCP session
        return DelegationResources(
            ("invalid",),  # type: ignore[arg-type]  # e.g. raw MCP tool dicts
            lambda: closed.append(context.delegation_id),
        )

    lead, p = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": ["never"]},
        [definition("worker")],
        tmp_path,
        delegation_policy=owned(factory),
    )
    await lead.run("go")
    assert lead.list_subagents()[0].status == "failed"
    assert p.requests_for("worker") == []
    assert closed == opened
