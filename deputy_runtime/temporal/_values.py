"""Values that cross the durable boundary: workflow and activity inputs and outputs.

Everything is a frozen msgspec Struct of plain data, so Temporal records it in the
workflow's history as JSON (see ``_converter``). Tools and providers never travel: a
definition names its tools and its model, and the worker resolves the names.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from ..chat import AssistantTurn, ContentToolResult, ToolSpec, Turn
from ..runtime import AgentResult, Permissions, SubagentRecord, UsageLimits
from ._gate_report import GateReport
from ._limits import DelegationLimits
from ._resource_values import ResourceSpec, ToolRoute

__all__ = [
    "AgentSpec",
    "LeadInput",
    "LeadOutput",
    "LoopCheckpoint",
    "ModelCall",
    "PermissionSpec",
    "SubagentInput",
    "SubagentOutput",
    "ToolCall",
]


class PermissionSpec(msgspec.Struct, frozen=True, gc=False):
    """The plain-data part of :class:`~deputy_runtime.Permissions`.

    ``can_use_tool`` callbacks cannot be recorded in a history, so they are not carried;
    ``write_root`` is a path on the worker (``None``: the worker's working directory).
    """

    mode: str = "standard"
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    write_root: str | None = None
    #: The calls are put to the workers' ``can_use_tool`` callback after the static
    #: checks (``DeputyActivities(can_use_tool=...)``); a subagent's ceiling keeps it.
    can_use_tool: bool = False

    def checkable(self) -> Permissions:
        """The static rules as :class:`~deputy_runtime.Permissions` (mode, allow, deny), for
        checks in workflow code: the write root is a path on the worker, left unresolved.

        Returns:
            Permissions with this spec's mode, allow and deny lists.
        """
        return Permissions(
            mode=self.mode,  # type: ignore[arg-type]
            allow=frozenset(self.allow),
            deny=frozenset(self.deny),
        )


class AgentSpec(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """A definition as data: what a workflow needs to run it.

    ``tools`` are names in the worker's tool registry; ``model`` is ``"inherit"`` or a
    ``provider/model`` spec the worker resolves.
    """

    name: str
    description: str
    system_prompt: str
    tools: tuple[str, ...] = ()
    model: str = "inherit"
    disallowed_tools: tuple[str, ...] = ()
    initial_prompt: str | None = None
    max_requests: int | None = None
    permission_mode: str | None = None
    params: dict[str, Any] = msgspec.field(default_factory=dict)
    #: Skill names and MCP selections the worker resolves (see ``_agent_extras``).
    skills: tuple[str, ...] = ()
    mcp_tools: tuple[str, ...] = ()
    mcp_servers: tuple[str, ...] = ()
    #: The JSON Schema the final answer must match (a Python type travels as its schema)
    #: and how many mismatching answers are sent back (``None``: the default).
    output_schema: dict[str, Any] | None = None
    output_retries: int | None = None


class LeadInput(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """Everything a lead run needs, recorded as the lead workflow's input."""

    task: str
    model: str
    sub_agents: tuple[AgentSpec, ...]
    tools: tuple[str, ...] = ()
    system_prompt: str | None = None
    limits: UsageLimits = UsageLimits()
    permissions: PermissionSpec = PermissionSpec()
    name: str = "lead"
    params: dict[str, Any] = msgspec.field(default_factory=dict)
    #: How many of the run's delegations run at once (``None``: all); see ``_slots``.
    max_active_delegations: Annotated[int, msgspec.Meta(ge=1)] | None = None
    #: History events after which the lead continues as new at its next turn boundary.
    continue_as_new_after: Annotated[int, msgspec.Meta(ge=1)] = 10_000
    #: The loop's state when this run continues an earlier run of the chain as new (set
    #: by the lead itself; ``None`` when starting a run).
    checkpoint: LoopCheckpoint | None = None
    resources: tuple[ResourceSpec, ...] = ()
    #: Lead-side hook events the workers' hooks run for (``deputy_hook`` activities).
    hook_events: tuple[str, ...] = ()
    #: Whether delegations may ask a person (``ask_user``); see ``_human``.
    human_input: bool = False
    #: The delegation policy's time limit and per-agent caps (see ``_limits``).
    delegation: DelegationLimits = DelegationLimits()
    #: Hook events forwarded from subagents to the workers' hooks beyond the ones always
    #: forwarded (``DelegationPolicy.observers``).
    observers: tuple[str, ...] = ()


class SubagentInput(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """One delegation's child workflow input: the definition, its reserved limits, the
    permissions it runs under (already capped by the lead's), and its ids."""

    spec: AgentSpec
    model: str
    message: str
    limits: UsageLimits
    permissions: PermissionSpec
    lead_permissions: PermissionSpec
    agent_id: str
    run_id: str
    delegation_id: str
    parent_agent_id: str
    parent_run_id: str
    #: History events after which the child continues as new at its next turn boundary.
    continue_as_new_after: Annotated[int, msgspec.Meta(ge=1)] = 10_000
    #: The loop's state when this run continues an earlier run of the chain as new.
    checkpoint: LoopCheckpoint | None = None
    resources: tuple[ResourceSpec, ...] = ()
    #: Whether delegations may ask a person (``ask_user``); see ``_human``.
    human_input: bool = False
    #: Hook events forwarded to the lead's hooks beyond the ones always forwarded.
    observers: tuple[str, ...] = ()
    #: Whether ``limits`` are a fair share the lead tops up on request (``_top_up``).
    fair_share: bool = False


class LeadOutput(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """A finished lead run: its result, one record per admitted delegation (admission
    order) and each delegation's result (``None`` where it never ran)."""

    result: AgentResult
    subagents: tuple[SubagentRecord, ...] = ()
    subagent_results: tuple[AgentResult | None, ...] = ()


class ModelCall(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """One model request, made by the ``deputy_model_request`` activity.

    ``tools`` are registry names the worker turns into specs; ``extra_tools`` are specs
    the workflow built itself (``delegate_to_agent``).
    """

    model: str
    agent_name: str | None
    system_prompt: str | None
    turns: tuple[Turn, ...]
    tools: tuple[str, ...] = ()
    extra_tools: tuple[ToolSpec, ...] = ()
    params: dict[str, Any] = msgspec.field(default_factory=dict)
    #: The agent's skills: the worker builds ``load_skill`` and finds their tools.
    skills: tuple[str, ...] = ()
    #: Offer ``extra_tools`` before the registry tools (a lead's ``delegate_to_agent``
    #: comes first, as in-process).
    extra_first: bool = False


class ModelReply(msgspec.Struct, frozen=True, gc=False):
    """The activity's answer: the provider's turn, and which provider and model gave it
    (for the warnings that name them; empty in histories written before they were sent)."""

    turn: AssistantTurn
    provider: str = ""
    model: str = ""


class ToolCall(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """One tool call, run by the ``deputy_tool_call`` activity after the permission
    checks: ``permissions`` the agent's own, ``lead_permissions`` its lead's (both must
    allow the call)."""

    request_id: str
    name: str
    arguments: dict[str, Any]
    offered: tuple[str, ...]
    permissions: PermissionSpec
    lead_permissions: PermissionSpec | None = None
    route: ToolRoute | None = None
    # The calling agent's ids, for the hooks' input (a subagent's carry its delegation's).
    agent_id: str | None = None
    agent_name: str | None = None
    run_id: str | None = None
    delegation_id: str | None = None
    parent_agent_id: str | None = None
    parent_run_id: str | None = None
    #: The agent's skills: the worker builds ``load_skill`` and finds their tools.
    skills: tuple[str, ...] = ()
    #: A subagent's hook events forwarded to its lead's hooks beyond the ones always
    #: forwarded (its lead's ``DelegationPolicy.observers``).
    observers: tuple[str, ...] = ()


class ToolReply(msgspec.Struct, frozen=True, gc=False):
    """The call's result as the model will see it (``error`` set when it failed or was
    denied)."""

    result: ContentToolResult
    denied: str | None = None
    #: A hook asked to stop the run (its reason); the loop stops at its next boundary.
    stop: str | None = None
    #: ``"EVENT: message"`` lines of hooks that raised around the call.
    hook_errors: tuple[str, ...] = ()
    #: A PermissionRequest hook allowed a call the rules denied.
    allowed_by_hook: bool = False
    #: What the gate did, in order (``None``: the tool ran, as for a reply the workflow
    #: made itself when the activity failed); the workflow logs the events from it.
    gate: GateReport | None = None


class SubagentOutput(msgspec.Struct, frozen=True, gc=False):
    """A child workflow's answer: the subagent's result and its encoded events."""

    result: AgentResult
    events: tuple[str, ...] = ()
    cleanup_error: str | None = None
    #: Errors of the lead's hooks around this subagent's calls (its record's hook_error).
    hook_errors: tuple[str, ...] = ()


class LoopCheckpoint(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """An agent loop's state at a turn boundary, carried into the next run of a
    continue-as-new chain as ``LeadInput.checkpoint`` or ``SubagentInput.checkpoint``.

    ``used`` and ``cost_reported`` are the budget's counters (no reservation is held at a
    boundary); ``events`` is the encoded log, or for a lead its newest part, and
    ``events_base`` the number of events of the chain before it; ``subagents`` and
    ``subagent_results`` are a lead's settled delegations; ``runs`` counts the chain's
    runs so far.
    """

    agent_id: str
    run_id: str
    turns: tuple[Turn, ...]
    requests: int
    used: dict[str, float]
    cost_reported: bool
    permissions: PermissionSpec
    lead_permissions: PermissionSpec | None = None
    interrupt: str | None = None
    subagents: tuple[SubagentRecord, ...] = ()
    subagent_results: tuple[AgentResult | None, ...] = ()
    events: tuple[str, ...] = ()
    events_base: int = 0
    runs: int = 1
    #: Errors of the hooks around the agent's calls so far (see ``_hookflow``).
    hook_errors: tuple[str, ...] = ()
    #: When the run's ``max_seconds`` runs out (a ``workflow.now()`` timestamp).
    deadline: float | None = None
    #: The run has given its cost-unknown warning (once per run, not per chain link).
    cost_warned: bool = False
    #: Final answers the output schema rejected so far (the retries are per run).
    output_rejected: int = 0
