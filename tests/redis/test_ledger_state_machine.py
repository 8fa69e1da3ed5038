"""The shared ledger against a plain Python model, in random orders of operations.

Reserve, re-reserve, settle (on time, late after expiry, repeated), expire and crash run
in any order against a real redis-server; after every step the ledger's state must equal
the model's and add up (remaining + reserved + used == limit).

Expiry is forced rather than waited for: the rule moves the holder's expiry into the past
in the ledger's expiry set (a documented key; see docs/redis.md) and then reads the
state, which reclaims it, exactly as a reserve by any process would.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    rule,
    run_state_machine_as_test,
)

from deputy_runtime.errors import BudgetLedgerError
from deputy_runtime.redis import RedisBudget

pytestmark = pytest.mark.slow

LIMIT_REQUESTS = 20
LIMIT_MICRO = 1_000_000  # cost_usd 1.0
counts = st.integers(min_value=0, max_value=12)
micro = st.integers(min_value=0, max_value=400_000)


@dataclass
class Model:
    remaining: dict[str, int] = field(
        default_factory=lambda: {"requests": LIMIT_REQUESTS, "cost": LIMIT_MICRO}
    )
    reserved: dict[str, int] = field(default_factory=lambda: {"requests": 0, "cost": 0})
    used: dict[str, int] = field(
        default_factory=lambda: {"requests": 0, "cost": 0, "input_tokens": 0}
    )
    grants: dict[str, dict[str, int]] = field(default_factory=dict)  # live reservations
    ended: dict[str, str] = field(default_factory=dict)  # holder -> "expired" | "settled"


class LedgerMachine(RuleBasedStateMachine):
    portal: BlockingPortal
    url: str

    live = Bundle("live")  # reservations whose holder can still settle
    crashed = Bundle("crashed")  # reservations whose process died (only expiry frees them)
    ended = Bundle("ended")  # expired or settled holders

    def __init__(self) -> None:
        super().__init__()
        self.budget = RedisBudget(
            self.url,
            "ledger",
            {"requests": LIMIT_REQUESTS, "cost_usd": 1.0},
            namespace=f"sm-{uuid.uuid4().hex[:12]}",
            ttl=600,
        )
        self.context: AbstractContextManager[RedisBudget] = self.portal.wrap_async_context_manager(
            self.budget
        )
        self.context.__enter__()
        self.model = Model()
        self.serial = 0

    def teardown(self) -> None:
        self.context.__exit__(None, None, None)

    def _new_holder(self) -> str:
        self.serial += 1
        return f"h{self.serial}"

    @rule(target=live, requests=st.none() | counts, cost=st.none() | micro)
    def reserve(self, requests: int | None, cost: int | None) -> str:
        holder = self._new_holder()
        want = {"requests": requests, "cost_usd": None if cost is None else cost / 1e6}
        grant = self.portal.call(self.budget.reserve, holder, want)
        expected = {}
        for key, asked in (("requests", requests), ("cost", cost)):
            available = max(self.model.remaining[key], 0)
            expected[key] = available if asked is None else min(asked, available)
            self.model.remaining[key] -= expected[key]
            self.model.reserved[key] += expected[key]
        self.model.grants[holder] = expected
        assert grant["requests"] == expected["requests"]
        assert grant["cost_usd"] == expected["cost"] / 1e6
        assert grant["input_tokens"] is None
        return holder

    @rule(holder=live)
    def reserve_again(self, holder: str) -> None:
        grant = self.portal.call(self.budget.reserve, holder, {"requests": 1})
        assert grant["requests"] == self.model.grants[holder]["requests"]

    @rule(target=ended, holder=consumes(live), requests=counts, cost=micro, tokens=counts)
    def settle(self, holder: str, requests: int, cost: int, tokens: int) -> str:
        self._settle(holder, requests, cost, tokens)
        return holder

    @rule(holder=ended, requests=counts, cost=micro)
    def settle_ended(self, holder: str, requests: int, cost: int) -> None:
        self._settle(holder, requests, cost, 0)

    def _settle(self, holder: str, requests: int, cost: int, tokens: int) -> None:
        used = {"requests": requests, "cost_usd": cost / 1e6, "input_tokens": tokens}
        self.portal.call(self.budget.settle, holder, used)
        state = self.model.ended.get(holder)
        if state == "settled":
            return
        amounts = {"requests": requests, "cost": cost}
        for key, amount in amounts.items():
            self.model.used[key] += amount
            if state is None:
                grant = self.model.grants[holder][key]
                self.model.reserved[key] -= grant
                self.model.remaining[key] += grant - amount
            else:  # late: the grant already came back on expiry
                self.model.remaining[key] -= amount
        self.model.used["input_tokens"] += tokens
        self.model.grants.pop(holder, None)
        self.model.ended[holder] = "settled"

    @rule(target=crashed, holder=consumes(live))
    def crash(self, holder: str) -> str:
        return holder

    @rule(target=ended, holder=consumes(live) | consumes(crashed))
    def expire(self, holder: str) -> str:
        argv: list[str | int] = [holder]
        self.portal.call(
            self.budget.connection.run,
            "redis.call('ZADD', KEYS[1], '0', ARGV[1])",
            [self.budget.keys[2]],
            argv,
        )
        self.portal.call(self.budget.state)  # any read or reserve reclaims it
        grant = self.model.grants.pop(holder)
        for key, amount in grant.items():
            self.model.remaining[key] += amount
            self.model.reserved[key] -= amount
        self.model.ended[holder] = "expired"
        return holder

    @rule(holder=ended)
    def reserve_with_an_ended_holder_is_refused(self, holder: str) -> None:
        with pytest.raises(BudgetLedgerError, match="already used"):
            self.portal.call(self.budget.reserve, holder, {"requests": 1})

    @invariant()
    def ledger_matches_the_model(self) -> None:
        state = self.portal.call(self.budget.state)
        model = self.model
        assert state.holders == len(model.grants)
        assert state.remaining.requests == model.remaining["requests"]
        assert state.reserved.requests == model.reserved["requests"]
        assert state.used.requests == model.used["requests"]
        assert state.remaining.cost_usd == model.remaining["cost"] / 1e6
        assert state.reserved.cost_usd == model.reserved["cost"] / 1e6
        assert state.used.cost_usd == model.used["cost"] / 1e6
        assert state.used.input_tokens == model.used["input_tokens"]
        assert state.remaining.input_tokens is None
        for key, limit in (("requests", LIMIT_REQUESTS), ("cost", LIMIT_MICRO)):
            assert model.remaining[key] + model.reserved[key] + model.used[key] == limit


@pytest.fixture(params=["asyncio", "trio"])
def portal(request: pytest.FixtureRequest) -> Iterator[BlockingPortal]:
    with start_blocking_portal(str(request.param)) as blocking_portal:
        yield blocking_portal


def test_ledger_matches_its_model(portal: BlockingPortal, redis_url: str) -> None:
    machine = type("BoundLedgerMachine", (LedgerMachine,), {"portal": portal, "url": redis_url})
    run_state_machine_as_test(
        machine,
        # Rules on a still-empty bundle are filtered out early in each run: expected.
        settings=settings(
            max_examples=40,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
        ),
    )
