"""Real delegations on Redis: a LeadAgent with RedisLeases and a RedisBudget.

Every test drives a real LeadAgent on the scripted provider against the real
redis-server of the fixture; nothing is mocked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import coredis
import pytest

from deputy_runtime import (
    AgentDefinition,
    Chat,
    DelegationPolicy,
    ExclusiveResource,
    LeadAgent,
    Tool,
    UsageLimits,
)
from deputy_runtime.chat import ScriptedProvider, tool_call, tool_calls
from deputy_runtime.errors import CoordinationUnavailableError
from deputy_runtime.redis import RedisBudget, RedisConnection, RedisCoordinator, RedisLeases
from deputy_runtime.runtime import DelegationContext, HookEvent, Hooks
from tests.redis.redis_support import RedisServer
from tests.runtime.helpers import definition, delegate, delegate_many, make_tool

pytestmark = pytest.mark.anyio


def lead_with(
    script: Mapping[str | None, Any], sub_agents: list[AgentDefinition], **kwargs: Any
) -> tuple[LeadAgent, ScriptedProvider]:
    provider = ScriptedProvider(script)
    return LeadAgent(Chat(provider), sub_agents, **kwargs), provider


def outcomes(provider: ScriptedProvider) -> list[str]:
    """Every delegate result text (value or error) the lead's model received."""
    out: list[str] = []
    for request in provider.requests_for("lead"):
        for content in request.turns[-1].contents:
            value = getattr(content, "value", None)
            error = getattr(content, "error", None)
            if error is not None or value is not None:
                out.append(str(error if error is not None else value))
    return out


async def evalsha_calls(url: str) -> int:
    """How many scripts the server ran so far (the round trips of the lease and ledger)."""
    client = coredis.Redis.from_url(url, decode_responses=True)
    async with client:
        stats: Any = await client.info("commandstats")
    total = 0
    for key in ("cmdstat_evalsha", "cmdstat_eval"):
        if key in stats:
            total += int(stats[key]["calls"])
    return total


def counted_coordinator(url: str, namespace: str) -> RedisCoordinator:
    """A coordinator on budget ``b`` (10 requests) whose round trips a test counts.

    Renewals are due only after a third of the shorter ttl: long enough here that none
    falls inside a test's run on a loaded machine, so the count is exact.
    """
    return RedisCoordinator(
        url,
        budget_name="b",
        limits={"requests": 10},
        namespace=namespace,
        lease_ttl=600,
        reserve_ttl=600,
    )


async def test_the_fencing_token_reaches_the_delegation_context(
    redis_url: str, namespace: str
) -> None:
    contexts: list[DelegationContext] = []
    provider = ScriptedProvider(
        {"lead": [delegate("worker"), delegate("worker"), "done"], "worker": ["a", "b"]}
    )

    def chat(definition: AgentDefinition, context: DelegationContext) -> Chat:
        contexts.append(context)
        return Chat(provider)

    async with RedisLeases(redis_url, namespace=namespace) as leases:
        policy = DelegationPolicy(
            resource_mode="exclusive", resource_key="repo", lease_backend=leases, chat=chat
        )
        lead = LeadAgent(Chat(provider), [definition("worker")], delegation_policy=policy)
        result = await lead.run("go")
        assert result.stop_reason == "complete"
        tokens = [c.lease_token for c in contexts]
        assert len(tokens) == 2
        assert all(isinstance(t, int) for t in tokens)
        assert tokens[0] < tokens[1]  # type: ignore[operator]
        assert await leases.current("repo") is None  # released at settlement


async def test_a_busy_key_fails_fast_or_waits_as_the_policy_says(
    redis_url: str, namespace: str
) -> None:
    async with RedisLeases(redis_url, namespace=namespace) as leases:
        other = await leases.acquire("repo", "other-process", wait=False)
        lead, provider = lead_with(
            {"lead": [delegate("worker"), "done"], "worker": ["never"]},
            [definition("worker")],
            delegation_policy=DelegationPolicy(
                resource_modes=(ExclusiveResource("repo", backend=leases),)
            ),
        )
        assert (await lead.run("go")).stop_reason == "complete"
        [text] = outcomes(provider)
        assert "busy" in text
        assert lead.list_subagents()[0].status == "failed"

        waiting, _ = lead_with(
            {"lead": [delegate("worker"), "done"], "worker": ["ran"]},
            [definition("worker")],
            delegation_policy=DelegationPolicy(
                resource_modes=(ExclusiveResource("repo", wait=True, backend=leases),)
            ),
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(waiting.run, "go")
            # Queued behind the other process's lease: running, no result yet.
            while not waiting.list_subagents():
                await anyio.sleep(0.01)
            assert waiting.list_subagents()[0].completed_at is None
            await leases.release(other)
        assert waiting.list_subagents()[0].status == "completed"


async def test_a_lease_taken_over_stops_the_holder_lease_lost(
    redis_url: str, namespace: str
) -> None:
    leads: list[LeadAgent] = []

    async def stall() -> str:
        # Another process takes the key over (as if this holder's lease had expired),
        # then the tool waits until the holder has been told to stop.
        client = coredis.Redis.from_url(redis_url, decode_responses=True)
        async with client:
            await client.set(f"{namespace}:lease:repo", "999999:intruder")
        d = next(iter(leads[0].delegations.active.values()))
        while d.cancel_reason is None:
            await anyio.sleep(0.01)
        return "stopped"

    tool = Tool(
        name="stall",
        description="Waits.",
        parameters={"type": "object", "properties": {}},
        function=stall,
    )
    async with RedisLeases(redis_url, namespace=namespace, ttl=0.3) as leases:
        lead, _ = lead_with(
            {"lead": [delegate("worker"), "done"], "worker": [tool_call("stall"), "never"]},
            [definition("worker", tools=(tool,))],
            delegation_policy=DelegationPolicy(
                resource_mode="exclusive", resource_key="repo", lease_backend=leases
            ),
        )
        leads.append(lead)
        assert (await lead.run("go")).stop_reason == "complete"
        [record] = lead.list_subagents()
        assert (record.status, record.stop_reason) == ("stopped", "lease_lost")
        # Release is compare-and-delete: the intruder still holds the key.
        current = await leases.current("repo")
        assert current is not None
        assert current.holder == "intruder"


async def test_a_shared_budget_is_reserved_settled_and_tighter(
    redis_url: str, namespace: str
) -> None:
    async with RedisBudget(redis_url, "b", {"requests": 6}, namespace=namespace) as budget:
        # The lead's first request uses 1, it keeps a spare one, and its next one is
        # reserved before the two delegations (each allowed 2 requests by its
        # definition) share the 3 left: they split them 2 and 1, one after the other.
        script: dict[str | None, Any] = {
            "lead": [delegate_many(("worker", "one"), ("worker", "two")), "done"],
            "worker": [tool_call("t"), "a", tool_call("t"), "b"],
        }
        tool = make_tool("t")
        worker = definition("worker", max_requests=2, tools=(tool,))
        lead, provider = lead_with(script, [worker], shared_budget=budget)
        result = await lead.run("go")
        assert result.stop_reason == "complete"
        records = lead.list_subagents()
        limits = sorted(r.limits.max_requests or 0 for r in records if r.limits)
        assert limits == [1, 2]
        state = await budget.state()
        # Everything the run sent is on the ledger: the lead's 2 requests and 2 tool
        # calls (the delegations) as well as the subagents' usage.
        assert state.used.requests == result.usage.requests == provider.requests
        assert state.used.tool_calls == result.usage.tool_calls
        assert state.used.input_tokens == result.usage.input_tokens
        assert state.reserved.requests == 0
        assert state.holders == 0
        assert state.remaining.requests == 6 - result.usage.requests


@pytest.mark.parametrize(("ledger", "ran"), [(5, 3), (4, 3), (3, 2)])
async def test_a_delegation_tops_up_on_the_ledger_as_far_as_it_grants(
    redis_url: str, namespace: str, ledger: int, ran: int
) -> None:
    # The lead's delegate call is its own first tool call (reserved on the ledger with
    # its next request). The uncapped worker's share is 2 of the 4 local tool calls left
    # (the lead counts as a party) and the ledger grants those 2; its turn asks for 3.
    # With 5 on the ledger the third is reserved there and topped up from the lead; with
    # 4 as well (the ledger's last); with 3 the ledger has nothing left, so the top-up is
    # given back and the third call is refused. The ledger is never passed.
    calls: list[str] = []
    tool = make_tool("t", calls=calls)
    async with RedisBudget(redis_url, "b", {"tool_calls": ledger}, namespace=namespace) as budget:
        lead, provider = lead_with(
            {"lead": [delegate("worker"), "done"], "worker": [tool_calls(*[("t", {})] * 3), "a"]},
            [definition("worker", tools=(tool,))],
            shared_budget=budget,
            usage_limits=UsageLimits(max_tool_calls=5),
        )
        result = await lead.run("go")
        assert result.stop_reason == "complete"
        [record] = lead.list_subagents()
        assert len(calls) == record.usage.tool_calls == ran
        assert record.stop_reason == ("complete" if ran == 3 else "tool_call_limit")
        assert record.limits is not None
        assert record.limits.max_tool_calls == ran  # the share and what it drew
        state = await budget.state()
        assert state.used.tool_calls == result.usage.tool_calls == 1 + ran <= ledger
        assert state.used.requests == provider.requests
        # Every extension was settled with the delegation: nothing is left held.
        assert (state.reserved.tool_calls, state.holders) == (0, 0)


async def test_a_delegation_past_its_ledger_grant_stops_instead_of_topping_up(
    redis_url: str, namespace: str
) -> None:
    # 5 requests: the lead's first and its spare, its next one reserved before the
    # delegation, which is granted the 2 left. The uncapped worker wants 6 requests; the
    # lead's own limit (50) has room to top it up, but that room is not on the ledger:
    # the worker stops at its grant and the ledger is never passed.
    async with RedisBudget(redis_url, "b", {"requests": 5}, namespace=namespace) as budget:
        tool = make_tool("t")
        lead, provider = lead_with(
            {"lead": [delegate("worker"), "done"], "worker": [tool_call("t")] * 5 + ["a"]},
            [definition("worker", tools=(tool,))],
            shared_budget=budget,
            usage_limits=UsageLimits(max_requests=50),
        )
        result = await lead.run("go")
        assert result.stop_reason == "complete"
        [record] = lead.list_subagents()
        assert (record.status, record.stop_reason) == ("stopped", "request_limit")
        assert record.usage.requests == 2
        state = await budget.state()
        assert state.used.requests == provider.requests == result.usage.requests <= 5
        assert (state.reserved.requests, state.holders) == (0, 0)


async def test_a_spent_shared_budget_leaves_new_delegations_not_started(
    redis_url: str, namespace: str
) -> None:
    # 4 requests: the lead's first, the first delegation's, the lead's second (reserved
    # before that delegation) and the lead's third, sent on the spare it kept with its
    # first; the second delegation finds nothing left.
    async with RedisBudget(redis_url, "b", {"requests": 4}, namespace=namespace) as budget:
        lead, _ = lead_with(
            {"lead": [delegate("worker"), delegate("worker"), "done"], "worker": ["a"]},
            [definition("worker")],
            shared_budget=budget,
        )
        assert (await lead.run("go")).stop_reason == "complete"
        first, second = lead.list_subagents()
        assert first.status == "completed"
        assert (second.status, second.stop_reason) == ("not_started", "request_limit")
        state = await budget.state()
        assert (state.used.requests, state.reserved.requests, state.holders) == (4, 0, 0)


async def test_lease_and_budget_of_one_connection_cost_two_round_trips(
    redis_url: str, namespace: str
) -> None:
    async with counted_coordinator(redis_url, namespace) as coord:
        lead, _ = lead_with(
            {"lead": [delegate("worker"), "done"], "worker": ["a"]},
            [definition("worker")],
            delegation_policy=DelegationPolicy(
                resource_mode="exclusive", resource_key="repo", lease_backend=coord.leases
            ),
            shared_budget=coord.budget,
        )
        # Load both scripts into the server first (a first run also sends the script).
        lease, _ = await coord.acquire_and_reserve("warm", "warm", {"requests": 0}, wait=False)
        await coord.release_and_settle(lease, {})
        before = await evalsha_calls(redis_url)
        assert (await lead.run("go")).stop_reason == "complete"
        after = await evalsha_calls(redis_url)
        # Taking both in one script and giving both back in one; the holder finished
        # before its first renewal was due. The lead's own two requests cost a
        # reservation and a settlement each (its second is reserved before the
        # delegation, with the turn's tool call), and so does its spare request.
        assert after - before == 2 + 3 * 2
        assert lead.list_subagents()[0].status == "completed"
        state = await coord.budget.state()
        assert (state.used.requests, state.reserved.requests) == (1 + 2, 0)
        assert await coord.leases.current("repo") is None


async def test_parallel_delegate_draws_on_the_shared_budget(redis_url: str, namespace: str) -> None:
    async with RedisBudget(redis_url, "b", {"requests": 3}, namespace=namespace) as budget:
        lead, _ = lead_with(
            {"worker": lambda request: "answer"},
            [definition("worker")],
            shared_budget=budget,
        )
        result = await lead.parallel_delegate([("worker", f"t{i}") for i in range(5)], max_active=1)
        assert result.statuses.count("completed") == 3
        assert result.run.stop_reason == "request_limit"
        assert result.run.usage.requests == 3
        state = await budget.state()
        assert (state.used.requests, state.reserved.requests, state.holders) == (3, 0, 0)


async def test_redis_down_stops_the_lead_before_it_sends_a_request(
    restartable_redis: RedisServer, namespace: str
) -> None:
    connection = RedisConnection(restartable_redis.url, connect_timeout=1, timeout=1, retry_for=1)
    async with connection:
        budget = RedisBudget(connection, "b", {"requests": 5}, namespace=namespace)
        async with budget:
            lead, provider = lead_with(
                {"lead": [delegate("worker"), "done"], "worker": ["a"]},
                [definition("worker")],
                shared_budget=budget,
            )
            restartable_redis.stop()
            with pytest.raises(CoordinationUnavailableError, match="Redis"):
                await lead.run("go")
            # The lead's first request needs its reservation: nothing went unaccounted.
            assert provider.requests == 0
            assert lead.last_result is not None
            assert lead.last_result.stop_reason == "error"


async def test_redis_down_fails_a_new_delegation_with_a_tool_error(
    restartable_redis: RedisServer, namespace: str
) -> None:
    # Redis goes away after the lead reserved its next request and before the delegation
    # reserves its share: the delegation fails (a tool error), and the lead's run then
    # raises when it cannot settle its own request.
    hooks = Hooks()
    hooks.add(HookEvent.PreToolUse, lambda _: restartable_redis.stop())
    connection = RedisConnection(restartable_redis.url, connect_timeout=1, timeout=1, retry_for=1)
    async with connection:
        budget = RedisBudget(connection, "b", {"requests": 5}, namespace=namespace)
        async with budget:
            leases = RedisLeases(connection, namespace=namespace)
            lead, provider = lead_with(
                {"lead": [delegate("worker"), "done"], "worker": ["a"]},
                [definition("worker")],
                delegation_policy=DelegationPolicy(
                    resource_mode="exclusive", resource_key="repo", lease_backend=leases
                ),
                shared_budget=budget,
                hooks=hooks,
            )
            with pytest.raises(CoordinationUnavailableError):
                await lead.run("go")
            [record] = lead.list_subagents()
            assert (record.status, record.stop_reason) == ("failed", "setup_error")
            assert record.error is not None
            assert "Redis" in record.error
            [text] = outcomes(provider)
            assert "failed" in text


async def test_a_reservation_that_expires_stops_the_delegation_lease_lost(
    redis_url: str, namespace: str
) -> None:
    leads: list[LeadAgent] = []

    async def stall() -> str:
        # The reservation's expiry passes (as if its renewals had not reached Redis); the
        # next read of the ledger returns its grant. The tool then waits for the stop.
        d = next(iter(leads[0].delegations.active.values()))
        client = coredis.Redis.from_url(redis_url, decode_responses=True)
        async with client:
            await client.zadd(f"{namespace}:budget:b:exp", {d.delegation_id: 0})
        await budget.state()
        while d.cancel_reason is None:
            await anyio.sleep(0.01)
        return "stopped"

    tool = Tool(
        name="stall",
        description="Waits.",
        parameters={"type": "object", "properties": {}},
        function=stall,
    )
    async with RedisBudget(
        redis_url, "b", {"requests": 10}, namespace=namespace, ttl=0.3
    ) as budget:
        lead, _ = lead_with(
            {"lead": [delegate("worker"), "done"], "worker": [tool_call("stall"), "never"]},
            [definition("worker", tools=(tool,), max_requests=4)],
            shared_budget=budget,
        )
        leads.append(lead)
        result = await lead.run("go")
        assert result.stop_reason == "complete"
        [record] = lead.list_subagents()
        assert (record.status, record.stop_reason) == ("stopped", "lease_lost")
        # The grant went back once (on expiry); the settlement counted the usage only.
        # The lead's own two requests are on the ledger as well.
        state = await budget.state()
        assert (state.reserved.requests, state.holders) == (0, 0)
        assert state.used.requests == record.usage.requests + 2 == result.usage.requests
        assert state.remaining.requests == 10 - result.usage.requests


async def test_a_settlement_while_redis_is_down_lands_when_it_is_back(
    restartable_redis: RedisServer, namespace: str
) -> None:
    leads: list[LeadAgent] = []

    def outage() -> str:
        restartable_redis.stop()  # persistent: the ledger survives the restart
        return "redis is down"

    async def restart_once_settling() -> None:
        # The delegation has settled in the lead (its settlement to Redis is retrying).
        while not (leads and leads[0].list_subagents()):
            await anyio.sleep(0.01)
        while leads[0].list_subagents()[0].completed_at is None:
            await anyio.sleep(0.01)
        await anyio.to_thread.run_sync(restartable_redis.start)

    connection = RedisConnection(restartable_redis.url, retry_for=30)
    async with (
        connection,
        RedisBudget(connection, "b", {"requests": 10}, namespace=namespace) as budget,
    ):
        lead, _ = lead_with(
            {"lead": [delegate("worker"), "done"], "worker": [tool_call("outage"), "ok"]},
            [definition("worker", tools=(make_tool("outage", outage),), max_requests=4)],
            shared_budget=budget,
        )
        leads.append(lead)
        async with anyio.create_task_group() as tg:
            tg.start_soon(restart_once_settling)
            assert (await lead.run("go")).stop_reason == "complete"
        [record] = lead.list_subagents()
        assert record.status == "completed"
        assert record.cleanup_error is None
        state = await budget.state()
        # The worker's 2 requests and the lead's 2 (its second settled after the outage).
        assert (state.used.requests, state.reserved.requests, state.holders) == (4, 0, 0)


async def test_the_leads_tool_calls_take_their_slots_from_the_shared_budget(
    redis_url: str, namespace: str
) -> None:
    calls: list[str] = []
    async with RedisBudget(redis_url, "b", {"tool_calls": 1}, namespace=namespace) as budget:
        lead, provider = lead_with(
            {"lead": [tool_calls(("t", {}), ("t", {})), "done"]},
            [definition("worker")],
            tools=[make_tool("t", calls=calls)],
            shared_budget=budget,
        )
        result = await lead.run("go")
        # One slot on the ledger: the first call runs, the second is refused and the run
        # stops after answering the turn.
        assert calls == ["t"]
        assert result.stop_reason == "tool_call_limit"
        errors = [getattr(c, "error", None) for c in result.turns[-1].contents]
        errors = [e for e in errors if e]
        assert errors == ["Tool call limit reached; the call did not run."]
        state = await budget.state()
        assert (state.used.tool_calls, state.remaining.tool_calls) == (1, 0)
        assert state.used.requests == provider.requests == 1
        assert state.holders == 0


async def test_a_shared_token_budget_stops_the_lead_after_one_overrunning_response(
    redis_url: str, namespace: str
) -> None:
    # Every scripted response uses 10 input tokens: 15 allow a second request (5 are
    # left when it is sent), which overruns by 5; the third finds nothing left.
    async with RedisBudget(redis_url, "b", {"input_tokens": 15}, namespace=namespace) as budget:
        lead, provider = lead_with(
            {"lead": [tool_call("t"), tool_call("t"), "never sent"]},
            [definition("worker")],
            tools=[make_tool("t")],
            shared_budget=budget,
        )
        result = await lead.run("go")
        assert result.stop_reason == "input_token_limit"
        assert provider.requests == 2
        state = await budget.state()
        assert state.used.input_tokens == 20 == result.usage.input_tokens
        assert (state.remaining.input_tokens, state.reserved.input_tokens) == (-5, 0)
        assert state.holders == 0


async def test_a_lead_cancelled_mid_request_settles_its_reservation(
    redis_url: str, namespace: str
) -> None:
    sent = anyio.Event()

    async def hang(request: Any) -> str:
        sent.set()
        await anyio.sleep_forever()
        return "never"

    async with RedisBudget(redis_url, "b", {"requests": 5}, namespace=namespace) as budget:
        lead, _ = lead_with({"lead": hang}, [definition("worker")], shared_budget=budget)
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                with anyio.CancelScope() as scope:
                    scopes.append(scope)
                    await lead.run("go")

            scopes: list[anyio.CancelScope] = []
            tg.start_soon(run)
            await sent.wait()
            scopes[0].cancel()
        # The request was sent: it counts one request; nothing stays reserved.
        state = await budget.state()
        assert (state.used.requests, state.reserved.requests, state.holders) == (1, 0, 0)
        assert state.remaining.requests == 4
