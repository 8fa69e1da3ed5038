"""``deputy-runtime run --temporal ADDRESS``: a durable lead run on Temporal, followed live.

The run is started on the server as a lead workflow (``deputy_runtime.temporal``) and
executed by whichever ``deputy-runtime worker`` processes serve ``--task-queue``; this
command only starts it and follows its events (``follow_run``: the lead's ``events``
query and each running delegation's, polled), drawn as ``run`` draws an in-process run,
delegations as they run. ``deputy-runtime attach --temporal ADDRESS WORKFLOW_ID``
follows a run started earlier the same way.
The definitions under ``--agents`` are read here and travel in the run's input (their
tools by name, resolved on the workers); the model is chosen as ``run`` chooses it, but
it is the workers that need the provider's key.

Ctrl-C (or SIGTERM) sends the run the ``interrupt`` signal and keeps following it until
it stops (the lead and every running delegation stop at their next boundary); a second
Ctrl-C stops following and leaves the run to finish on the server. A run cancelled on the
server (``handle.cancel()``) ends the command with status 130. Plugins, model
aliases and definitions are read as ``run`` reads them (a plugin's ``tools`` only name
tools here; the workers must have them). A plugin's ``delegation_policy`` travels in
the run's input as far as it can cross the durable boundary (resource modes as specs,
``max_seconds``, ``max_delegations``); a setting that cannot (a resource factory, an
in-process lease backend, a ``human_input`` or ``chat`` callable) is refused, as are the
options that belong to the workers or to an in-process run (``--redis``,
``--shared-budget``, ``--mcp-config``, ``--mcp-mode``, ``--test-fanout``, ``--backend
trio``), each by name.

``run`` reads the command line for both (:mod:`.hostsetup`) and shows and ends both the
same way (:mod:`.runshow`); only starting and following the workflow is here. The exit
status is ``run``'s; 1 also when the server cannot be reached, 2 also when the
``temporal`` extra is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import uuid
from collections.abc import Mapping
from typing import Any

from .._extras import install_hint
from ..errors import DeputyError
from ..runtime import Permissions, StopReason, UsageLimits
from .hostsetup import HostSetup, ModelChoice
from .leadsetup import LEAD_PROMPT, LEAD_TOOLS, UsageError, check_model_name
from .otlp import start_otlp
from .questions import QuestionDesk
from .runshow import Exit, View, exit_status, open_view, print_summary
from .view import RunState, definition_colours

__all__ = [
    "attach",
    "check_durable_options",
    "lead_request",
    "no_worker_answered",
    "run_durable",
]

#: Seconds between two polls of the run's event log.
POLL_SECONDS = 0.25
#: Seconds ``run`` waits for a worker to poll the task queue before it declines to start
#: the run (a worker started a moment before the command may not be listed yet).
WORKER_GRACE_SECONDS = 5.0


def check_durable_options(args: argparse.Namespace) -> None:
    """Refuse, by name, the ``run`` options that do not cross to a durable run.

    Raises:
        UsageError: One of them is given.
    """
    for option, given, why in (
        ("--redis", getattr(args, "redis", None) is not None,
         "a durable run keeps its budget and records in Temporal; drop one"),
        ("--shared-budget", getattr(args, "shared_budget", None) is not None,
         "a durable run keeps its budget in Temporal"),
        ("--test-fanout", getattr(args, "test_fanout", None) is not None,
         "the workers choose the model"),
        ("--mcp-config", getattr(args, "mcp_config", None) is not None,
         "MCP servers run on the workers: give it to deputy-runtime worker"),
        ("--mcp-mode", bool(getattr(args, "mcp_mode", None)),
         "MCP servers run on the workers: give it to deputy-runtime worker"),
    ):  # fmt: skip
        if given:
            raise UsageError(f"{option} and --temporal do not combine: {why}")
    if getattr(args, "backend", "asyncio") != "asyncio":
        raise UsageError(
            "--backend trio is not supported with --temporal (Temporal's SDK is asyncio-only)"
        )


def run_durable(args: argparse.Namespace, task: str, setup: HostSetup, choice: ModelChoice) -> int:
    """Start the run on Temporal and follow it; returns the exit status."""
    try:
        request = lead_request(args, task, setup, choice)
        otlp = getattr(args, "otlp", None)
        stop_tracing = start_otlp(otlp) if otlp is not None else None
    except UsageError as exc:
        print(f"deputy-runtime run: {exc}", file=sys.stderr)
        return Exit.USAGE
    colours = definition_colours(setup.loaded.definitions.values())
    workflow_id = f"deputy-run-{uuid.uuid4().hex}"
    # The Model: and Temporal: lines come only once the run is started: a server that
    # cannot be reached is one error line, not a workflow that never existed.
    started = (
        f"{choice.announcement}\n"
        f"Temporal: {args.temporal}, task queue {args.task_queue!r}, workflow {workflow_id}"
    )
    try:
        status = asyncio.run(_follow(args, request, workflow_id, started, colours))
    except KeyboardInterrupt:
        status = Exit.INTERRUPTED
    finally:
        if stop_tracing is not None:
            stop_tracing()  # flushes the spans still batched
    # Temporal's native client keeps threads of its own that can abort the interpreter's
    # finalisation; leave without it, once everything printed is flushed.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def lead_request(args: argparse.Namespace, task: str, setup: HostSetup, choice: ModelChoice) -> Any:
    try:
        from ..temporal import lead_input
    except ImportError as exc:
        raise UsageError(f"{exc} ({install_hint('temporal')})") from exc
    # The workers build the provider (and need its API key); a model no provider has is
    # refused here, as the in-process run refuses it.
    check_model_name(choice.spec, explicit=choice.explicit)
    try:
        request = lead_input(
            task,
            setup.loaded.definitions,
            model=choice.spec,
            tools=LEAD_TOOLS,
            system_prompt=LEAD_PROMPT,
            usage_limits=UsageLimits(max_requests=args.max_requests),
            permissions=Permissions(mode=args.permission_mode),
            model_aliases=choice.aliases,
            human_input=True,  # questions are answered here or with deputy-runtime answer
            delegation_policy=setup.plugins.policy,
        )
    except (DeputyError, ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from exc
    setup.print_warnings()
    return request


async def _follow(
    args: argparse.Namespace,
    request: Any,
    workflow_id: str,
    started: str,
    colours: Mapping[str, str],
) -> int:
    from temporalio.client import Client

    from ..temporal import data_converter, start_lead

    try:
        client = await Client.connect(args.temporal, data_converter=data_converter)
        polling = await _wait_for_worker(client, args.task_queue)
        if polling:
            await start_lead(client, request, workflow_id=workflow_id, task_queue=args.task_queue)
    except Exception as exc:
        print(f"deputy-runtime run: cannot start the run on Temporal at {args.temporal}: {exc}",
              file=sys.stderr)  # fmt: skip
        return Exit.FAILED
    if not polling:
        # Started, the run would wait on the server for a worker nobody is following it
        # for; not starting it leaves nothing behind to clean up.
        print(f"deputy-runtime run: {_no_worker_hint(args)}; the run was not started",
              file=sys.stderr)  # fmt: skip
        return Exit.FAILED
    print(started, file=sys.stderr if args.json else sys.stdout, flush=True)
    return await _watch(args, client, workflow_id, colours)


async def _wait_for_worker(client: Any, task_queue: str) -> bool:
    """Whether a worker polls ``task_queue`` for workflow tasks, waiting up to
    :data:`WORKER_GRACE_SECONDS` for one to show up."""
    from temporalio.api.enums.v1 import TaskQueueKind, TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    request = DescribeTaskQueueRequest(
        namespace=client.namespace,
        task_queue=TaskQueue(name=task_queue, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WORKER_GRACE_SECONDS
    while True:
        response = await client.workflow_service.describe_task_queue(request)
        if response.pollers:
            return True
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(POLL_SECONDS)


def _no_worker_hint(args: argparse.Namespace) -> str:
    if not hasattr(args, "task_queue"):
        return "no worker answered for it; is a deputy-runtime worker running?"
    return (
        f"no worker answered on task queue {args.task_queue!r}; start one with: "
        f"deputy-runtime worker --temporal {args.temporal} --task-queue "
        f"{args.task_queue} --agents DIR"
    )


def no_worker_answered(exc: BaseException) -> bool:
    """A query that no worker took up in time: the server's deadline, or the client's."""
    from temporalio.service import RPCError, RPCStatusCode

    text = str(exc)
    if "Timeout expired" in text or "timed out before a worker" in text:
        return True
    return isinstance(exc, RPCError) and exc.status == RPCStatusCode.DEADLINE_EXCEEDED


def attach(args: argparse.Namespace) -> int:
    """``deputy-runtime attach``: follow a durable run started earlier; the exit status."""
    try:
        import temporalio  # noqa: F401
    except ImportError:
        print(
            f"deputy-runtime attach: needs the temporal extra ({install_hint('temporal')})",
            file=sys.stderr,
        )
        return Exit.USAGE
    notes = sys.stderr if args.json else sys.stdout
    print(f"Temporal: {args.temporal}, workflow {args.workflow_id}", file=notes, flush=True)
    try:
        status = asyncio.run(_attach(args))
    except KeyboardInterrupt:
        status = Exit.INTERRUPTED
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # as run_temporal: Temporal's native client threads stay behind


async def _attach(args: argparse.Namespace) -> int:
    from temporalio.client import Client

    from ..temporal import data_converter

    try:
        client = await Client.connect(args.temporal, data_converter=data_converter)
        await client.get_workflow_handle(args.workflow_id).describe()
    except Exception as exc:
        print(f"deputy-runtime attach: cannot reach workflow {args.workflow_id} on Temporal at "
              f"{args.temporal}: {exc}", file=sys.stderr)  # fmt: skip
        return Exit.FAILED
    return await _watch(args, client, args.workflow_id)


async def _watch(
    args: argparse.Namespace,
    client: Any,
    workflow_id: str,
    colours: Mapping[str, str] | None = None,
) -> int:
    """Draw the run's events as they happen (its delegations' live) until it ends, or
    until a second Ctrl-C; the first sends the run the ``interrupt`` signal."""
    from temporalio.client import WorkflowFailureError
    from temporalio.exceptions import CancelledError

    from ..temporal import INTERRUPT_SIGNAL, LeadOutput, LeadWorkflow, follow_run

    handle = client.get_workflow_handle_for(LeadWorkflow.run, workflow_id)
    prog = "deputy-runtime attach" if getattr(args, "workflow_id", None) else "deputy-runtime run"
    state = RunState(colours=colours)
    view: View = open_view(bool(args.json), state)
    stops = 0
    loop = asyncio.get_running_loop()
    background: set[asyncio.Task[None]] = set()

    interactive = not args.json and sys.stdin.isatty() and sys.stdout.isatty()
    desk = QuestionDesk(
        client, args.temporal, workflow_id, interactive=interactive, view=view, prog=prog
    )

    async def draw() -> None:
        async for event in follow_run(client, workflow_id, poll_interval=POLL_SECONDS):
            view.handle(event)
            desk.handle(event)

    following = loop.create_task(draw())

    def on_stop() -> None:
        nonlocal stops
        stops += 1
        if stops == 1:
            task = loop.create_task(handle.signal(INTERRUPT_SIGNAL, "interrupted"))
            background.add(task)
            task.add_done_callback(background.discard)
        else:
            following.cancel()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_stop)
    try:
        await following
    except asyncio.CancelledError:
        view.close()
        print(
            f"{prog}: stopped following; workflow {workflow_id} goes on on the "
            f"server (follow it again: deputy-runtime attach --temporal {args.temporal} "
            f"{workflow_id})",
            file=sys.stderr,
        )
        return Exit.INTERRUPTED
    except WorkflowFailureError as exc:
        view.close()
        if isinstance(exc.cause, CancelledError):
            print(f"{prog}: workflow {workflow_id} was cancelled", file=sys.stderr)
            return Exit.INTERRUPTED
        cause = exc.cause
        detail = f"{exc}: {cause}" if cause is not None else str(exc)
        print(f"{prog}: the run failed: {detail}", file=sys.stderr)
        return Exit.FAILED
    except Exception as exc:
        view.close()
        if not no_worker_answered(exc):
            print(f"{prog}: following {workflow_id} failed: {exc}", file=sys.stderr)
            return Exit.FAILED
        # The run's log is read by a query, which only a worker answers: none is polling
        # any more (the workers listed when the run started have gone).
        hint = _no_worker_hint(args)
        ending = ""
        if prog == "deputy-runtime run":
            # This command started the run and is giving up on it: end it, rather than
            # leave a workflow that a worker would start later with nobody following.
            try:
                await handle.terminate(reason="deputy-runtime run: no worker answered")
                ending = "; the workflow was terminated"
            except Exception as terminate_error:
                ending = f"; terminating the workflow failed: {terminate_error}"
        print(f"{prog}: following {workflow_id} timed out: {hint}{ending}", file=sys.stderr)
        return Exit.FAILED
    finally:
        desk.close()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
    view.close()
    out: LeadOutput = await handle.result()
    interrupted = stops > 0 or out.result.stop_reason == StopReason.INTERRUPTED
    if not args.json:
        print_summary(out.subagents, out.result, interrupted)
    elif interrupted:
        print(f"{prog}: interrupted", file=sys.stderr)
    return exit_status(out.result, out.subagents, interrupted, prog)
