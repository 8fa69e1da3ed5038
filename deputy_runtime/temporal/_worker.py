"""Building a Temporal worker that runs deputy's workflows and activities."""

from __future__ import annotations

from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from ._activities import DeputyActivities
from ._workflows import LeadWorkflow, SubagentWorkflow

__all__ = ["DEFAULT_TASK_QUEUE", "WORKFLOWS", "deputy_worker", "workflow_runner"]

DEFAULT_TASK_QUEUE = "deputy"
WORKFLOWS = (LeadWorkflow, SubagentWorkflow)

# Modules the workflow sandbox shares with the worker instead of re-importing them per
# run: deputy itself (its workflow code is deterministic; its I/O happens only in
# activities) and the libraries it imports.
_PASSTHROUGH = ("deputy_runtime", "msgspec", "anyio", "yaml", "re2", "httpx", "sniffio")


def workflow_runner() -> SandboxedWorkflowRunner:
    """The sandboxed runner deputy's workflows need (also for ``Replayer``)."""
    restrictions = SandboxRestrictions.default.with_passthrough_modules(*_PASSTHROUGH)
    return SandboxedWorkflowRunner(restrictions=restrictions)


def deputy_worker(
    client: Client,
    activities: DeputyActivities,
    *,
    task_queue: str = DEFAULT_TASK_QUEUE,
    **options: Any,
) -> Worker:
    """A worker for ``task_queue`` running the lead and subagent workflows and the
    activities of ``activities``. ``client`` must use :data:`data_converter`; ``options``
    go to ``temporalio.worker.Worker``."""
    return Worker(
        client,
        task_queue=task_queue,
        workflows=list(WORKFLOWS),
        activities=activities.activities(),
        workflow_runner=workflow_runner(),
        **options,
    )
