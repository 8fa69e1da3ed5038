"""The tools ``deputy-runtime mcp-serve`` offers an MCP client, and what a call does.

Every definition is a tool named after its agent (a namespaced ``plugin:agent`` becomes
``plugin.agent``, as MCP tool names have no colon) whose description is the
definition's; ``run_lead`` runs the whole lead. Each takes ``{"task": string}``.

Every call runs a fresh lead, built exactly as ``deputy-runtime run`` builds one, so the
permission ceiling, the hooks, the resource modes and the per-call limits apply as
there; an agent's tool runs a lead over that one definition, told to hand the task on
unchanged, and answers with the subagent's own answer (its decoded ``output`` as
``structuredContent`` when the definition has an ``output_schema``). Every lead draws on
the server's :class:`~deputy_runtime.InProcessLedger`, so the server-wide budget holds
across calls, concurrent ones included; a call made once the budget is spent is refused
before anything runs. A failed or stopped run is a tool error (``isError``) whose text
says what stopped it.

While a call runs, the delegation events (a delegation's start and end, a subagent's tool
calls, permission refusals, MCP server starts and stops, warnings) are sent as progress
notifications when the client asked for them (a ``progressToken``): ``progress`` counts
them, ``message`` is the event's JSON. A client's cancellation cancels the call's scope:
the lead and its delegations settle, and owned resources, MCP servers and the call's
background shell commands are cleaned up, before the call ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import msgspec
from mcp_types import CallToolResult, TextContent, Tool, ToolAnnotations

from .._outputschema import json_schema_of
from ..definitions import AgentDefinition
from ..errors import DeputyError
from ..runtime import (
    DelegationEnd,
    DelegationStart,
    DelegationStatus,
    Event,
    InProcessLedger,
    LeadAgent,
    McpServerEvent,
    PermissionEvent,
    StopReason,
    SubagentRecord,
    ToolEnd,
    ToolStart,
    WarningEvent,
    encode_event,
)

__all__ = ["LEAD_TOOL", "LeadTools", "OpenLead", "Progress", "build_server", "tool_name"]

#: The tool that runs the whole lead.
LEAD_TOOL = "run_lead"
#: What a client may send as ``task`` at most (characters).
MAX_TASK_CHARS = 100_000
# Progress notifications queued for the client at most; past that, newer ones are dropped
# (progress is advisory: a slow client must not hold the run up).
_PROGRESS_BUFFER = 256
_EVENTS = (
    DelegationStart,
    DelegationEnd,
    ToolStart,
    ToolEnd,
    PermissionEvent,
    McpServerEvent,
    WarningEvent,
)
_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task": {
            "type": "string",
            "minLength": 1,
            "description": "What to do, self-contained: the agent sees nothing else.",
        }
    },
    "required": ["task"],
    "additionalProperties": False,
}
# Below this many requests left no lead can run: its first request and the one it keeps
# for its final answer (the runtime reserves that spare before the first request).
_MIN_REQUESTS = 2
# A schema whose root is not an object is wrapped: MCP's structuredContent is an object.
_WRAPPED = "result"

#: Sends one progress notification: ``(progress, message)``.
Progress = Callable[[float, str], Awaitable[None]]
#: Opens one call's lead over the given agents (see :class:`LeadTools`).
OpenLead = Callable[[Mapping[str, AgentDefinition]], AbstractAsyncContextManager[LeadAgent]]


def tool_name(agent: str) -> str:
    """The MCP tool name of an agent (``plugin:agent`` -> ``plugin.agent``)."""
    return agent.replace(":", ".")


class _AgentTool:
    __slots__ = ("definition", "output_schema", "tool", "wrapped")

    def __init__(self, definition: AgentDefinition) -> None:
        self.definition = definition
        schema = definition.output_schema
        self.wrapped = False
        self.output_schema: dict[str, Any] | None = None
        if schema is not None:
            shown = json_schema_of(schema)
            if shown.get("type") == "object":
                self.output_schema = shown
            else:
                self.wrapped = True
                self.output_schema = {
                    "type": "object",
                    "properties": {_WRAPPED: shown},
                    "required": [_WRAPPED],
                }
        self.tool = Tool(
            name=tool_name(definition.name),
            description=definition.description,
            input_schema=_INPUT_SCHEMA,
            output_schema=self.output_schema,
            annotations=ToolAnnotations(
                read_only_hint=definition.permission_mode in ("readonly", "plan"),
                open_world_hint=True,
            ),
        )


class LeadTools:
    """The tools of one ``mcp-serve`` and the calls to them (see the module docstring).

    Args:
        definitions: The agents, by name.
        open_lead: Opens a lead over the given definitions (with ``ledger`` as its
            shared budget, the ceiling, hooks and limits of the command line) for one
            call, and whatever the call owns (its shell); leaving it closes them.
        ledger: The server's budget, shared by every call.
        lead_tool: Whether ``run_lead`` is offered.
        agent_tools: Whether each agent is offered as a tool.
        max_calls: Calls running at once; more wait for a slot.
        budget_option: Names the server's budget in refusals (``--total-requests``).

    Raises:
        ValueError: An agent's tool name is ``run_lead`` while that tool is offered, or
            no tool is offered at all.
    """

    __slots__ = (
        "_agents",
        "_budget_option",
        "_definitions",
        "_lead_tool",
        "_ledger",
        "_limiter",
        "_open_lead",
    )

    def __init__(
        self,
        definitions: Mapping[str, AgentDefinition],
        open_lead: OpenLead,
        *,
        ledger: InProcessLedger,
        lead_tool: bool = True,
        agent_tools: bool = True,
        max_calls: int = 4,
        budget_option: str = "the server's budget",
    ) -> None:
        self._open_lead = open_lead
        self._ledger = ledger
        self._lead_tool = lead_tool
        self._budget_option = budget_option
        self._limiter = anyio.CapacityLimiter(max_calls)
        self._agents: dict[str, _AgentTool] = {}
        if agent_tools:
            for definition in definitions.values():
                entry = _AgentTool(definition)
                if lead_tool and entry.tool.name == LEAD_TOOL:
                    raise ValueError(
                        f"agent {definition.name!r}: its tool name clashes with the "
                        f"{LEAD_TOOL} tool; rename the agent or pass --tools agents"
                    )
                self._agents[entry.tool.name] = entry
        self._definitions = dict(definitions)
        if not self._agents and not lead_tool:
            raise ValueError("no tool to offer: there are no agents and run_lead is off")

    def tools(self) -> list[Tool]:
        """The tools, ``run_lead`` first, then the agents in definition order."""
        listed: list[Tool] = []
        if self._lead_tool:
            names = ", ".join(self._definitions) or "none"
            listed.append(
                Tool(
                    name=LEAD_TOOL,
                    description=(
                        "Run the lead agent on a task: it splits the task between its "
                        f"agents ({names}), runs them (independent parts in parallel) and "
                        "combines their answers into one reply."
                    ),
                    input_schema=_INPUT_SCHEMA,
                    annotations=ToolAnnotations(open_world_hint=True),
                )
            )
        listed.extend(entry.tool for entry in self._agents.values())
        return listed

    async def call(
        self, name: str, arguments: Mapping[str, Any] | None, progress: Progress
    ) -> CallToolResult:
        """Run tool ``name``; a refusal or a failed run is an error result, not a raise.

        Cancelling the caller cancels the run; its delegations settle and clean up first.
        """
        entry = self._agents.get(name)
        if entry is None and not (self._lead_tool and name == LEAD_TOOL):
            known = ", ".join(t.name for t in self.tools())
            return _error(f"no tool named {name!r}; this server has: {known}")
        task = _task(arguments)
        if isinstance(task, _Refusal):
            return _error(task.text)
        async with self._limiter:
            spent = self._spent()
            if spent is not None:
                return _error(spent)
            if entry is None:
                agents, run_task = self._definitions, task
            else:
                agent = entry.definition.name
                agents = {agent: entry.definition}
                run_task = (
                    f"Delegate this task, unchanged, to the {agent} agent and reply with "
                    f"its answer.\n\nTask:\n{task}"
                )
            lead, failure = await _run(self._open_lead(agents), run_task, progress)
            if failure is not None or lead is None:
                return _error(f"the run failed: {failure}")
        if entry is None:
            return self._lead_result(lead)
        return self._agent_result(lead, entry)

    def _spent(self) -> str | None:
        """Why no call can run any more, or ``None`` while one can."""
        left = self._ledger.remaining()
        short = [f for f in left if _too_little(f, left[f])]
        if not short:
            return None
        return (
            f"refused: the server's budget is spent ({self._budget_state(short)}; "
            f"{self._budget_option}); no further call can run until the server is restarted"
        )

    def _budget_state(self, fields: list[str]) -> str:
        limits, used, left = self._ledger.limits, self._ledger.used(), self._ledger.remaining()
        return ", ".join(
            f"{f} {_amount(used[f])} of {_amount(limits[f])} used, {_amount(left[f])} left"
            + (f"; a call needs at least {_MIN_REQUESTS}" if f == "requests" else "")
            for f in fields
        )

    def _stopped(self, reason: StopReason | None, error: str | None) -> str:
        text = f"stop reason {reason}" if reason is not None else "no stop reason"
        if error:
            text += f": {error}"
        limited = [f for f, limit in self._ledger.limits.items() if limit is not None]
        if limited and reason in _LIMITS:
            text += f" (the server's budget: {self._budget_state(limited)}; {self._budget_option})"
        return text

    def _lead_result(self, lead: LeadAgent) -> CallToolResult:
        result = lead.last_result
        if result is None:  # pragma: no cover - a finished run always has one
            return _error("the lead did not run")
        if result.stop_reason is not StopReason.COMPLETE:
            return _error(
                "the lead stopped early, "
                + self._stopped(result.stop_reason, result.error)
                + (f"; its last answer: {result.response}" if result.response else "")
            )
        return CallToolResult(content=[TextContent(type="text", text=result.response)])

    def _agent_result(self, lead: LeadAgent, entry: _AgentTool) -> CallToolResult:
        agent = entry.definition.name
        record = _last_record(lead.list_subagents(), agent)
        if record is None:
            result = lead.last_result
            why = "" if result is None else "; " + self._stopped(result.stop_reason, result.error)
            return _error(f"the lead did not delegate to {agent}{why}")
        if record.status is not DelegationStatus.COMPLETED:
            return _error(
                f"{agent} did not complete (status {record.status}, "
                + self._stopped(record.stop_reason, record.error)
                + ")"
            )
        found = lead.get_subagent_results(delegation_id=record.delegation_id)
        answer = found[0].response if found and found[0] is not None else ""
        if entry.output_schema is None:
            return CallToolResult(content=[TextContent(type="text", text=answer)])
        value = msgspec.to_builtins(record.output)
        structured = {_WRAPPED: value} if entry.wrapped else value
        text = msgspec.json.encode(value).decode()
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=structured
        )


class _Refusal:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


_LIMITS = frozenset(
    {
        StopReason.REQUEST_LIMIT,
        StopReason.TOOL_CALL_LIMIT,
        StopReason.INPUT_TOKEN_LIMIT,
        StopReason.OUTPUT_TOKEN_LIMIT,
        StopReason.TOTAL_TOKEN_LIMIT,
        StopReason.COST_LIMIT,
        StopReason.NOT_STARTED,
    }
)


def _task(arguments: Mapping[str, Any] | None) -> str | _Refusal:
    """The ``task`` argument, checked (the SDK does not validate the input schema)."""
    args = dict(arguments or {})
    extra = sorted(set(args) - {"task"})
    if extra:
        return _Refusal(f"arguments: unexpected {', '.join(map(repr, extra))}; only 'task'")
    task = args.get("task")
    if not isinstance(task, str) or not task.strip():
        got = "nothing" if task is None else repr(task)[:80]
        return _Refusal(f"arguments: 'task' must be a non-empty string, got {got}")
    if len(task) > MAX_TASK_CHARS:
        return _Refusal(
            f"arguments: 'task' is {len(task)} characters; at most {MAX_TASK_CHARS} are taken"
        )
    return task


def _last_record(records: list[SubagentRecord], agent: str) -> SubagentRecord | None:
    """The agent's last completed delegation, else its last one."""
    mine = [r for r in records if r.agent_name == agent]
    done = [r for r in mine if r.status is DelegationStatus.COMPLETED]
    chosen = done or mine
    return chosen[-1] if chosen else None


async def _run(
    opened: AbstractAsyncContextManager[LeadAgent], task: str, progress: Progress
) -> tuple[LeadAgent | None, DeputyError | None]:
    """Run the lead, forwarding its delegation events to ``progress`` as they come.

    Returns the lead (``None`` if it could not be opened) and the error of a run that
    raised rather than reported its failure (a plugin's policy, a resource that cannot
    be bound): the client is told, the server goes on.
    """
    lead: LeadAgent | None = None
    failure: DeputyError | None = None
    send, receive = anyio.create_memory_object_stream[Event](_PROGRESS_BUFFER)

    def sink(event: Event) -> None:
        # Advisory: a full queue drops the newest (see _PROGRESS_BUFFER).
        if isinstance(event, _EVENTS):
            with contextlib.suppress(
                anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError
            ):
                send.send_nowait(event)

    async def forward() -> None:
        count = 0
        async with receive:
            async for event in receive:
                count += 1
                await progress(float(count), encode_event(event).decode())

    async with anyio.create_task_group() as tg:
        tg.start_soon(forward)
        try:
            # The open lead hosts its attached MCP servers and the call's shell; leaving
            # it stops them all, cancelled or not.
            async with opened as lead:
                await lead.run(task, on_event=sink)
        except DeputyError as exc:
            failure = exc
        finally:
            send.close()  # forward() sends what is queued, then ends
    return lead, failure


def _too_little(field: str, left: float | None) -> bool:
    if left is None:
        return False
    return left < _MIN_REQUESTS if field == "requests" else left <= 0


def _amount(value: float | None) -> str:
    if value is None:
        return "unlimited"
    return str(value) if isinstance(value, int) else f"{value:.4g}"


def _error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def build_server(tools: LeadTools, version: str) -> Any:
    """The SDK's low-level server answering ``tools/list`` and ``tools/call`` with
    ``tools``; progress goes to the calling request (nothing when it sent no token)."""
    from mcp.server import Server, ServerRequestContext
    from mcp_types import CallToolRequestParams, ListToolsResult, PaginatedRequestParams

    async def list_tools(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=tools.tools())

    async def call_tool(
        ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult:
        async def progress(value: float, message: str) -> None:
            await ctx.session.report_progress(value, None, message)

        return await tools.call(params.name, params.arguments, progress)

    return Server(
        "deputy-runtime",
        version=version,
        instructions=(
            "Each tool runs deputy_runtime agents on a task under this server's permission "
            "ceiling, budgets and hooks. run_lead splits a task between the agents; an "
            "agent's own tool hands it to that agent."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
