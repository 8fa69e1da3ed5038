"""The exclusive-resource lease is per process, whatever event loop each thread runs.

Two threads run their own event loops (the same backend, or asyncio and trio), each with
its own lead, sharing one ``resource_key``: the lease table (a lock-guarded dict, no loop
primitives) must make the second delegation fail at once with the key busy, and leave
nothing behind. Threads are coordinated with ``threading.Event`` (bounded waits), never
with timing.
"""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import pytest
import sniffio

from deputy_runtime import DelegationPolicy
from deputy_runtime.chat import reply
from deputy_runtime.chat._types import ModelRequest
from deputy_runtime.runtime import IN_PROCESS_LEASES
from tests.runtime.helpers import clean_leases, definition, delegate, scripted_lead

pytestmark = pytest.mark.usefixtures("clean_leases")

__all__ = ["clean_leases"]  # fixture used by name

EXCLUSIVE = DelegationPolicy("exclusive", resource_key="plotter")


@pytest.mark.parametrize(
    ("holder_backend", "contender_backend"),
    [("asyncio", "asyncio"), ("trio", "trio"), ("asyncio", "trio"), ("trio", "asyncio")],
)
def test_exclusive_lease_across_threads_with_their_own_event_loops(
    tmp_path: Path, holder_backend: str, contender_backend: str
) -> None:
    holder_in_request = threading.Event()
    contender_done = threading.Event()
    outcomes: dict[str, object] = {}
    errors: list[BaseException] = []

    def holder_thread() -> None:
        async def worker(request: ModelRequest) -> str:
            holder_in_request.set()
            # hold the lease (inside the child's model call) until the contender is done
            await anyio.to_thread.run_sync(contender_done.wait, 10)
            return "held"

        async def main() -> None:
            lead, _ = scripted_lead(
                {"lead": [delegate("worker"), reply("ok")], "worker": worker},
                [definition("worker")],
                tmp_path,
                delegation_policy=EXCLUSIVE,
            )
            await lead.run("go")
            outcomes["holder"] = [r.status for r in lead.list_subagents()]
            outcomes["holder_loop"] = sniffio.current_async_library()

        try:
            anyio.run(main, backend=holder_backend)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
            holder_in_request.set()

    def contender_thread() -> None:
        async def main() -> None:
            lead, provider = scripted_lead(
                {"lead": [delegate("worker"), reply("ok")], "worker": ["never"]},
                [definition("worker")],
                tmp_path,
                delegation_policy=EXCLUSIVE,
            )
            await lead.run("go")
            [record] = lead.list_subagents()
            outcomes["contender"] = (record.status, record.stop_reason)
            outcomes["contender_error"] = record.error or ""
            outcomes["contender_requests"] = len(provider.requests_for("worker"))
            outcomes["contender_loop"] = sniffio.current_async_library()

        try:
            assert holder_in_request.wait(10)
            anyio.run(main, backend=contender_backend)
        except BaseException as exc:
            errors.append(exc)
        finally:
            contender_done.set()

    threads = [threading.Thread(target=holder_thread), threading.Thread(target=contender_thread)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert (outcomes["holder_loop"], outcomes["contender_loop"]) == (
        holder_backend,
        contender_backend,
    )
    assert outcomes["holder"] == ["completed"]
    assert outcomes["contender"] == ("failed", "setup_error")
    assert "'plotter' is busy" in str(outcomes["contender_error"])
    assert outcomes["contender_requests"] == 0
    assert IN_PROCESS_LEASES.held() == {}
