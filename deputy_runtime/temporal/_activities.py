"""The activities: a model request and a tool call, run on whichever worker picks them up.

Activities are the only place deputy_runtime's Temporal workflows do I/O. Temporal runs an
activity at least once: a worker that dies mid-call leaves the call to be retried on
another worker, so a tool can run twice and its effects must tolerate that (or be
idempotent). The providers' own HTTP retries run inside one attempt; Temporal retries
the attempt only for errors the providers treat as retryable (rate limits, timeouts,
server and connection errors), never for authentication or bad-request errors.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import msgspec
from temporalio import activity
from temporalio.exceptions import ApplicationError

from .._tracing import STATE, mark_error
from ..chat import (
    ContentToolRequest,
    ContentToolResult,
    ModelRequest,
    Provider,
    ToolSpec,
    agent_name_scope,
    request_headers_scope,
    resolve_provider,
    tool_error_text,
)
from ..errors import AuthenticationError, BadRequestError, ProviderError, ToolArgumentError
from ..runtime import (
    HookEvent,
    Hooks,
    LeaseBackend,
    Permissions,
    chat_reply,
    chat_span,
    invalid_arguments_text,
    tool_span,
)
from ..tools import Tool, invoke_tool
from ._agent_extras import WorkerExtras
from ._gate_report import GateReport
from ._hooks import HOOK_ACTIVITY, HookCall, HookReply, ToolCallHooks, run_hook
from ._idempotency import IDEMPOTENCY_HEADER, idempotency_key
from ._resource_worker import OwnedResourceFactory, WorkerResources
from ._tool_gate import (
    DELEGATE_GATE_ACTIVITY,
    CanUseTool,
    announce_start,
    delegate_gate,
    tool_gate,
)
from ._values import ModelCall, ModelReply, PermissionSpec, ToolCall, ToolReply

__all__ = [
    "HEARTBEAT_SECONDS",
    "HOOK_ACTIVITY",
    "MODEL_ACTIVITY",
    "NON_RETRYABLE_ERRORS",
    "TOOL_ACTIVITY",
    "DeputyActivities",
]

MODEL_ACTIVITY = "deputy_model_request"
TOOL_ACTIVITY = "deputy_tool_call"
#: How often a running tool call reports that its worker is alive.
HEARTBEAT_SECONDS = 2.0
#: Failure types Temporal must not retry: the same request would fail the same way.
NON_RETRYABLE_ERRORS = (
    "AuthenticationError",
    "BadRequestError",
    "UnknownProviderError",
    "UnknownToolError",
)

T = TypeVar("T")


class DeputyActivities:
    """The worker side: the tool registry and providers the activities resolve names in.

    ``tools`` are the tools definitions may name (usually ``tools_file(working_dir)``);
    ``working_dir`` is where relative paths and the default write root resolve.
    ``provider_options`` are keyword arguments for every provider factory.
    ``owned_resources`` are the owned-resource factories delegations name
    (``OwnedResourceSpec(name=...)``); ``lease_backend`` keeps the leases of exclusive
    resources (a cross-process backend such as ``RedisLeases``, shared by every worker).
    ``hooks`` run around every tool call and for the lead-side events a run asks for
    (see ``_hooks``); every worker of a task queue must register the same ones.
    ``skills`` are the skills definitions may name (``Skill`` values or skill
    directories, by their names); ``mcp`` the MCP servers they may name, as
    ``McpResource(server, mode=...)`` (exclusive ones need ``lease_backend``). With MCP
    servers, open the activities around the worker (``async with activities:``): that
    starts the shared servers and stops every server when the worker stops.
    ``can_use_tool`` is the permission callback of the runs that ask for it
    (``lead_input(worker_can_use_tool=True)``), consulted after the static checks as
    ``Permissions(can_use_tool=...)`` is in-process; the same one on every worker.
    """

    def __init__(
        self,
        tools: Iterable[Tool] = (),
        *,
        working_dir: str | os.PathLike[str] = ".",
        provider_options: Mapping[str, Any] | None = None,
        owned_resources: Mapping[str, OwnedResourceFactory] | None = None,
        lease_backend: LeaseBackend | None = None,
        hooks: Hooks | None = None,
        skills: Iterable[Any] = (),
        mcp: Iterable[Any] = (),
        can_use_tool: CanUseTool | None = None,
    ) -> None:
        if hooks is not None and not isinstance(hooks, Hooks):
            raise TypeError(f"DeputyActivities hooks must be a Hooks registry, got {hooks!r}")
        if can_use_tool is not None and not callable(can_use_tool):
            raise TypeError(
                f"DeputyActivities can_use_tool must be callable or None, got {can_use_tool!r}"
            )
        self.can_use_tool = can_use_tool
        self.hooks = hooks if hooks is not None else Hooks()
        registry: dict[str, Tool] = {}
        for t in tools:
            if not isinstance(t, Tool):
                raise TypeError(f"DeputyActivities tools must be Tool objects, got {t!r}")
            if t.name in registry:
                raise ValueError(f"DeputyActivities: tool {t.name!r} is registered twice")
            registry[t.name] = t
        self.tools = registry
        self.working_dir = Path(os.path.realpath(working_dir))
        self._provider_options = dict(provider_options or {})
        self._providers: dict[str, Provider] = {}
        self.extras = WorkerExtras(skills, mcp, leases=lease_backend is not None)
        owned = {**(owned_resources or {}), **self.extras.owned_factories()}
        self.resources = WorkerResources(owned, lease_backend, str(self.working_dir))

    async def __aenter__(self) -> DeputyActivities:
        await self.extras.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.extras.close()

    def activities(self) -> list[Any]:
        """The bound activity functions to hand to a Temporal ``Worker``.

        Returns:
            The model-request and tool-call activities, bound to this registry.
        """
        return [
            self.model_request,
            self.tool_call,
            self.hook,
            self.extras.resolve,
            self.delegate_gate,
            *self.resources.shared_activities(),
        ]

    def own_queue_activities(self) -> list[Any]:
        """The activities this worker's own task queue serves (its owned resources').

        Returns:
            The tool-call and owned-resource cleanup activities.
        """
        return [self.tool_call, self.resources.cleanup]

    # -- model requests ---------------------------------------------------------------

    def _provider(self, spec: str) -> Provider:
        provider = self._providers.get(spec)
        if provider is None:
            try:
                provider = resolve_provider(spec, **self._provider_options)
            except (ValueError, LookupError) as exc:
                raise ApplicationError(
                    str(exc), type="UnknownProviderError", non_retryable=True
                ) from exc
            self._providers[spec] = provider
        return provider

    def tool_specs(
        self, names: Iterable[str], skills: tuple[str, ...] = ()
    ) -> tuple[ToolSpec, ...]:
        """The specs of registry tools ``names``.

        Args:
            names: Tool names in this worker's registry (or of ``skills``, or of its
                shared MCP servers).
            skills: The agent's skills (``load_skill`` and their tools).

        Returns:
            Their specs, in order.

        Raises:
            ApplicationError: A name is not in the registry (not retried).
        """
        specs = []
        for name in names:
            t = self.tools.get(name) or self.extras.tool(name, skills)
            if t is None:
                known = ", ".join(sorted(self.tools)) or "none"
                raise ApplicationError(
                    f"tool {name!r} is not in this worker's tool registry (known: {known})",
                    type="UnknownToolError",
                    non_retryable=True,
                )
            specs.append(ToolSpec(t.name, t.description, t.parameters))
        return tuple(specs)

    @activity.defn(name=MODEL_ACTIVITY)
    async def model_request(self, call: ModelCall) -> ModelReply:
        """Send one request to the model ``call.model`` names.

        Args:
            call: The request: model spec, agent name, prompt, turns, tools, parameters.

        Returns:
            The provider's turn.

        Raises:
            ApplicationError: The provider failed; not retried for authentication and
                bad-request errors or an unknown provider.
        """
        provider = self._provider(call.model)
        named = self.tool_specs(call.tools, call.skills)
        specs = (*call.extra_tools, *named) if call.extra_first else (*named, *call.extra_tools)
        request = ModelRequest(call.system_prompt, call.turns, specs, call.params)
        key = {IDEMPOTENCY_HEADER: idempotency_key(activity.info())}
        try:
            with agent_name_scope(call.agent_name), request_headers_scope(key):
                if STATE.tracer is None:
                    turn = await _heartbeating(provider.complete(request))
                else:
                    with chat_span(call.agent_name, provider, request) as current:
                        turn = await _heartbeating(provider.complete(request))
                        chat_reply(current, turn)
        except (AuthenticationError, BadRequestError) as exc:
            raise ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True) from exc
        except ProviderError as exc:
            raise ApplicationError(str(exc), type=type(exc).__name__) from exc
        return ModelReply(
            turn, provider=str(getattr(provider, "name", "?")), model=str(provider.model)
        )

    # -- tool calls ---------------------------------------------------------------------

    def _permissions(self, spec: PermissionSpec) -> Permissions:
        return Permissions(
            mode=spec.mode,  # type: ignore[arg-type]
            allow=frozenset(spec.allow),
            deny=frozenset(spec.deny),
            write_root=spec.write_root,  # type: ignore[arg-type]
        ).bind(self.working_dir)

    @activity.defn(name=TOOL_ACTIVITY)
    async def tool_call(self, call: ToolCall) -> ToolReply:
        """Check one tool call against both permission sets, then run it, heartbeating.

        Args:
            call: The call, the names the agent was offered and both permission sets.

        Returns:
            The result the model sees (an error result when the tool is unknown, the call
            is denied, its arguments are invalid or it raised) and the denial reason.
        """
        # The whole call heartbeats, its hooks included: a hook may wait on a person.
        with self.resources.scope(call.route, str(self.working_dir)):
            if STATE.tracer is None:
                return await _heartbeating(self._tool_call(call))
            request = ContentToolRequest(call.request_id, call.name, call.arguments)
            with tool_span(request, call.request_id) as current:
                return await _heartbeating(self._tool_call(call, current))

    async def _tool_call(self, call: ToolCall, traced: Any = None) -> ToolReply:
        """The tool call; ``traced``, when given, is its span (decision, failure)."""
        t = self.resources.tool(call.route, call.name) if call.name in call.offered else None
        t = t or (self.tools.get(call.name) if call.name in call.offered else None)
        t = t or (self.extras.tool(call.name, call.skills) if call.name in call.offered else None)
        if t is None:
            names = ", ".join(call.offered) or "none"
            unknown = f"Unknown tool: {call.name}. Available tools: {names}"
            if traced is not None:
                traced.set_attribute("deputy.permission.decision", "deny")
            # Refused before the gate, as in-process: no event at all.
            return ToolReply(
                ContentToolResult(call.request_id, error=unknown), gate=GateReport(started=False)
            )
        hooks = ToolCallHooks(self.hooks, call, self.working_dir)
        lead = call.lead_permissions
        gate = await tool_gate(
            t,
            call,
            hooks,
            self._permissions(call.permissions),
            None if lead is None else self._permissions(lead),
            self.can_use_tool,
            traced,
        )
        if isinstance(gate, ToolReply):  # refused before it ran
            return gate
        await announce_start(call, gate)
        value: Any = None
        error: str | None = None
        try:
            value = await invoke_tool(t, call.arguments)
        except ToolArgumentError as exc:
            if traced is not None:
                mark_error(traced, exc)
            error = invalid_arguments_text(exc)
        except Exception as exc:
            if traced is not None:
                mark_error(traced, exc)
            error = tool_error_text(exc)
        event = HookEvent.PostToolUse if error is None else HookEvent.PostToolUseFailure
        decision = await hooks.fire(event, tool_result=value, tool_error=error)
        stop = decision.reason if decision and decision.decision == "stop" else None
        result = (
            ContentToolResult(call.request_id, value=_plain(value))
            if error is None
            else ContentToolResult(call.request_id, error=error)
        )
        return ToolReply(
            result,
            stop=stop,
            hook_errors=tuple(hooks.errors),
            allowed_by_hook=gate.allowed_by_hook,
            gate=gate.report(started=True),
        )

    @activity.defn(name=DELEGATE_GATE_ACTIVITY)
    async def delegate_gate(self, call: ToolCall) -> ToolReply:
        """Check a lead's ``delegate_to_agent`` call against its permissions.

        Args:
            call: The call and the lead's permissions.

        Returns:
            The refusal, or a reply whose gate says the delegation may start.
        """
        hooks = ToolCallHooks(self.hooks, call, self.working_dir)
        own = self._permissions(call.permissions)
        return await _heartbeating(delegate_gate(call, hooks, own, self.can_use_tool))

    # -- hooks ----------------------------------------------------------------------------

    @activity.defn(name=HOOK_ACTIVITY)
    async def hook(self, call: HookCall) -> HookReply:
        """Run this worker's hooks for one lead-side or lifecycle event.

        Args:
            call: The event's hook input.

        Returns:
            The first decision of the hooks (``None``: none decided) and the
            ``"EVENT: message"`` errors of those that raised.
        """
        return await _heartbeating(run_hook(self.hooks, call, self.working_dir))


def _plain(value: Any) -> Any:
    """The tool's value as JSON-encodable data (its ``repr`` when it is not)."""
    try:
        return msgspec.to_builtins(value)
    except (TypeError, ValueError):
        return repr(value)


async def _heartbeating(work: Awaitable[T]) -> T:
    """Await ``work``, heartbeating every :data:`HEARTBEAT_SECONDS` while it runs, so a
    worker that dies is noticed after the heartbeat timeout, not the whole call's."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=HEARTBEAT_SECONDS)
            if done:
                return task.result()
            activity.heartbeat()
    finally:
        if not task.done():
            task.cancel()
