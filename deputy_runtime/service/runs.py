"""Runs: each ``POST /runs`` builds a fresh lead and drives it in the service's task group.

A run belongs to the token that started it; other tokens cannot see or interrupt it (it
is "not found" to them). Events go to the run's :class:`~.eventlog.EventLog` through
the runtime's synchronous event sink (``run(task, on_event=...)`` rather than
``run_stream``: the sink also receives the final events of a cancelled run). At most
``max_runs`` runs are active at once; a finished run is kept for ``GET`` until
``keep_runs`` newer ones have finished.

Shutdown (SIGTERM): new runs are refused, every active lead is interrupted (each stops at
its next boundary, with its delegations), runs still active after ``shutdown_grace``
seconds are cancelled, and :meth:`RunManager.shutdown` returns when every run has
settled, owned resources cleaned up (the runtime shields that cleanup).
"""

from __future__ import annotations

import enum
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
import msgspec

from ..errors import DeputyError
from ..runtime import AgentResult, Event, LeadAgent, encode_event
from .config import Resolved, ServiceConfig
from .eventlog import EventLog

__all__ = [
    "Run",
    "RunManager",
    "RunSetupError",
    "RunStatus",
    "RunSummary",
    "ServiceBusyError",
    "ServiceClosingError",
]


class RunStatus(enum.Enum):
    """Where a run is; every status but RUNNING is final."""

    RUNNING = "running"
    COMPLETED = "completed"  # the lead answered
    STOPPED = "stopped"  # a limit or a hook ended it early
    INTERRUPTED = "interrupted"  # POST .../interrupt, or the server shutting down
    FAILED = "failed"  # provider or runtime error


class ServiceBusyError(DeputyError):
    """``max_runs`` runs are active: try again later (HTTP 429)."""


class ServiceClosingError(DeputyError):
    """The server is shutting down and starts no new run (HTTP 503)."""


class RunSetupError(DeputyError):
    """The lead for a run could not be built (HTTP 500); nothing was started."""


def status_of(result: AgentResult | None) -> RunStatus:
    """The final status a lead's result means."""
    if result is None:
        return RunStatus.FAILED
    reason = result.stop_reason
    if reason == "complete":
        return RunStatus.COMPLETED
    if reason in ("error", "provider_error"):
        return RunStatus.FAILED
    return RunStatus.INTERRUPTED if reason == "interrupted" else RunStatus.STOPPED


class ResultView(msgspec.Struct, frozen=True):
    """What ``GET /runs/{id}`` shows of the lead's result (not the conversation)."""

    response: str
    stop_reason: str
    error: str | None
    usage: Any
    limits: Any


class RunSummary(msgspec.Struct, frozen=True):
    """One entry of ``GET /runs``: enough to list a run and link to it."""

    id: str
    status: str
    task: str
    model: str
    provider: str
    created_at: float
    finished_at: float | None


class RunView(msgspec.Struct, frozen=True):
    """The body of ``GET /runs/{id}``."""

    id: str
    status: str
    task: str
    model: str
    provider: str
    agents: tuple[str, ...]
    permission_mode: str
    limits: Any
    created_at: float
    finished_at: float | None
    events: int
    result: ResultView | None
    error: str | None
    records: list[Any]


class Run:
    """One lead run and its event log."""

    __slots__ = (
        "agents",
        "created_at",
        "done",
        "error",
        "finished_at",
        "id",
        "interrupt_reason",
        "lead",
        "limits",
        "log",
        "model",
        "owner",
        "permission_mode",
        "provider",
        "scope",
        "status",
        "task",
    )

    def __init__(self, owner: int, resolved: Resolved, lead: LeadAgent, log: EventLog) -> None:
        self.id = f"run_{secrets.token_hex(12)}"
        self.owner = owner
        self.task = resolved.task
        self.agents = resolved.agents
        self.permission_mode = resolved.permission_mode
        self.limits = resolved.limits
        self.lead = lead
        provider = lead.chat.provider
        self.model = provider.model
        self.provider = provider.name
        self.log = log
        self.created_at = time.time()
        self.finished_at: float | None = None
        self.status = RunStatus.RUNNING
        self.error: str | None = None
        self.interrupt_reason: str | None = None
        self.scope = anyio.CancelScope()
        self.done = anyio.Event()

    def interrupt(self, reason: str = "interrupted") -> None:
        """Stop the lead and its delegations at their next boundary.

        The lead ignores an interrupt until its run is active, and a run started a moment
        ago may not be yet; the request is kept and repeated from the event sink, which
        the runtime first calls once the run is active (before its first model request).
        """
        self.interrupt_reason = self.interrupt_reason or reason
        self.lead.interrupt(self.interrupt_reason)

    def on_event(self, event: Event) -> None:
        """The runtime's event sink: number and keep the event."""
        if self.interrupt_reason is not None:
            self.lead.interrupt(self.interrupt_reason)
        self.log.append(encode_event(event))

    def summary(self) -> RunSummary:
        """The run's entry in ``GET /runs`` (the task cut to its first 200 characters)."""
        return RunSummary(
            self.id,
            self.status.value,
            self.task[:200],
            self.model,
            self.provider,
            self.created_at,
            self.finished_at,
        )

    def view(self) -> RunView:
        """A snapshot for ``GET /runs/{id}``."""
        result = self.lead.last_result if self.status is not RunStatus.RUNNING else None
        return RunView(
            id=self.id,
            status=self.status.value,
            task=self.task,
            model=self.model,
            provider=self.provider,
            agents=self.agents,
            permission_mode=self.permission_mode,
            limits=self.limits,
            created_at=self.created_at,
            finished_at=self.finished_at,
            events=self.log.last_seq,
            result=None
            if result is None
            else ResultView(
                result.response, result.stop_reason, result.error, result.usage, result.limits
            ),
            error=self.error,
            records=list(self.lead.list_subagents()),
        )


class RunManager:
    """Every client's runs, the concurrency bound and shutdown.

    ``agents`` are the names of the loaded definitions; ``make_lead`` builds a fresh lead
    over the resolved request's agents, mode and limits (the command supplies it, so
    model selection and plugins work exactly as for ``deputy-runtime run``).
    """

    def __init__(
        self,
        config: ServiceConfig,
        *,
        agents: tuple[str, ...],
        make_lead: Callable[[Resolved], LeadAgent],
        task_group: anyio.abc.TaskGroup,
    ) -> None:
        self.config = config
        self.agents = agents
        self._make_lead = make_lead
        self._task_group = task_group
        self._runs: dict[str, Run] = {}
        self._finished: OrderedDict[str, None] = OrderedDict()
        self.active: dict[str, Run] = {}
        self.closing = False

    def start(self, owner: int, resolved: Resolved) -> Run:
        """Build a lead for ``resolved`` and start it; synchronous, so the bound is exact."""
        if self.closing:
            raise ServiceClosingError("the server is shutting down")
        if len(self.active) >= self.config.max_runs:
            raise ServiceBusyError(
                f"{len(self.active)} runs are active, the server's limit (--max-runs)"
            )
        try:
            lead = self._make_lead(resolved)
        except Exception as exc:  # the host's factory: reported, never half-started
            raise RunSetupError(f"could not build the lead: {type(exc).__name__}: {exc}") from exc
        run = Run(owner, resolved, lead, EventLog(self.config.event_log_size))
        self._runs[run.id] = run
        self.active[run.id] = run
        self._task_group.start_soon(self._drive, run, name=f"deputy-runtime serve {run.id}")
        return run

    def get(self, owner: int, run_id: str) -> Run | None:
        """The run with that id if ``owner`` started it."""
        run = self._runs.get(run_id)
        return run if run is not None and run.owner == owner else None

    def runs_of(self, owner: int) -> list[Run]:
        """``owner``'s runs still kept (active and finished), newest first."""
        return [run for run in reversed(self._runs.values()) if run.owner == owner]

    async def _drive(self, run: Run) -> None:
        try:
            # The open lead hosts its attached MCP servers for this run only.
            async with run.lead:
                with run.scope:
                    await run.lead.run(run.task, on_event=run.on_event)
        except Exception as exc:  # the run's own failure: reported on the run, not raised
            run.error = f"{type(exc).__name__}: {exc}"
        finally:
            run.status = status_of(run.lead.last_result)
            if run.error is not None:
                run.status = RunStatus.FAILED
            run.finished_at = time.time()
            run.log.close()
            del self.active[run.id]
            self._finished[run.id] = None
            while len(self._finished) > self.config.keep_runs:
                forgotten, _ = self._finished.popitem(last=False)
                self._runs.pop(forgotten, None)
            run.done.set()

    async def shutdown(self) -> None:
        """Refuse new runs, interrupt the active ones, cancel stragglers, wait for all."""
        self.closing = True
        for run in tuple(self.active.values()):
            run.interrupt("shutdown")
        with anyio.move_on_after(self.config.shutdown_grace):
            await self._wait_all()
        for run in tuple(self.active.values()):
            run.scope.cancel()
        await self._wait_all()

    async def _wait_all(self) -> None:
        while self.active:
            await next(iter(self.active.values())).done.wait()
