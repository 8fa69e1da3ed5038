"""What one delegation is: its brief, its mutable state, its record and its outcome.

The value types of the delegation side live here, below every module that uses them (the
resource modes, the policy, the builder, the coordinator and ``parallel_delegate``), so
none of those import each other for a type.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import anyio
import msgspec

from .._ids import new_id
from ..definitions import AgentDefinition
from ..errors import DelegationBindingError, DeputyError
from ..tools import Tool
from ._agent import Agent
from ._leases import Lease
from ._ledger import BudgetLedger
from ._result import AgentResult, ToolRejection
from ._states import DelegationStatus, StopReason, delegation_status
from ._texts import BLANK_TASK_TEXT
from ._usage import AgentUsage, Reservation, UsageLimits

__all__ = [
    "Binding",
    "Brief",
    "Delegation",
    "DelegationContext",
    "DelegationResources",
    "SubagentRecord",
    "build_outcome",
    "check_brief",
    "first_message",
    "outcome_json",
    "record_outcome",
]

ANSWER_MAX_BYTES = 8 * 1024
_TASK_MAX_BYTES = 1024 * 1024


class Brief(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """What the lead's model asked the subagent to do (the delegate tool's arguments)."""

    task: str
    constraints: tuple[str, ...] = ()
    deliverable: str | None = None
    stop_conditions: tuple[str, ...] = ()


class _FirstMessage(msgspec.Struct, frozen=True, gc=False):
    format: str
    definition_initial_prompt: str | None
    brief: Brief


_encode = msgspec.json.Encoder().encode


def first_message(definition: AgentDefinition | None, brief: Brief) -> str:
    """The subagent's first (and only) user message: deputy_delegation_v1 JSON."""
    initial = definition.initial_prompt if definition is not None else None
    message = _FirstMessage("deputy_delegation_v1", initial, brief)
    return _encode(message).decode()


def check_brief(arguments: Mapping[str, Any]) -> Brief:
    """The delegate tool's arguments as a Brief (the schema already checked types).

    Raises:
        ToolRejection: The task is blank or larger than 1 MiB.
    """
    task = arguments["task"]
    if not task.strip():
        raise ToolRejection(BLANK_TASK_TEXT)
    if len(task.encode()) > _TASK_MAX_BYTES:
        raise ToolRejection("delegate_to_agent: 'task' is larger than 1 MiB.")
    return Brief(
        task=task,
        constraints=tuple(arguments.get("constraints") or ()),
        deliverable=arguments.get("deliverable"),
        stop_conditions=tuple(arguments.get("stop_conditions") or ()),
    )


class DelegationContext(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """What host callbacks (resources, human_input, chat) learn about a delegation.

    Attributes:
        delegation_id: The delegation's id.
        agent_id: The subagent's agent id.
        agent_name: The definition's name.
        run_id: The subagent's run id.
        parent_agent_id: The lead's agent id.
        parent_run_id: The lead's run id.
        tool_call_id: The delegate tool call (``None`` for ``parallel_delegate``).
        working_dir: Shared with the lead (not a sandbox).
        scope: The lead's ``delegation_scope``.
        lease_token: The fencing token of the delegation's exclusive lease, ``None``
            without one: pass it to the resource so it can refuse a stale holder.
    """

    delegation_id: str
    agent_id: str
    agent_name: str
    run_id: str
    parent_agent_id: str
    parent_run_id: str | None
    tool_call_id: str | None
    working_dir: str
    scope: dict[str, Any] | None = None
    lease_token: int | None = None


class DelegationResources(msgspec.Struct, frozen=True):
    """What an owned-mode factory returns: the subagent's tools and their cleanup.

    Attributes:
        tools: The subagent's tools.
        cleanup: Sync or async callable (or ``None``) run exactly once after the
            delegation settles, fails during setup, or is cancelled; it runs shielded
            from cancellation.
    """

    tools: tuple[Tool, ...] = ()
    cleanup: Callable[[], Any] | None = None

    def __post_init__(self) -> None:
        # No validation here: this runs inside the host's factory, and raising there would
        # lose the cleanup of whatever the factory opened. The runtime calls validate()
        # after it has taken the cleanup.
        if not isinstance(self.tools, tuple):
            msgspec.structs.force_setattr(self, "tools", tuple(self.tools))

    def validate(self) -> None:
        """Check what the factory returned.

        Raises:
            DelegationBindingError: A tool is not a Tool, or cleanup is not callable.
        """
        for t in self.tools:
            if not isinstance(t, Tool):
                raise DelegationBindingError(
                    f"DelegationResources.tools must contain Tool objects, got {type(t).__name__}"
                )
        if self.cleanup is not None and not callable(self.cleanup):
            raise DelegationBindingError("DelegationResources.cleanup must be callable or None")


class Binding(Protocol):
    """Something a resource mode bound for one delegation, released once it settles.

    Attributes:
        holds: ``True`` when :meth:`hold` must run while the subagent runs (a lease
            that needs renewing); ``False`` skips it.
    """

    holds: bool

    async def hold(self, on_lost: Callable[[str], None]) -> None:
        """Keep what was bound alive until cancelled; ``on_lost(reason)`` if it cannot."""
        ...

    async def release(self) -> str | None:
        """Free what was bound; return the error text if that failed (never raise)."""
        ...


class SubagentRecord(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """A snapshot of one admitted delegation (``LeadAgent.list_subagents()``).

    Attributes:
        status: Where the delegation stands.
        stop_reason: Why it ended, once settled.
        admitted_at: Unix seconds; so are ``started_at`` and ``completed_at``.
        hook_error: ``"EVENT: message"`` lines of hooks that failed for it.
        cleanup_error: The owned cleanup's error, if any.
        output: The subagent's decoded final answer when its definition has an
            ``output_schema`` and the delegation completed (an instance of a type
            schema, else the JSON value); ``None`` otherwise.
    """

    delegation_id: str
    agent_name: str
    agent_id: str
    run_id: str
    parent_agent_id: str
    parent_run_id: str | None
    tool_call_id: str | None
    task: str
    status: DelegationStatus
    stop_reason: StopReason | None
    usage: AgentUsage
    limits: UsageLimits | None
    admitted_at: float
    started_at: float | None
    completed_at: float | None
    error: str | None
    hook_error: str | None
    cleanup_error: str | None
    output: Any = None


class Delegation:
    """Mutable state of one delegation, owned by the task that runs it.

    Only the coordinator changes it; the resource modes record what they bound
    (``lease``, ``bindings``) and the builder sets ``child``.
    """

    __slots__ = (
        "admitted_at",
        "agent_id",
        "agent_name",
        "bindings",
        "brief",
        "cancel_reason",
        "child",
        "cleanup_error",
        "completed_at",
        "definition",
        "delegation_id",
        "error",
        "hook_errors",
        "lease",
        "lease_lost",
        "ledger",
        "ledger_held",
        "parent_agent_id",
        "parent_run_id",
        "reservation",
        "result",
        "run_id",
        "settled",
        "started_at",
        "status",
        "stop_reason",
        "task",
        "tool_call_id",
        "usage",
    )

    def __init__(
        self,
        definition: AgentDefinition | None,
        *,
        agent_name: str | None = None,
        delegation_id: str | None = None,
        parent_agent_id: str,
        parent_run_id: str | None,
        tool_call_id: str | None,
        brief: Brief,
    ) -> None:
        # None only for a delegation to an unknown agent, recorded as a setup failure.
        self.definition = definition
        self.agent_name = definition.name if definition is not None else (agent_name or "")
        self.delegation_id = delegation_id or new_id("delegation")
        self.agent_id = new_id("agent")
        self.run_id = new_id("run")
        self.parent_agent_id = parent_agent_id
        self.parent_run_id = parent_run_id
        self.tool_call_id = tool_call_id
        self.brief = brief
        self.task = brief.task
        self.status = DelegationStatus.QUEUED
        self.stop_reason: StopReason | None = None
        self.admitted_at = time.time()
        self.started_at: float | None = None
        self.completed_at: float | None = None
        self.usage = AgentUsage()
        self.error: str | None = None
        self.hook_errors: list[str] = []
        self.cleanup_error: str | None = None
        self.result: AgentResult | None = None
        self.child: Agent | None = None
        self.reservation: Reservation | None = None
        self.lease: Lease | None = None
        self.lease_lost = False
        # The lead's shared budget (its reservation is taken once, before the run).
        self.ledger: BudgetLedger | None = None
        self.ledger_held = False
        self.cancel_reason: str | None = None
        # What the resource modes bound (ResourceBinding), released in reverse order.
        self.bindings: list[Binding] | None = None
        self.settled = False

    def event_ids(self) -> dict[str, Any]:
        """The id fields of the subagent's events (its own ids and its lead's).

        Returns:
            Keyword arguments for an event class.
        """
        return {
            "agent_id": self.agent_id,
            "agent_name": self.agent_name,
            "run_id": self.run_id,
            "delegation_id": self.delegation_id,
            "parent_agent_id": self.parent_agent_id,
            "parent_run_id": self.parent_run_id,
        }

    def context(self, scope: Mapping[str, Any] | None, working_dir: str) -> DelegationContext:
        """The context handed to host callbacks for this delegation."""
        return DelegationContext(
            delegation_id=self.delegation_id,
            agent_id=self.agent_id,
            agent_name=self.agent_name,
            run_id=self.run_id,
            parent_agent_id=self.parent_agent_id,
            parent_run_id=self.parent_run_id,
            tool_call_id=self.tool_call_id,
            working_dir=working_dir,
            scope=dict(scope) if scope is not None else None,
            lease_token=self.lease.token if self.lease is not None else None,
        )

    def record(self) -> SubagentRecord:
        """An immutable snapshot of this delegation."""
        return SubagentRecord(
            delegation_id=self.delegation_id,
            agent_name=self.agent_name,
            agent_id=self.agent_id,
            run_id=self.run_id,
            parent_agent_id=self.parent_agent_id,
            parent_run_id=self.parent_run_id,
            tool_call_id=self.tool_call_id,
            task=self.task,
            status=self.status,
            stop_reason=self.stop_reason,
            usage=self.usage,
            limits=self.reservation.limits if self.reservation is not None else None,
            admitted_at=self.admitted_at,
            started_at=self.started_at,
            completed_at=self.completed_at,
            error=self.error,
            hook_error="\n".join(self.hook_errors) or None,
            cleanup_error=self.cleanup_error,
            output=self.output(),
        )

    def output(self) -> Any:
        """The decoded final answer, once a delegation with an output schema completed."""
        result = self.result
        if result is None or self.status != DelegationStatus.COMPLETED:
            return None
        return result.output

    def structured(self) -> bool:
        """Whether the outcome carries a decoded ``output`` instead of the answer text."""
        definition = self.definition
        return (
            definition is not None
            and definition.output_schema is not None
            and self.status == DelegationStatus.COMPLETED
            and self.result is not None
        )


def status_of(d: Delegation, failed: BaseException | None) -> tuple[DelegationStatus, StopReason]:
    """The settled status and stop reason of a finished delegation.

    A failure (other than cancellation) fails it; a cancellation before a result stops it
    ``interrupted``; a lost lease stops it ``lease_lost``; no result and no failure means
    it never started. Otherwise its run's stop reason decides (:func:`delegation_status`).
    """
    result = d.result
    if failed is not None and not isinstance(failed, anyio.get_cancelled_exc_class()):
        return DelegationStatus.FAILED, d.stop_reason or StopReason.ERROR
    if d.lease_lost and (result is None or result.stop_reason != StopReason.COMPLETE):
        return DelegationStatus.STOPPED, StopReason.LEASE_LOST
    if result is None:
        if failed is not None:
            return DelegationStatus.STOPPED, StopReason.INTERRUPTED
        return DelegationStatus.NOT_STARTED, d.stop_reason or StopReason.NOT_STARTED
    reason = result.stop_reason
    return delegation_status(reason), reason


def error_text(exc: BaseException) -> str:
    """An exception as the error text of a record or outcome."""
    if isinstance(exc, DeputyError | ToolRejection):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def build_outcome(d: Delegation) -> dict[str, Any]:
    """The compact outcome the lead's model sees (answer cut to 8 KiB of UTF-8).

    A completed delegation whose definition has an output schema carries ``output``
    (the decoded value as plain JSON data: a type's instance becomes its fields) in place
    of ``answer`` and ``answer_truncated``: the answer text is that value, so it is not
    sent twice.
    """
    outcome = _outcome(d, d.result)
    return _with_output(outcome, d.output()) if d.structured() else outcome


def record_outcome(
    record: SubagentRecord, result: AgentResult | None, *, structured: bool = False
) -> dict[str, Any]:
    """:func:`build_outcome` of a settled delegation, from its record and its result.

    ``structured``: its definition has an output schema (a completed one's outcome then
    carries ``output`` instead of the answer text, as :func:`build_outcome` says).
    """
    outcome = _outcome(record, result)
    if structured and record.status == DelegationStatus.COMPLETED and result is not None:
        return _with_output(outcome, record.output)
    return outcome


def _with_output(outcome: dict[str, Any], output: Any) -> dict[str, Any]:
    del outcome["answer"], outcome["answer_truncated"]
    outcome["output"] = msgspec.to_builtins(output)
    return outcome


def _outcome(d: Delegation | SubagentRecord, result: AgentResult | None) -> dict[str, Any]:
    answer = result.response if result is not None else ""
    raw = answer.encode()
    truncated = len(raw) > ANSWER_MAX_BYTES
    if truncated:
        answer = raw[:ANSWER_MAX_BYTES].decode(errors="ignore")
    return {
        "delegation_id": d.delegation_id,
        "agent_id": d.agent_id,
        "agent_name": d.agent_name,
        "run_id": d.run_id,
        "parent_agent_id": d.parent_agent_id,
        "parent_run_id": d.parent_run_id,
        "tool_call_id": d.tool_call_id,
        "status": d.status,
        "stop_reason": d.stop_reason,
        "task_success": "not_assessed",
        "answer": answer,
        "answer_truncated": truncated,
        "error": d.error,
    }


def outcome_json(d: Delegation) -> str:
    """:func:`build_outcome` as compact JSON text."""
    return _encode(build_outcome(d)).decode()
