"""A worker process for the multi-process Redis tests (run as a script, not collected).

Usage: ``python worker.py BACKEND MODE JSON_ARGS``; prints one JSON line with its result.

Modes:

* ``lease``: ``holders`` concurrent tasks each take the exclusive ``key`` (waiting),
  append ``start TOKEN HOLDER`` and ``end TOKEN HOLDER`` to ``file`` (one ``write`` of an
  ``O_APPEND`` descriptor each, so the file's line order is the order of the writes), and
  release.
* ``budget``: ``holders`` concurrent reservations of 1 request on budget ``name``, each
  settled with what it was granted; prints the total granted.
* ``hold``: takes lease ``key`` and a reservation of 2 requests for holder ``holder``,
  keeps both alive with ``hold()``, prints ``{"token": ...}`` and sleeps until killed.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio

from deputy_runtime.redis import RedisBudget, RedisCoordinator, RedisLeases


async def lease_mode(args: dict[str, Any]) -> dict[str, Any]:
    fd = os.open(args["file"], os.O_WRONLY | os.O_APPEND)
    tokens: list[int] = []
    try:
        async with RedisLeases(
            args["url"], namespace=args["namespace"], ttl=args["ttl"], max_poll_interval=0.05
        ) as leases:

            async def holder(index: int) -> None:
                name = f"{os.getpid()}-{index}"
                lease = await leases.acquire(args["key"], name, wait=True)
                try:
                    os.write(fd, f"start {lease.token} {name}\n".encode())
                    for _ in range(3):  # let other tasks of this process run meanwhile
                        await anyio.sleep(0)
                    os.write(fd, f"end {lease.token} {name}\n".encode())
                    tokens.append(lease.token)
                finally:
                    await leases.release(lease)

            async with anyio.create_task_group() as tg:
                for index in range(args["holders"]):
                    tg.start_soon(holder, index)
    finally:
        os.close(fd)
    return {"grants": len(tokens)}


async def budget_mode(args: dict[str, Any]) -> dict[str, Any]:
    granted: list[int] = []
    async with RedisBudget(
        args["url"], args["name"], {"requests": args["limit"]}, namespace=args["namespace"]
    ) as budget:

        async def reserve(index: int) -> None:
            holder = f"{os.getpid()}-{index}"
            grant = await budget.reserve(holder, {"requests": 1})
            got = grant["requests"]
            assert isinstance(got, int)
            granted.append(got)
            await budget.settle(holder, {"requests": got})

        async with anyio.create_task_group() as tg:
            for index in range(args["holders"]):
                tg.start_soon(reserve, index)
    return {"granted": sum(granted)}


async def hold_mode(args: dict[str, Any]) -> dict[str, Any]:
    async with RedisCoordinator(
        args["url"],
        budget_name=args["name"],
        limits={"requests": args["limit"]},
        namespace=args["namespace"],
        lease_ttl=args["ttl"],
        reserve_ttl=args["ttl"],
    ) as coord:
        lease, _ = await coord.acquire_and_reserve(
            args["key"], args["holder"], {"requests": 2}, wait=False
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(coord.hold, lease, lambda reason: None)
            print(json.dumps({"token": lease.token}), flush=True)
            await anyio.sleep_forever()
    return {}


MODES = {"lease": lease_mode, "budget": budget_mode, "hold": hold_mode}


def main() -> None:
    backend, mode, raw = sys.argv[1], sys.argv[2], sys.argv[3]
    result = anyio.run(MODES[mode], json.loads(raw), backend=backend)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
