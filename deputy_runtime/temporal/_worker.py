"""Building a Temporal worker that runs deputy_runtime's workflows and activities."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from ._activities import HEARTBEAT_SECONDS, DeputyActivities
from ._parallel import ParallelDelegateWorkflow
from ._resource_worker import paired_worker
from ._trace import tracing_interceptors
from ._workflows import LeadWorkflow, SubagentWorkflow

__all__ = ["DEFAULT_TASK_QUEUE", "WORKFLOWS", "deputy_worker", "workflow_runner"]

#: The task queue workers serve and runs start on unless told otherwise.
DEFAULT_TASK_QUEUE = "deputy"
WORKFLOWS = (LeadWorkflow, SubagentWorkflow, ParallelDelegateWorkflow)

# Modules the workflow sandbox shares with the worker instead of re-importing them for
# every workflow run: the libraries deputy_runtime uses, and its own modules except those
# that hold workflow code (``_workflows``, ``_loop``, ``_parallel``, ``_cancel``,
# ``_checkpoint``, ``_agent_flow``, ``_deadline``, ``_hookflow``, ``_human``,
# ``_resource_flow``, ``_delegation``) and the packages above them. Those are imported
# inside the sandbox, so a clock, random or I/O call in workflow code fails the workflow
# task instead of silently breaking replay. ``_slots`` is workflow code too but is
# shared: it holds no module state and calls nothing but ``workflow.wait_condition``.
_PASSTHROUGH = (
    "msgspec",
    "anyio",
    "yaml",
    "re2",
    "httpx",
    "sniffio",
    "opentelemetry",
    "deputy_runtime._tracing",
    "deputy_runtime._ids",
    "deputy_runtime.chat",
    "deputy_runtime.definitions",
    "deputy_runtime.errors",
    "deputy_runtime.runtime",
    "deputy_runtime.skills",
    "deputy_runtime.tools",
    "deputy_runtime.temporal._activities",
    "deputy_runtime.temporal._agent_extras",
    "deputy_runtime.temporal._batch",
    "deputy_runtime.temporal._bridge",
    "deputy_runtime.temporal._ceiling",
    "deputy_runtime.temporal._client",
    "deputy_runtime.temporal._converter",
    "deputy_runtime.temporal._devserver",
    "deputy_runtime.temporal._gate_report",
    "deputy_runtime.temporal._idempotency",
    "deputy_runtime.temporal._limits",
    "deputy_runtime.temporal._resource_records",
    "deputy_runtime.temporal._resource_values",
    "deputy_runtime.temporal._resource_worker",
    "deputy_runtime.temporal._slots",
    "deputy_runtime.temporal._hooks",
    "deputy_runtime.temporal._tool_gate",
    "deputy_runtime.temporal._trace",
    "deputy_runtime.temporal._values",
    "deputy_runtime.temporal._worker",
)


def workflow_runner() -> SandboxedWorkflowRunner:
    """The sandboxed runner deputy_runtime's workflows need.

    Returns:
        A runner for a ``Worker`` or a ``Replayer`` of the lead and subagent workflows.
    """
    restrictions = SandboxRestrictions.default.with_passthrough_modules(*_PASSTHROUGH)
    return SandboxedWorkflowRunner(restrictions=restrictions)


def deputy_worker(
    client: Client,
    activities: DeputyActivities,
    *,
    task_queue: str = DEFAULT_TASK_QUEUE,
    **options: Any,
) -> Worker:
    """A worker running the lead and subagent workflows and their activities.

    Args:
        client: A client built with :data:`data_converter`.
        activities: The tool registry and providers the activities use.
        task_queue: The task queue to serve.
        **options: More keyword arguments for ``temporalio.worker.Worker``.

    Returns:
        The worker (``async with worker:`` runs it).

    With tracing configured (``deputy_runtime.tracing.configure``) when the worker is
    built, it runs Temporal's OpenTelemetry ``TracingInterceptor`` (unless ``client`` or
    ``options["interceptors"]`` already hold one), so its activities' spans continue the
    trace of the process that started the run.

    A worker with owned-resource factories (``DeputyActivities(owned_resources=...)``)
    also serves a task queue of its own, ``<task_queue>/worker-<hex>``, where the tool
    calls and cleanups of the resources it made are sent; the returned worker runs and
    stops both.
    """
    interceptors = list(options.pop("interceptors", ()))
    # Every heartbeat reaches the server (Temporal's default sends one per 80% of the
    # 20 s heartbeat timeout), so a cancelled activity, e.g. one cut off by a time
    # limit, learns it within HEARTBEAT_SECONDS instead of 16 s.
    options.setdefault("max_heartbeat_throttle_interval", timedelta(seconds=HEARTBEAT_SECONDS))
    interceptors += tracing_interceptors([*client.config()["interceptors"], *interceptors])
    return paired_worker(
        client,
        activities.resources,
        activities.own_queue_activities(),
        task_queue=task_queue,
        workflows=list(WORKFLOWS),
        activities=activities.activities(),
        workflow_runner=workflow_runner(),
        interceptors=interceptors,
        **options,
    )
