"""Resource modes as objects: the short spelling, waiting for an exclusive key, a lease
backend plugged in through the policy, a lost lease, several resources per delegation and
a mode defined outside the runtime.

Everything runs the real runtime on a ScriptedProvider. The lease backends here are real
implementations of the LeaseBackend protocol kept in memory (a cross-process backend
cannot run in these tests); ``LostLeases`` loses its lease when the test says so.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from deputy_runtime import Chat, DelegationPolicy, DelegationResources, ResourceBusyError
from deputy_runtime.chat import ModelRequest, ScriptedProvider, reply, tool_call
from deputy_runtime.errors import DelegationBindingError
from deputy_runtime.runtime import (
    IN_PROCESS_LEASES,
    BindRequest,
    ExclusiveResource,
    Lease,
    LeaseBackend,
    OwnedResources,
    ResourceMode,
    SharedResources,
)
from deputy_runtime.tools import Tool
from tests.runtime.helpers import (
    Cleanups,
    clean_leases,
    definition,
    delegate,
    delegate_many,
    make_tool,
    scripted_lead,
)

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("clean_leases")]

__all__ = ["clean_leases"]  # fixture used by name


class MemoryLeases:
    """A LeaseBackend kept in a dict, recording every call (a stand-in for Redis)."""

    def __init__(self) -> None:
        self.held: dict[str, Lease] = {}
        self.tokens: dict[str, int] = {}
        self.calls: list[tuple[str, str, str]] = []

    async def acquire(self, key: str, holder: str, *, wait: bool) -> Lease:
        self.calls.append(("acquire", key, holder))
        if key in self.held:
            raise ResourceBusyError(f"{key} is busy")
        token = self.tokens[key] = self.tokens.get(key, 100) + 1
        lease = self.held[key] = Lease(key=key, holder=holder, token=token)
        return lease

    async def hold(self, lease: Lease, on_lost: Callable[[str], None]) -> None:
        self.calls.append(("hold", lease.key, lease.holder))
        await anyio.sleep_forever()

    async def release(self, lease: Lease) -> None:
        self.calls.append(("release", lease.key, lease.holder))
        if self.held.get(lease.key) == lease:
            del self.held[lease.key]


class LostLeases(MemoryLeases):
    """Loses every lease once ``lose`` is set; ``lost`` is set after on_lost ran."""

    def __init__(self) -> None:
        super().__init__()
        self.lose = anyio.Event()
        self.lost = anyio.Event()

    async def hold(self, lease: Lease, on_lost: Callable[[str], None]) -> None:
        await self.lose.wait()
        on_lost("expired")
        self.lost.set()


# -- the short spelling builds the objects -------------------------------------------------


def test_short_spelling_builds_mode_objects() -> None:
    def factory(agent: Any, definition: Any, context: Any) -> DelegationResources:
        return DelegationResources()

    backend = MemoryLeases()
    assert DelegationPolicy().resource_modes == (SharedResources(),)
    assert DelegationPolicy("exclusive", resource_key="k").resource_modes == (
        ExclusiveResource("k"),
    )
    assert DelegationPolicy(
        "exclusive", resource_key="k", lease_backend=backend
    ).resource_modes == (ExclusiveResource("k", backend=backend),)
    assert DelegationPolicy("owned", resources=factory).resource_modes == (OwnedResources(factory),)
    several = (ExclusiveResource("a", wait=True), OwnedResources(factory))
    assert DelegationPolicy(resource_modes=several).resource_modes == several
    assert DelegationPolicy(resource_mode=ExclusiveResource("k")).resource_modes == (
        ExclusiveResource("k"),
    )
    assert DelegationPolicy("exclusive", resource_key="k").describe() == [
        {"mode": "exclusive", "key": "k", "wait": False, "backend": "InProcessLeases"}
    ]
    for mode in (SharedResources(), ExclusiveResource("k"), OwnedResources(factory)):
        assert isinstance(mode, ResourceMode)
    assert isinstance(backend, LeaseBackend)
    assert isinstance(IN_PROCESS_LEASES, LeaseBackend)


def test_bad_mode_settings_name_the_field() -> None:
    with pytest.raises(DelegationBindingError, match="lease_backend is only supported"):
        DelegationPolicy("shared", lease_backend=MemoryLeases())
    with pytest.raises(DelegationBindingError, match="not both"):
        DelegationPolicy("exclusive", resource_key="k", resource_modes=(SharedResources(),))
    with pytest.raises(DelegationBindingError, match="resource_modes entries"):
        DelegationPolicy(resource_modes=("shared",))  # type: ignore[arg-type]
    with pytest.raises(DelegationBindingError, match="carries its own settings"):
        DelegationPolicy(ExclusiveResource("k"), resource_key="k")
    with pytest.raises(DelegationBindingError, match="require a resource_key"):
        ExclusiveResource("")
    with pytest.raises(DelegationBindingError, match="wait must be a bool"):
        ExclusiveResource("k", wait="yes")  # type: ignore[arg-type]
    with pytest.raises(DelegationBindingError, match="LeaseBackend"):
        ExclusiveResource("k", backend=object())  # type: ignore[arg-type]
    with pytest.raises(DelegationBindingError, match="require a factory"):
        OwnedResources(3)  # type: ignore[arg-type]


# -- exclusive: waiting ----------------------------------------------------------------------


async def test_waiting_exclusive_mode_serialises_overlapping_delegations(tmp_path: Path) -> None:
    release = anyio.Event()
    inside = 0
    most_inside = 0

    async def worker(request: ModelRequest) -> str:
        nonlocal inside, most_inside
        inside += 1
        most_inside = max(most_inside, inside)
        await release.wait()
        inside -= 1
        return "done " + request.turns[0].text[-20:]

    lead, p = scripted_lead(
        {
            "lead": [delegate_many(("worker", "first"), ("worker", "second")), reply("ok")],
            "worker": worker,
        },
        [definition("worker", max_requests=1)],
        tmp_path,
        delegation_policy=DelegationPolicy(resource_modes=(ExclusiveResource("k", wait=True),)),
    )

    async def release_when_second_waits() -> None:
        with anyio.fail_after(10):
            # Both admitted, one holds the key and is in its request: the other waits.
            while inside == 0 or len(lead.list_subagents()) < 2:
                await anyio.sleep(0)
        records = lead.list_subagents()
        holder = IN_PROCESS_LEASES.holder("k")
        assert holder in {r.delegation_id for r in records}
        waiting = next(r for r in records if r.delegation_id != holder)
        assert waiting.started_at is None
        release.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(release_when_second_waits)
        await lead.run("go")
    assert [(r.status, r.stop_reason) for r in lead.list_subagents()] == [
        ("completed", "complete"),
        ("completed", "complete"),
    ]
    assert most_inside == 1
    assert len(p.requests_for("worker")) == 2


async def test_a_cancelled_waiter_leaves_no_lease(tmp_path: Path) -> None:
    holder = IN_PROCESS_LEASES.acquire_now("k", "outside-holder")
    lead, p = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": ["never"]},
        [definition("worker")],
        tmp_path,
        delegation_policy=DelegationPolicy(resource_modes=(ExclusiveResource("k", wait=True),)),
    )
    try:
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                await lead.run("go")

            tg.start_soon(run)
            with anyio.fail_after(10):
                while not lead.list_subagents():
                    await anyio.sleep(0)
            tg.cancel_scope.cancel()
        [record] = lead.list_subagents()
        assert (record.status, record.stop_reason) == ("stopped", "interrupted")
        assert p.requests_for("worker") == []
        assert IN_PROCESS_LEASES.holder("k") == "outside-holder"
    finally:
        IN_PROCESS_LEASES.release_now(holder)


# -- a lease backend plugged in through the policy ------------------------------------------


async def test_policy_lease_backend_is_used_and_the_token_reaches_callbacks(
    tmp_path: Path,
) -> None:
    backend = MemoryLeases()
    contexts: list[Any] = []

    def chat_factory(definition: Any, context: Any) -> Chat:
        contexts.append(context)
        return Chat(ScriptedProvider(["worked"]))

    lead, _ = scripted_lead(
        {"lead": [delegate("worker"), delegate("worker"), reply("ok")]},
        [definition("worker")],
        tmp_path,
        delegation_policy=DelegationPolicy(
            "exclusive", resource_key="db", lease_backend=backend, chat=chat_factory
        ),
    )
    await lead.run("go")
    records = lead.list_subagents()
    assert [r.status for r in records] == ["completed", "completed"]
    first, second = (r.delegation_id for r in records)
    assert [c for c in backend.calls if c[0] != "hold"] == [
        ("acquire", "db", first),
        ("release", "db", first),
        ("acquire", "db", second),
        ("release", "db", second),
    ]
    assert ("hold", "db", first) in backend.calls
    assert [c.lease_token for c in contexts] == [101, 102]  # fencing tokens increase
    assert backend.held == {}
    assert IN_PROCESS_LEASES.held() == {}  # the default table was never touched


async def test_shared_mode_context_has_no_lease_token(tmp_path: Path) -> None:
    contexts: list[Any] = []

    def chat_factory(definition: Any, context: Any) -> Chat:
        contexts.append(context)
        return Chat(ScriptedProvider(["worked"]))

    lead, _ = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")]},
        [definition("worker")],
        tmp_path,
        delegation_policy=DelegationPolicy(chat=chat_factory),
    )
    await lead.run("go")
    assert [c.lease_token for c in contexts] == [None]


async def test_a_lost_lease_stops_the_delegation_with_lease_lost(tmp_path: Path) -> None:
    backend = LostLeases()
    calls: list[str] = []
    effect = make_tool("effect", calls=calls, read_only=True)

    async def worker(request: ModelRequest) -> Any:
        backend.lose.set()
        await backend.lost.wait()
        return tool_call("effect", {})

    lead, p = scripted_lead(
        {"lead": [delegate("worker"), reply("noted")], "worker": worker},
        [definition("worker", tools=[effect])],
        tmp_path,
        delegation_policy=DelegationPolicy("exclusive", resource_key="db", lease_backend=backend),
    )
    result = await lead.run("go")
    assert result.stop_reason == "complete"  # the lead goes on: a soft outcome
    [record] = lead.list_subagents()
    assert (record.status, record.stop_reason) == ("stopped", "lease_lost")
    assert calls == []  # the call after the loss never ran
    assert backend.held == {}
    assert len(p.requests_for("worker")) == 1


# -- several resources, and a mode defined outside the runtime -----------------------------


class CountingMode:
    """A resource mode written by a host: adds one tool and counts releases."""

    name = "counting"
    supplies_tools = False

    def __init__(self) -> None:
        self.acquired: list[str] = []
        self.released: list[str] = []

    def check(self, definition: Any) -> None:
        if definition.name == "refused":
            raise DelegationBindingError("counting mode refuses 'refused'")

    async def acquire(self, request: BindRequest) -> tuple[Tool, ...]:
        delegation_id = request.delegation.delegation_id
        self.acquired.append(delegation_id)
        mode = self

        class Release:
            holds = False

            async def hold(self, on_lost: Callable[[str], None]) -> None:
                return None

            async def release(self) -> str | None:
                mode.released.append(delegation_id)
                return None

        request.keep(Release())
        return ()

    def describe(self) -> dict[str, Any]:
        return {"mode": self.name}


async def test_several_resources_bind_and_release_per_delegation(tmp_path: Path) -> None:
    cleanups = Cleanups(lambda: [make_tool("owned_tool", read_only=True)])
    counting = CountingMode()
    during: list[tuple[str | None, str | None]] = []

    def worker(request: ModelRequest) -> str:
        during.append((IN_PROCESS_LEASES.holder("a"), IN_PROCESS_LEASES.holder("b")))
        assert [t.name for t in request.tools] == ["owned_tool"]
        return "done"

    lead, _ = scripted_lead(
        {"lead": [delegate("worker"), delegate("refused"), reply("ok")], "worker": worker},
        [definition("worker"), definition("refused")],
        tmp_path,
        delegation_policy=DelegationPolicy(
            resource_modes=(
                ExclusiveResource("a"),
                counting,
                ExclusiveResource("b"),
                OwnedResources(cleanups),
            )
        ),
    )
    await lead.run("go")
    worked, refused = lead.list_subagents()
    assert (worked.status, refused.status) == ("completed", "failed")
    assert "counting mode refuses" in (refused.error or "")
    assert during == [(worked.delegation_id, worked.delegation_id)]
    assert counting.acquired == counting.released == [worked.delegation_id]
    cleanups.assert_exactly_once()
    assert cleanups.made == [worked.delegation_id]
    assert IN_PROCESS_LEASES.held() == {}
