"""``deputy-runtime run``: a lead agent over the discovered definitions, shown live.

Model selection: ``--model`` if given; else a configured provider when its API key is in
the environment (OpenAI first, then Anthropic); else the offline ``test`` provider. The
choice is always the first line of output (stderr with ``--json``), after only the
definition warnings on stderr, so nobody mistakes the deterministic test model for a real
one.

The lead gets the read-only file tools; the full set of file tools, scoped to the
current directory, plus the ``tools`` of every ``--plugin``, is the registry definitions
name their tools from, and the plugins' ``skills`` are their skills: the names
``validate`` resolves against, so a file that passes ``validate`` loads here. Warnings
about definition files (a file accepted with caveats) are printed on stderr, one
``file:line: warning: message`` line each, just before the model line. Ctrl-C interrupts
the lead and every running delegation at their next boundary, and cancels whatever is
still running a moment later; owned resources are cleaned up either way, the summary
shows what finished, and the exit status is 130.

Nothing is announced until the arguments, plugins, model and definitions are known to be
good, so a mistake is the only thing printed. When the reader of stdout goes away
(``| head``), the run is interrupted at its next boundary, as for Ctrl-C, so no further
model requests are spent on output nobody reads.

With ``--temporal ADDRESS`` the same command runs the lead durably
(:mod:`.run_temporal`): the set-up above is the same code (:mod:`.hostsetup`), and the
view, the summary and the exit status are too (:mod:`.runshow`), so both print the same
things for the same outcome.

Exit status: 0 the lead completed; 1 it failed (provider or runtime error); 2 bad
arguments, definitions or plugin; 3 it stopped early (a limit or a hook); 4 it completed
but delegated and no delegation completed; 130 Ctrl-C; 141 the reader of stdout went
away.
"""

from __future__ import annotations

import argparse
import contextlib
import enum
import signal
import sys
from collections.abc import Awaitable, Callable

import anyio

from ..runtime import AgentResult, Event, LeadAgent
from ..tools import BashTools
from .ask import TerminalAsker
from .hostsetup import (
    CheckpointSetup,
    HostSetup,
    ModelChoice,
    checkpoint_setup,
    host_setup,
    model_choice,
    task_text,
)
from .leadsetup import (
    DEFAULT_MODELS,
    OFFLINE_MODEL,
    RedisSetup,
    UsageError,
    attach_mcp_servers,
    build_lead,
    check_backend,
    fanout_note,
    make_chat,
    redis_setup,
    select_model,
    with_lease_backend,
)
from .otlp import start_otlp
from .runshow import Exit, View, exit_status, open_view, print_summary
from .view import LiveView, RunState, definition_colours

__all__ = ["DEFAULT_MODELS", "OFFLINE_MODEL", "run", "select_model"]

INTERRUPT_GRACE_SECONDS = 1.0
_TICK_SECONDS = 0.25


def run(args: argparse.Namespace) -> int:
    """Run the task, in-process or (``--temporal``) durably; returns the exit status."""
    try:
        return _run(args)
    except UsageError as exc:
        print(f"deputy-runtime run: {exc}", file=sys.stderr)
        return Exit.USAGE
    except KeyboardInterrupt:
        # Ctrl-C before the signal handler was installed (or after it was removed).
        print("deputy-runtime run: interrupted", file=sys.stderr)
        return Exit.INTERRUPTED


def _run(args: argparse.Namespace) -> int:
    task = task_text(args)
    durable = getattr(args, "temporal", None) is not None
    if durable:
        from .run_temporal import check_durable_options, run_durable

        check_durable_options(args)
    else:
        check_backend(getattr(args, "backend", None) or "asyncio")
    saving = checkpoint_setup(args)
    setup = host_setup(args)
    choice = model_choice(args, setup.plugins)
    if durable:
        return run_durable(args, task, setup, choice)
    return _run_here(args, task, setup, choice, saving)


def _run_here(
    args: argparse.Namespace,
    task: str,
    setup: HostSetup,
    choice: ModelChoice,
    saving: CheckpointSetup | None = None,
) -> int:
    backend = getattr(args, "backend", None) or "asyncio"
    plugins, loaded = setup.plugins, setup.loaded
    fanout = getattr(args, "test_fanout", None)
    lead_chat = make_chat(choice.spec, explicit=choice.explicit, fanout=fanout)
    redis = redis_setup(
        getattr(args, "redis", None),
        getattr(args, "shared_budget", None),
        getattr(args, "redis_namespace", None),
    )
    policy = plugins.policy if redis is None else with_lease_backend(plugins.policy, redis.leases)
    servers, mcp_modes = setup.mcp_servers(args)
    leases = None if redis is None else redis.leases
    policy = attach_mcp_servers(policy, servers, mcp_modes, lease_backend=leases)
    as_json = bool(args.json)
    # A delegation's ask_user (AskUserQuestion) is asked here on a terminal, else refused.
    asker = TerminalAsker(interactive=sys.stdin.isatty() and sys.stdout.isatty() and not as_json)
    lead = build_lead(
        lead_chat,
        loaded.definitions,
        plugins.tools,
        working_dir=setup.cwd,
        permission_mode=args.permission_mode,
        max_requests=args.max_requests,
        policy=policy,
        aliases=choice.aliases,
        shared_budget=redis.budget if redis is not None else None,
        hooks=setup.hooks,
        human_input=asker,
    )
    notes = sys.stderr if as_json else sys.stdout
    setup.print_warnings()
    left_out = fanout_note(lead_chat, lead.available_sub_agents())

    def announce() -> None:
        # Only once nothing can refuse the run any more (the OTLP URL, the Redis
        # connection): an exit-2 error is then one line with no Model: line before it.
        print(choice.announcement, file=notes, flush=True)
        if left_out:
            print(left_out, file=notes, flush=True)
        if saving is not None:
            print(saving.announcement(), file=notes, flush=True)

    otlp = getattr(args, "otlp", None)
    stop_tracing = start_otlp(otlp) if otlp is not None else None
    state = RunState(colours=definition_colours(loaded.definitions.values()))
    view = open_view(as_json, state)
    asker.view = view  # a question pauses the live tree
    try:
        outcome = anyio.run(
            _drive_with,
            redis,
            plugins.shell,
            lead,
            _starter(lead, task, saving),
            view,
            announce,
            backend=backend,
        )
    finally:
        view.close()
        if stop_tracing is not None:
            stop_tracing()
    if outcome is _Ending.READER_GONE:
        return Exit.READER_GONE
    interrupted = outcome is _Ending.INTERRUPTED
    result = lead.last_result
    records = lead.list_subagents()
    if not as_json:
        print_summary(records, result, interrupted)
    elif interrupted:
        print("deputy-runtime run: interrupted", file=sys.stderr)
    return exit_status(result, records, interrupted)


async def _drive_with(
    redis: RedisSetup | None,
    shell: BashTools | None,
    lead: LeadAgent,
    start: _Start,
    view: View,
    announce: Callable[[], None],
) -> _Ending:
    """:func:`_drive` with the ``--redis`` connection and the shell tools' owner open
    around it (background commands are killed when the run ends), announced once the
    connection is open."""
    async with contextlib.AsyncExitStack() as stack:
        if shell is not None:
            await stack.enter_async_context(shell)
        if redis is not None:
            await stack.enter_async_context(redis.opened())
        announce()
        return await _drive(lead, start, view)
    raise AssertionError("unreachable")  # pragma: no cover - the stack never swallows


class _Ending(enum.Enum):
    """How :func:`_drive` ended the run."""

    FINISHED = "finished"
    INTERRUPTED = "interrupted"  # Ctrl-C or SIGTERM
    READER_GONE = "reader_gone"  # the reader of stdout went away


#: Starts the lead's run (a new one, or a saved one resumed) with the view's event sink.
_Start = Callable[[Callable[[Event], None]], Awaitable[AgentResult]]


def _starter(lead: LeadAgent, task: str, saving: CheckpointSetup | None) -> _Start:
    """How the run starts: plain, saved to ``--checkpoint-dir``, or ``--resume``d."""
    if saving is None:
        return lambda sink: lead.run(task, on_event=sink)
    if saving.resumed:
        return lambda sink: lead.resume(
            saving.run_id, store=saving.store, checkpoint_key=saving.key, on_event=sink
        )
    return lambda sink: lead.run(
        task,
        on_event=sink,
        checkpoints=saving.store,
        checkpoint_key=saving.key,
        run_id=saving.run_id,
    )


async def _drive(lead: LeadAgent, start: _Start, view: View) -> _Ending:
    """Run the lead, redraw the live view, stop on Ctrl-C or a closed stdout."""
    ending = _Ending.FINISHED
    run_scope = anyio.CancelScope()
    reader_gone = anyio.Event()

    async def grace() -> None:
        await anyio.sleep(INTERRUPT_GRACE_SECONDS)
        run_scope.cancel()

    def stop(why: _Ending, tg: anyio.abc.TaskGroup) -> None:
        nonlocal ending
        if ending is not _Ending.FINISHED:
            run_scope.cancel()  # a second stop: do not wait for boundaries
            return
        ending = why
        lead.interrupt()  # the lead and every running subagent, at their next boundary
        tg.start_soon(grace)

    async def watch_signals(
        tg: anyio.abc.TaskGroup, *, task_status: anyio.abc.TaskStatus[None]
    ) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            task_status.started()  # handlers are installed before the run begins
            async for _ in signals:
                stop(_Ending.INTERRUPTED, tg)

    async def watch_reader(tg: anyio.abc.TaskGroup) -> None:
        await reader_gone.wait()
        if ending is _Ending.FINISHED:
            stop(_Ending.READER_GONE, tg)

    async def tick() -> None:
        while True:
            await anyio.sleep(_TICK_SECONDS)
            if isinstance(view, LiveView):
                view.draw()

    # The view calls this (once) from inside an event handler when a write finds the
    # pipe closed; the interrupt itself is synchronous, so no further request starts.
    def on_closed() -> None:
        if ending is _Ending.FINISHED:
            lead.interrupt()
        reader_gone.set()

    view.on_closed = on_closed
    async with anyio.create_task_group() as tg:
        await tg.start(watch_signals, tg)
        tg.start_soon(watch_reader, tg)
        if isinstance(view, LiveView):
            tg.start_soon(tick)
        # The open lead hosts its attached MCP servers; leaving it stops them all.
        async with lead:
            with run_scope:
                # An event sink rather than run_stream: events are rendered as they are
                # emitted, including the final ones of a cancelled run.
                await start(view.handle)
        tg.cancel_scope.cancel()
    return _Ending.READER_GONE if reader_gone.is_set() else ending
