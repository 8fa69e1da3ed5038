"""Lease safety rules as properties, in random orders of operations on a real server.

Rules: a busy key is never granted to another holder; a release frees the key only when
holder and token both match the current grant (a stale, forged or foreign lease never
frees another holder's lease); every grant's fencing token is larger than all before.
Expiry is forced by deleting the lease key (what the TTL does on the server).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

from deputy_runtime.errors import ResourceBusyError
from deputy_runtime.redis import Lease, RedisLeases

pytestmark = pytest.mark.slow

holders = st.sampled_from(["a", "b", "c"])
KEY = "k"


class LeaseMachine(RuleBasedStateMachine):
    portal: BlockingPortal
    url: str

    granted = Bundle("granted")

    def __init__(self) -> None:
        super().__init__()
        self.leases = RedisLeases(self.url, namespace=f"lsm-{uuid.uuid4().hex[:12]}", ttl=600)
        self.context: AbstractContextManager[RedisLeases] = self.portal.wrap_async_context_manager(
            self.leases
        )
        self.context.__enter__()
        self.current: Lease | None = None
        self.last_token = -1

    def teardown(self) -> None:
        self.context.__exit__(None, None, None)

    @rule(target=granted, holder=holders)
    def acquire(self, holder: str) -> Lease:
        if self.current is not None and self.current.holder != holder:
            with pytest.raises(ResourceBusyError):
                self.portal.call(lambda: self.leases.acquire(KEY, holder, wait=False))
            return self.current
        lease = self.portal.call(lambda: self.leases.acquire(KEY, holder, wait=False))
        if self.current is not None:  # the holder asked again: its own lease back
            assert lease == self.current
        else:
            assert lease.token > self.last_token
            self.last_token = lease.token
            self.current = lease
        return lease

    @rule(lease=granted)
    def release(self, lease: Lease) -> None:
        self.portal.call(self.leases.release, lease)
        if lease == self.current:
            self.current = None

    @rule(lease=granted, holder=holders, shift=st.integers(-2, 2))
    def release_forged(self, lease: Lease, holder: str, shift: int) -> None:
        forged = Lease(key=KEY, holder=holder, token=lease.token + shift)
        self.portal.call(self.leases.release, forged)
        if forged == self.current:
            self.current = None

    @rule()
    def expire(self) -> None:
        self.portal.call(
            self.leases.connection.run,
            "redis.call('DEL', KEYS[1])",
            self.leases.lease_keys(KEY)[:1],
            [],
        )
        self.current = None

    @invariant()
    def server_agrees(self) -> None:
        assert self.portal.call(self.leases.current, KEY) == self.current


@pytest.fixture(params=["asyncio", "trio"])
def portal(request: pytest.FixtureRequest) -> Iterator[BlockingPortal]:
    with start_blocking_portal(str(request.param)) as blocking_portal:
        yield blocking_portal


def test_lease_rules_hold_in_any_order(portal: BlockingPortal, redis_url: str) -> None:
    machine = type("BoundLeaseMachine", (LeaseMachine,), {"portal": portal, "url": redis_url})
    # Rules on a still-empty bundle are filtered out early in each run: expected.
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=40,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
        ),
    )
