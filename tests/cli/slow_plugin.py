"""A test-only ``deputy-runtime run --plugin``: a slow model and owned resources with cleanup.

Registers the provider ``slow``: it answers like the offline ``test`` provider, but a
subagent whose name starts with ``slow`` waits ``SLOW_PLUGIN_SECONDS`` (default 60) before
each reply, so a test can interrupt a run while that delegation is mid-request. The lead
uses owned resources: every delegation gets a fresh ``lookup`` tool, and the factory
records creation and cleanup as marker files under ``SLOW_PLUGIN_MARKERS`` so the test can
check that cleanup ran once for every delegation that was set up.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio

from deputy_runtime import DelegationPolicy, DelegationResources, register_provider, tool
from deputy_runtime.chat import (
    AssistantTurn,
    ModelRequest,
    StreamDelta,
    TestProvider,
    current_agent_name,
)


class SlowProvider:
    """The test provider, slowed down for agents named ``slow*``."""

    def __init__(self, model: str = "v1") -> None:
        self.name = "slow"
        self.model = model
        self._inner = TestProvider(model=model, name="slow")

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        agent = current_agent_name() or ""
        if agent.startswith("slow"):
            await anyio.sleep(float(os.environ.get("SLOW_PLUGIN_SECONDS", "60")))
        return await self._inner.complete(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta | AssistantTurn]:
        yield await self.complete(request)

    def with_model(self, model: str) -> SlowProvider:
        return SlowProvider(model)


register_provider("slow", lambda model, **_: SlowProvider(model), default_model="v1", replace=True)


def _marker(name: str) -> None:
    directory = os.environ.get("SLOW_PLUGIN_MARKERS")
    if directory:
        # O_EXCL: a second cleanup of the same delegation would fail loudly.
        fd = os.open(Path(directory) / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        os.close(fd)


def _resources(agent: Any, definition: Any, context: Any) -> DelegationResources:
    @tool(read_only=True)
    def lookup(query: str) -> str:
        """Look something up in this delegation's private index."""
        return f"{definition.name} found nothing for {query!r}"

    _marker(f"created-{context.delegation_id}")
    return DelegationResources(
        tools=(lookup,), cleanup=lambda: _marker(f"cleaned-{context.delegation_id}")
    )


delegation_policy = DelegationPolicy(resource_mode="owned", resources=_resources)
