"""RedisLeases and RedisBudget keep the agreed seams' signatures (the runtime's lease
backend and budget ledger protocols), which the runtime will call them through."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import msgspec
import pytest

from deputy_runtime.redis import Lease, RedisBudget, RedisCoordinator, RedisLeases
from deputy_runtime.runtime import BudgetLedger, LeaseLedger


@runtime_checkable
class LeaseBackend(Protocol):
    async def acquire(self, key: str, holder: str, *, wait: bool) -> Lease: ...
    async def hold(self, lease: Lease, on_lost: Callable[[str], None]) -> None: ...
    async def release(self, lease: Lease) -> None: ...


def shape(function: object) -> list[tuple[str, object]]:
    signature = inspect.signature(function)  # type: ignore[arg-type]
    return [(p.name, p.kind) for p in signature.parameters.values()]


@pytest.mark.parametrize(
    ("implementation", "protocol"),
    [(RedisLeases, LeaseBackend), (RedisBudget, BudgetLedger)],
)
def test_methods_match_the_protocol(implementation: type, protocol: type) -> None:
    url = "redis://127.0.0.1:6379/0"  # never connected
    instance = RedisLeases(url) if implementation is RedisLeases else RedisBudget(url, "b", {})
    assert isinstance(instance, protocol)
    for name in ("acquire", "hold", "release", "reserve", "settle"):
        if hasattr(protocol, name):
            assert inspect.iscoroutinefunction(getattr(implementation, name)), name
            assert shape(getattr(implementation, name)) == shape(getattr(protocol, name)), name


def test_lease_has_the_agreed_fields() -> None:
    lease = Lease(key="k", holder="h", token=7)
    assert msgspec.structs.asdict(lease) == {
        "key": "k",
        "holder": "h",
        "token": 7,
        "traceparent": None,
    }
    with pytest.raises(AttributeError):
        lease.token = 8  # type: ignore[misc]
    with pytest.raises(TypeError):
        Lease("k", "h", 7)  # type: ignore[call-arg]  # positional fields are refused: under test


def test_the_coordinator_is_the_runtimes_combined_lease_ledger() -> None:
    for name in ("acquire_and_reserve", "hold", "release_and_settle"):
        assert shape(getattr(RedisCoordinator, name)) == shape(getattr(LeaseLedger, name)), name
    url = "redis://127.0.0.1:6379/0"  # never connected
    assert isinstance(RedisCoordinator(url, budget_name="b", limits={}), LeaseLedger)
