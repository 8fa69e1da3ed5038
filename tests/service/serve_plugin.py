"""A test-only ``deputy-runtime serve --plugin``: owned resources, slow tools, markers.

Every delegation gets its own tool from an owned-mode factory. Agents named ``slow*`` get
``wait_for_release``, which really waits: it returns only once the file ``release`` or
``release-<delegation id>`` exists in ``SERVE_PLUGIN_DIR`` (so a delegation stays
running until the test says so, or until it is cancelled). Other agents get
``quick_lookup``, which returns at once. The factory writes ``created-<delegation id>``
and the cleanup ``cleaned-<delegation id>`` into ``SERVE_PLUGIN_DIR`` (O_EXCL: a second
cleanup of one delegation would fail), so a test can check that every owned resource
was cleaned exactly once.

It also registers the provider ``priced``: the offline test model with a price, each
request reporting ``PRICE_USD`` (so ``--model priced/test`` shows costs offline).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio

from deputy_runtime import DelegationPolicy, DelegationResources, tool
from deputy_runtime.chat import TestProvider, Usage, register_provider

_POLL_SECONDS = 0.02
#: What each request of the ``priced`` provider reports it cost.
PRICE_USD = 0.0004


def _priced(model: str, **options: Any) -> TestProvider:
    usage = Usage(requests=1, input_tokens=10, output_tokens=5, cost_usd=PRICE_USD)
    return TestProvider(model=model, name="priced", usage=usage, **options)


register_provider("priced", _priced, default_model="test", replace=True)


def _directory() -> Path:
    return Path(os.environ["SERVE_PLUGIN_DIR"])


def _marker(name: str) -> None:
    fd = os.open(_directory() / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    os.close(fd)


def _resources(agent: Any, definition: Any, context: Any) -> DelegationResources:
    if definition.name.startswith("slow"):

        @tool(read_only=True)
        async def wait_for_release(reason: str) -> str:
            """Wait until the test releases this delegation."""
            directory = _directory()
            mine = directory / f"release-{context.delegation_id}"
            while not (directory / "release").exists() and not mine.exists():
                await anyio.sleep(_POLL_SECONDS)
            return f"{definition.name} released"

        tools: tuple[Any, ...] = (wait_for_release,)
    else:

        @tool(read_only=True)
        def quick_lookup(query: str) -> str:
            """Look something up at once."""
            return f"{definition.name} found nothing for {query!r}"

        tools = (quick_lookup,)
    _marker(f"created-{context.delegation_id}")
    return DelegationResources(
        tools=tools, cleanup=lambda: _marker(f"cleaned-{context.delegation_id}")
    )


delegation_policy = DelegationPolicy(resource_mode="owned", resources=_resources)
