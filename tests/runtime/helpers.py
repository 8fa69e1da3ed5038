"""Shared helpers for the delegation tests (scripted leads, tools, spies on budgets).

Everything here drives the real runtime: real Agents and LeadAgents on a ScriptedProvider
keyed per agent name. The only instrumentation is :class:`MeterSpy`, which records every
run meter so a test can check that no budget reservation is left behind.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest

from deputy_runtime import AgentDefinition, Chat, LeadAgent, Tool
from deputy_runtime.chat import ScriptedProvider, tool_call, tool_calls
from deputy_runtime.chat._types import AssistantTurn, ContentToolResult, ModelRequest
from deputy_runtime.runtime import IN_PROCESS_LEASES, _usage

_Item = TypeVar("_Item")
_Result = TypeVar("_Result")


def append_then(log: list[_Item], item: _Item, result: _Result) -> _Result:
    """Append ``item`` to ``log`` and return ``result``: a recording hook or tool in a lambda."""
    log.append(item)
    return result


DELEGATE = "delegate_to_agent"

#: Every stop reason the runtime tests observed so far (reason -> first test that saw it);
#: filled by the recorder in ``conftest.py``.
OBSERVED_STOP_REASONS: dict[str, str] = {}


def make_tool(
    name: str,
    function: Callable[..., Any] | None = None,
    *,
    calls: list[str] | None = None,
    **annotations: Any,  # Tool's annotation flags (read_only=True, ...)
) -> Tool:
    """A tool taking any arguments; appends ``name`` to ``calls`` each time it runs."""

    def run(**kwargs: Any) -> str:
        if calls is not None:
            calls.append(name)
        if function is not None:
            return str(function(**kwargs))
        return f"{name} ran"

    return Tool(
        name=name,
        description=f"The {name} tool.",
        parameters={"type": "object", "properties": {}, "additionalProperties": True},
        function=run,
        **annotations,
    )


def definition(name: str = "worker", **fields: Any) -> AgentDefinition:
    """A definition with a recognisable prompt (``ROLE:<name>``)."""
    fields.setdefault("description", f"The {name} sub-agent.")
    fields.setdefault("prompt", f"ROLE:{name}")
    return AgentDefinition(name, **fields)


def delegate(
    agent_name: str, task: str = "TASK", *, id: str | None = None, **brief: Any
) -> AssistantTurn:
    """A lead turn asking for one delegation."""
    return tool_call(DELEGATE, {"agent_name": agent_name, "task": task, **brief}, id=id)


def delegate_many(*pairs: tuple[str, str]) -> AssistantTurn:
    """A lead turn asking for several delegations at once (they run concurrently)."""
    return tool_calls(*[(DELEGATE, {"agent_name": n, "task": t}) for n, t in pairs])


def scripted_lead(
    script: Mapping[str | None, Any],
    sub_agents: Sequence[AgentDefinition] = (),
    working_dir: str | Path | None = None,
    **kwargs: Any,
) -> tuple[LeadAgent, ScriptedProvider]:
    """A LeadAgent on a ScriptedProvider keyed per agent name."""
    provider = ScriptedProvider(script)
    lead = LeadAgent(Chat(provider), sub_agents, working_dir=working_dir, **kwargs)
    return lead, provider


def tool_results(request: ModelRequest) -> list[ContentToolResult]:
    """The tool results in the last turn of ``request``."""
    last = request.turns[-1]
    return [c for c in last.contents if isinstance(c, ContentToolResult)]


def delegate_results(provider: ScriptedProvider, agent: str = "lead") -> list[ContentToolResult]:
    """Every tool result the lead's model received, in order."""
    out: list[ContentToolResult] = []
    for request in provider.requests_for(agent):
        if request.turns and request.turns[-1].role == "user":
            out.extend(tool_results(request))
    return out


def outcome(result: ContentToolResult) -> dict[str, Any]:
    """The JSON outcome of a delegate call (success value or failure error text)."""
    if result.error is None:
        return dict(json.loads(result.value))
    head, _, payload = result.error.partition("\n")
    assert head.startswith("Subagent '"), result.error
    assert head.endswith("' failed."), result.error
    return dict(json.loads(payload))


def request_text(request: ModelRequest) -> str:
    """Everything a request carries, as text, for 'never sent' assertions."""
    parts = [request.system_prompt or ""]
    for turn in request.turns:
        for content in turn.contents:
            parts.append(repr(content))
    parts.extend(spec.name for spec in request.tools)
    return "\n".join(parts)


class MeterSpy:
    """Records every run Meter created while installed (a spy; the meters stay real)."""

    def __init__(self) -> None:
        self.meters: weakref.WeakSet[_usage.Meter] = weakref.WeakSet()
        self.strong: list[_usage.Meter] = []

    def open_reservations(self) -> int:
        """Reservations still held by any meter (the held sums must be back to zero too)."""
        for m in self.strong:
            held = getattr(m, "reserved", None)
            if held is not None and not m.reservations:
                assert all(abs(v) < 1e-9 for v in held.values()), held
        return sum(len(m.reservations or ()) for m in self.strong)


@pytest.fixture
def meter_spy(monkeypatch: pytest.MonkeyPatch) -> MeterSpy:
    """Keep every Meter alive and reachable so tests can assert no reservation is left."""
    spy = MeterSpy()
    original = _usage.Meter.__init__

    def init(self: _usage.Meter, limits: _usage.UsageLimits) -> None:
        original(self, limits)
        spy.strong.append(self)

    monkeypatch.setattr(_usage.Meter, "__init__", init)
    return spy


@pytest.fixture(autouse=False)
def clean_leases() -> Iterator[None]:
    """Fail if a test starts or ends with an exclusive lease held."""
    assert IN_PROCESS_LEASES.held() == {}, (
        f"leases held before the test: {IN_PROCESS_LEASES.held()}"
    )
    yield
    assert IN_PROCESS_LEASES.held() == {}, f"leases leaked by the test: {IN_PROCESS_LEASES.held()}"


class Cleanups:
    """An owned-mode resource factory that counts acquisitions and cleanups per delegation."""

    def __init__(
        self,
        tools: Callable[[], Sequence[Tool]] = lambda: (),
        *,
        fail_cleanup: str | None = None,
        async_cleanup: bool = False,
    ) -> None:
        self.tools = tools
        self.fail_cleanup = fail_cleanup
        self.async_cleanup = async_cleanup
        self.made: list[str] = []
        self.cleaned: list[str] = []
        self.contexts: list[Any] = []

    def __call__(self, agent: Any, definition: AgentDefinition, context: Any) -> Any:
        from deputy_runtime import DelegationResources

        key = context.delegation_id
        self.made.append(key)
        self.contexts.append(context)

        if self.async_cleanup:
            import anyio

            async def cleanup() -> None:
                await anyio.sleep(0)
                await anyio.sleep(0)
                self.cleaned.append(key)
                if self.fail_cleanup:
                    raise RuntimeError(self.fail_cleanup)

            return DelegationResources(tuple(self.tools()), cleanup)

        def sync_cleanup() -> None:
            self.cleaned.append(key)
            if self.fail_cleanup:
                raise RuntimeError(self.fail_cleanup)

        return DelegationResources(tuple(self.tools()), sync_cleanup)

    def assert_exactly_once(self) -> None:
        assert sorted(self.cleaned) == sorted(self.made), (self.made, self.cleaned)
        assert len(set(self.cleaned)) == len(self.cleaned), "a cleanup ran twice"
