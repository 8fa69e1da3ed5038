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

Exit status: 0 the lead completed; 1 it failed (provider or runtime error); 2 bad
arguments, definitions or plugin; 3 it stopped early (a limit or a hook); 130 Ctrl-C;
141 the reader of stdout went away.
"""

from __future__ import annotations

import argparse
import contextlib
import enum
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import anyio

from ..runtime import AgentResult, DelegationStatus, LeadAgent
from ..tools import BashTools
from .ask import TerminalAsker
from .hookplugins import plugin_hooks
from .leadsetup import (
    DEFAULT_MODELS,
    OFFLINE_MODEL,
    RedisSetup,
    UsageError,
    alias_options,
    attach_mcp_servers,
    build_lead,
    check_agents,
    check_backend,
    fanout_note,
    lead_alias,
    load_definitions,
    load_mcp_servers,
    load_plugins,
    make_chat,
    mcp_mode_options,
    print_warnings,
    redis_setup,
    select_model,
    with_lease_backend,
)
from .otlp import start_otlp
from .pluginfolders import folder_parts, merge_hooks, merge_servers
from .view import JsonView, LiveView, PlainView, RunState, definition_colours, summary_table

__all__ = ["DEFAULT_MODELS", "OFFLINE_MODEL", "run", "select_model"]

INTERRUPT_GRACE_SECONDS = 1.0
_TICK_SECONDS = 0.25

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_STOPPED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
#: The lead completed, but it delegated and no delegation completed: its answer rests on
#: nothing a subagent produced, which a script must be able to tell from success.
EXIT_NO_DELEGATION_COMPLETED = 4
EXIT_READER_GONE = 128 + 13  # as if killed by SIGPIPE, like Unix tools in a pipeline


def run(args: argparse.Namespace) -> int:
    """Run the task; returns the exit status (see the module docstring)."""
    try:
        return _run(args)
    except UsageError as exc:
        print(f"deputy-runtime run: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        # Ctrl-C before the signal handler was installed (or after it was removed).
        print("deputy-runtime run: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _run(args: argparse.Namespace) -> int:
    task = str(args.task)
    if not task.strip():
        raise UsageError(
            "TASK is empty: say what the lead should do, e.g. "
            'deputy-runtime run --agents examples/agents "Summarise the README"'
        )
    backend = getattr(args, "backend", None) or "asyncio"
    check_backend(backend)
    check_agents(args.agents)
    cwd = Path.cwd()
    plugins = load_plugins(getattr(args, "plugin", None) or (), cwd)
    aliases = {**plugins.aliases, **alias_options(getattr(args, "model_alias", None) or ())}
    spec, announcement = lead_alias(*select_model(args.model, os.environ))
    fanout = getattr(args, "test_fanout", None)
    lead_chat = make_chat(spec, explicit=bool(args.model), fanout=fanout)
    loaded = load_definitions(args.agents, plugins.tools, plugins.skills)
    folders = folder_parts(loaded.plugins)
    redis = redis_setup(
        getattr(args, "redis", None),
        getattr(args, "shared_budget", None),
        getattr(args, "redis_namespace", None),
    )
    policy = plugins.policy if redis is None else with_lease_backend(plugins.policy, redis.leases)
    mcp_config = getattr(args, "mcp_config", None)
    servers = merge_servers(
        load_mcp_servers(mcp_config, cwd),
        folders.servers,
        f"--mcp-config {mcp_config!r}" if mcp_config else str(cwd / ".mcp.json"),
    )
    mcp_modes = {
        **folders.modes,
        **mcp_mode_options(getattr(args, "mcp_mode", None) or (), servers),
    }
    leases = None if redis is None else redis.leases
    policy = attach_mcp_servers(policy, servers, mcp_modes, lease_backend=leases)
    hooks = merge_hooks(plugin_hooks(plugins.modules)[0], folders.hooks)
    as_json = bool(args.json)
    # A delegation's ask_user (AskUserQuestion) is asked here on a terminal, else refused.
    asker = TerminalAsker(interactive=sys.stdin.isatty() and sys.stdout.isatty() and not as_json)
    lead = build_lead(
        lead_chat,
        loaded.definitions,
        plugins.tools,
        working_dir=cwd,
        permission_mode=args.permission_mode,
        max_requests=args.max_requests,
        policy=policy,
        aliases=aliases,
        shared_budget=redis.budget if redis is not None else None,
        hooks=hooks,
        human_input=asker,
    )
    notes = sys.stderr if as_json else sys.stdout
    print_warnings(loaded.warnings, sys.stderr)
    for line in folders.warnings:
        print(line, file=sys.stderr)
    left_out = fanout_note(lead_chat, lead.available_sub_agents())

    def announce() -> None:
        # Only once nothing can refuse the run any more (the OTLP URL, the Redis
        # connection): an exit-2 error is then one line with no Model: line before it.
        print(announcement, file=notes, flush=True)
        if left_out:
            print(left_out, file=notes, flush=True)

    otlp = getattr(args, "otlp", None)
    stop_tracing = start_otlp(otlp) if otlp is not None else None
    state = RunState(colours=definition_colours(loaded.definitions.values()))
    view: JsonView | LiveView | PlainView
    if as_json:
        view = JsonView(sys.stdout.buffer, state)
    elif sys.stdout.isatty():
        view = LiveView(sys.stdout, state)
    else:
        view = PlainView(sys.stdout, state)
    asker.view = view  # a question pauses the live tree
    try:
        outcome = anyio.run(
            _drive_with, redis, plugins.shell, lead, task, view, announce, backend=backend
        )
    finally:
        view.close()
        if stop_tracing is not None:
            stop_tracing()
    if outcome is _Ending.READER_GONE:
        return EXIT_READER_GONE
    interrupted = outcome is _Ending.INTERRUPTED
    result = lead.last_result
    if not as_json:
        _print_summary(lead, result, interrupted)
    elif interrupted:
        print("deputy-runtime run: interrupted", file=sys.stderr)
    status = _exit_status(result, interrupted)
    if status == EXIT_OK and _every_delegation_failed(lead):
        print(
            "deputy-runtime run: every delegation failed or stopped; none completed",
            file=sys.stderr,
        )
        return EXIT_NO_DELEGATION_COMPLETED
    return status


async def _drive_with(
    redis: RedisSetup | None,
    shell: BashTools | None,
    lead: LeadAgent,
    task: str,
    view: JsonView | LiveView | PlainView,
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
        return await _drive(lead, task, view)
    raise AssertionError("unreachable")  # pragma: no cover - the stack never swallows


class _Ending(enum.Enum):
    """How :func:`_drive` ended the run."""

    FINISHED = "finished"
    INTERRUPTED = "interrupted"  # Ctrl-C or SIGTERM
    READER_GONE = "reader_gone"  # the reader of stdout went away


async def _drive(lead: LeadAgent, task: str, view: JsonView | LiveView | PlainView) -> _Ending:
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
                await lead.run(task, on_event=view.handle)
        tg.cancel_scope.cancel()
    return _Ending.READER_GONE if reader_gone.is_set() else ending


def _print_summary(lead: LeadAgent, result: AgentResult | None, interrupted: bool) -> None:
    out = sys.stdout
    records = lead.list_subagents()
    out.write("\n" + summary_table(records, result) + "\n")
    problems = [
        f"  {r.agent_name}: {kind}: {text.splitlines()[0]}"
        for r in records
        for kind, text in (
            ("error", r.error),
            ("cleanup error", r.cleanup_error),
            ("hook error", r.hook_error),
        )
        if text
    ]
    if problems:
        out.write("\n" + "\n".join(problems) + "\n")
    if interrupted:
        finished = sum(1 for r in records if r.status == "completed")
        out.write(
            f"\nInterrupted: {finished} of {len(records)} delegations had completed; "
            "running ones were stopped and their resources cleaned up.\n"
        )
    if result is not None:
        if result.error:
            out.write(f"\nError: {result.error}\n")
        if result.stop_reason != "complete":
            out.write(f"\nStopped: {result.stop_reason}\n")
        if result.response:
            out.write("\nAnswer:\n" + result.response.rstrip() + "\n")
    out.flush()


def _exit_status(result: AgentResult | None, interrupted: bool) -> int:
    if interrupted:
        return EXIT_INTERRUPTED
    if result is None or result.stop_reason in ("error", "provider_error"):
        return EXIT_FAILED
    if result.stop_reason != "complete":
        return EXIT_STOPPED
    return EXIT_OK


def _every_delegation_failed(lead: LeadAgent) -> bool:
    """True when the lead delegated at least once and no delegation completed."""
    records = lead.list_subagents()
    return bool(records) and all(r.status != DelegationStatus.COMPLETED for r in records)
