"""One delegation's state in workflow code, shared by the lead's delegations and the
batch's responders: its ids, status and timings until it is settled, and the record,
hook fields and outcome built from them (the outcome by the runtime's own rule)."""

from __future__ import annotations

from typing import Any

import msgspec
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ..runtime import (
        AgentResult,
        AgentUsage,
        DelegationStatus,
        StopReason,
        SubagentRecord,
        UsageLimits,
        record_outcome,
    )

from ._loop import Ids, new_id

__all__ = ["DelegationState", "child_ids"]


def child_ids(parent: Ids, agent_name: str) -> Ids:
    """Fresh ids for a delegation to ``agent_name`` made by the agent ``parent``."""
    return Ids(
        agent_id=new_id("agent"),
        agent_name=agent_name,
        run_id=new_id("run"),
        delegation_id=new_id("delegation"),
        parent_agent_id=parent.agent_id,
        parent_run_id=parent.run_id,
    )


class DelegationState:
    """Workflow-side state of one delegation until it is settled.

    ``tool_call_id`` is the lead's ``delegate_to_agent`` call (``None`` for a batch
    responder); ``limits`` are those granted when it was reserved.
    """

    def __init__(
        self,
        *,
        ids: Ids,
        task: str,
        admitted_at: float,
        tool_call_id: str | None = None,
        structured: bool = False,
    ) -> None:
        self.ids = ids
        self.structured = structured  # its definition has an output schema
        self.tool_call_id = tool_call_id
        self.task = task
        self.status = DelegationStatus.QUEUED
        self.stop_reason: StopReason | None = None
        self.usage = AgentUsage()
        self.limits: UsageLimits | None = None
        self.admitted_at = admitted_at
        self.started_at: float | None = None
        self.completed_at: float | None = None
        self.error: str | None = None
        self.result: AgentResult | None = None
        self.cleanup_error: str | None = None
        self.hook_errors: list[str] = []

    def record(self) -> SubagentRecord:
        """The delegation as the public record type."""
        ids = self.ids
        return SubagentRecord(
            delegation_id=ids.delegation_id or "",
            agent_name=ids.agent_name or "",
            agent_id=ids.agent_id,
            run_id=ids.run_id,
            parent_agent_id=ids.parent_agent_id or "",
            parent_run_id=ids.parent_run_id,
            tool_call_id=self.tool_call_id,
            task=self.task,
            status=self.status,
            stop_reason=self.stop_reason,
            usage=self.usage,
            limits=self.limits,
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

    def hook_fields(self) -> dict[str, Any]:
        """The delegation's fields of a SubagentStart or SubagentStop hook input."""
        ids = self.ids
        return {
            "tool_call_id": self.tool_call_id,
            "task": self.task,
            "delegation_id": ids.delegation_id,
            "child_agent_id": ids.agent_id,
            "child_agent_name": ids.agent_name,
            "child_run_id": ids.run_id,
        }

    def outcome(self) -> str:
        """The compact outcome the lead's model sees, as JSON text."""
        outcome = record_outcome(self.record(), self.result, structured=self.structured)
        return msgspec.json.encode(outcome).decode()
