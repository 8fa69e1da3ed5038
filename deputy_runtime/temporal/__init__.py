"""Durable delegations on Temporal: a lead run is a workflow, each delegation a child
workflow any worker can pick up, each model request and tool call an activity.

Needs the ``temporal`` extra (``pip install '.[temporal]'`` from a checkout); Temporal's SDK
is asyncio-only, so from trio use :class:`TemporalBridge`. See ``docs/temporal.md``.
"""

from __future__ import annotations

from .._extras import install_hint
from ._bridge import TemporalBridge, run_in_asyncio_thread
from ._devserver import DevServer, TemporalUnavailableError, free_port, temporal_cli_path

try:
    import temporalio  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "deputy_runtime.temporal needs the Temporal SDK: " + install_hint("temporal")
    ) from exc

from ._activities import DeputyActivities
from ._batch import ParallelInput, ParallelOutput
from ._ceiling import child_permissions
from ._client import agent_spec, lead_input, permission_spec, start_lead
from ._converter import MsgspecPayloadConverter, data_converter
from ._follow import follow_run
from ._human_client import answer_question, pending_questions
from ._human_values import ANSWER_UPDATE, PENDING_QUESTIONS_QUERY, AskedQuestion, PendingQuestion
from ._limits import DelegationLimits, raise_on_exceed
from ._parallel import ParallelDelegateWorkflow
from ._parallel_client import parallel_delegate, parallel_result
from ._resource_records import OwnedResourceRecord
from ._resource_values import ExclusiveResourceSpec, OwnedResourceSpec
from ._resource_worker import OwnedResourceFactory, current_delegation
from ._values import (
    AgentSpec,
    LeadInput,
    LeadOutput,
    LoopCheckpoint,
    ModelCall,
    PermissionSpec,
    SubagentInput,
    SubagentOutput,
    ToolCall,
)
from ._worker import DEFAULT_TASK_QUEUE, deputy_worker, workflow_runner
from ._workflows import (
    EVENTS_QUERY,
    INTERRUPT_SIGNAL,
    LEAD_PERMISSIONS_SIGNAL,
    SET_PERMISSION_MODE_UPDATE,
    LeadWorkflow,
    SubagentWorkflow,
)

__all__ = [
    "ANSWER_UPDATE",
    "DEFAULT_TASK_QUEUE",
    "EVENTS_QUERY",
    "INTERRUPT_SIGNAL",
    "LEAD_PERMISSIONS_SIGNAL",
    "PENDING_QUESTIONS_QUERY",
    "SET_PERMISSION_MODE_UPDATE",
    "AgentSpec",
    "AskedQuestion",
    "DelegationLimits",
    "DeputyActivities",
    "DevServer",
    "ExclusiveResourceSpec",
    "LeadInput",
    "LeadOutput",
    "LeadWorkflow",
    "LoopCheckpoint",
    "ModelCall",
    "MsgspecPayloadConverter",
    "OwnedResourceFactory",
    "OwnedResourceRecord",
    "OwnedResourceSpec",
    "ParallelDelegateWorkflow",
    "ParallelInput",
    "ParallelOutput",
    "PendingQuestion",
    "PermissionSpec",
    "SubagentInput",
    "SubagentOutput",
    "SubagentWorkflow",
    "TemporalBridge",
    "TemporalUnavailableError",
    "ToolCall",
    "agent_spec",
    "answer_question",
    "child_permissions",
    "current_delegation",
    "data_converter",
    "deputy_worker",
    "follow_run",
    "free_port",
    "lead_input",
    "parallel_delegate",
    "parallel_result",
    "pending_questions",
    "permission_spec",
    "raise_on_exceed",
    "run_in_asyncio_thread",
    "start_lead",
    "temporal_cli_path",
    "workflow_runner",
]
