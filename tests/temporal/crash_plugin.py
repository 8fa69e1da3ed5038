"""A ``--plugin`` for the Temporal CLI tests (worker and ``run --temporal``): one tool,
``hold``, that logs each call's worker pid to ``$DEPUTY_TEST_LOG`` and then waits until
the file ``$DEPUTY_TEST_GATE`` exists."""

from __future__ import annotations

import os
from pathlib import Path

import anyio

from deputy_runtime import tool


@tool(read_only=True, idempotent=True)
async def hold() -> str:
    """Wait until the test opens the gate."""
    with open(os.environ["DEPUTY_TEST_LOG"], "a") as log:
        log.write(f"{os.getpid()}\n")
    gate = Path(os.environ["DEPUTY_TEST_GATE"])
    while not gate.exists():
        await anyio.sleep(0.05)  # poll interval of the gate check
    return "released"


tools = [hold]
