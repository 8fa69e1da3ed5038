"""``deputy-runtime run``: a lead agent over the discovered definitions, shown live.

Model selection: ``--model`` if given; else a configured provider when its API key is in
the environment (OpenAI first, then Anthropic); else the offline ``test`` provider. The
choice is always the first line of output (stderr with ``--json``), so nobody mistakes
the deterministic test model for a real one.

The lead gets the read-only file tools; the full set of file tools, scoped to the
current directory, is the registry definitions name their tools from. Ctrl-C interrupts
the lead and every running delegation at their next boundary, and cancels whatever is
still running a moment later; owned resources are cleaned up either way, the summary
shows what finished, and the exit status is 130.

Exit status: 0 the lead completed; 1 it failed (provider or runtime error); 2 bad
arguments, definitions or plugin; 3 it stopped early (a limit or a hook); 130 Ctrl-C.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from ..chat import Chat, chat
from ..definitions import AgentDefinition, agent_definitions
from ..errors import DeputyError
from ..runtime import (
    AgentResult,
    DelegationPolicy,
    LeadAgent,
    Permissions,
    UsageLimits,
)
from ..tools import tools_file
from .view import JsonView, LiveView, PlainView, RunState, summary_table

__all__ = ["DEFAULT_MODELS", "run", "select_model"]

#: Environment variable -> model used when only that provider's key is configured.
DEFAULT_MODELS: tuple[tuple[str, str], ...] = (
    ("OPENAI_API_KEY", "openai/gpt-4.1-mini"),
    ("ANTHROPIC_API_KEY", "anthropic/claude-sonnet-4-5"),
)
OFFLINE_MODEL = "test"
LEAD_TOOLS = ("read_file", "list_files", "grep_files")  # read-only: the lead delegates
LEAD_PROMPT = (
    "You are the lead agent. Split the user's task into self-contained parts, delegate "
    "each part to the sub-agent that fits it best (independent parts in the same turn, "
    "so they run in parallel), then combine their answers into one reply."
)
# After the first Ctrl-C, runs get this long to stop at a boundary before being cancelled.
INTERRUPT_GRACE_SECONDS = 1.0
_TICK_SECONDS = 0.25

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_STOPPED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class _UsageError(Exception):
    """Bad arguments, definitions or plugins: reported on stderr, exit status 2."""


def select_model(explicit: str | None, environ: Mapping[str, str]) -> tuple[str, str]:
    """The model spec to use and the sentence that announces it."""
    if explicit:
        return explicit, f"Model: {explicit} (from --model)"
    for variable, spec in DEFAULT_MODELS:
        if environ.get(variable, "").strip():
            return spec, f"Model: {spec} ({variable} is set; pass --model to choose another)"
    return OFFLINE_MODEL, (
        f"Model: {OFFLINE_MODEL} - the offline, deterministic test provider, NOT a real model "
        "(set OPENAI_API_KEY or ANTHROPIC_API_KEY, or pass --model provider/model)"
    )


def run(args: argparse.Namespace) -> int:
    """Run the task; returns the exit status (see the module docstring)."""
    try:
        return _run(args)
    except _UsageError as exc:
        print(f"deputy-runtime run: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        # Ctrl-C before the signal handler was installed (or after it was removed).
        print("deputy-runtime run: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _run(args: argparse.Namespace) -> int:
    policy = None
    for plugin in getattr(args, "plugin", None) or ():
        policy = _load_plugin(plugin) or policy
    spec, announcement = select_model(args.model, os.environ)
    as_json = bool(args.json)
    print(announcement, file=sys.stderr if as_json else sys.stdout, flush=True)
    lead = _build_lead(args, _make_chat(spec), policy)
    state = RunState()
    view: JsonView | LiveView | PlainView
    if as_json:
        view = JsonView(sys.stdout.buffer, state)
    elif sys.stdout.isatty():
        view = LiveView(sys.stdout, state)
    else:
        view = PlainView(sys.stdout, state)
    backend = getattr(args, "backend", None) or "asyncio"
    try:
        interrupted = anyio.run(_drive, lead, args.task, view, backend=backend)
    finally:
        view.close()
    result = lead.last_result
    if not as_json:
        _print_summary(lead, result, interrupted)
    elif interrupted:
        print("deputy-runtime run: interrupted", file=sys.stderr)
    return _exit_status(result, interrupted)


#: Provider -> environment variable naming its endpoint, as the official OpenAI SDK reads it
#: (``https://host/v1``), so OpenAI-compatible gateways work from the CLI.
BASE_URL_VARIABLES = {"openai": "OPENAI_BASE_URL"}


def _make_chat(spec: str) -> Chat:
    kwargs: dict[str, Any] = {}
    variable = BASE_URL_VARIABLES.get(spec.partition("/")[0].strip().lower())
    if variable and os.environ.get(variable, "").strip():
        kwargs["base_url"] = os.environ[variable].strip()
    try:
        return chat(spec, system_prompt=LEAD_PROMPT, **kwargs)
    except (DeputyError, ValueError, TypeError) as exc:
        raise _UsageError(f"--model {spec!r}: {exc}") from exc


def _definitions(directory: str, registry: Mapping[str, Any]) -> dict[str, AgentDefinition]:
    path = Path(directory)
    if not path.is_dir():
        raise _UsageError(
            f"--agents {directory!r} is not a directory; point it at a directory of "
            "definition files (*.yaml, *.md), e.g. --agents examples/agents"
        )
    try:
        found = agent_definitions(path, tools=registry, markdown=True)
    except DeputyError as exc:
        raise _UsageError(str(exc)) from exc
    if not found:
        raise _UsageError(f"--agents {directory!r} holds no definition files (*.yaml, *.yml, *.md)")
    return found


def _build_lead(
    args: argparse.Namespace, lead_chat: Chat, policy: DelegationPolicy | None
) -> LeadAgent:
    cwd = Path.cwd()
    registry = {t.name: t for t in tools_file(cwd)}
    definitions = _definitions(args.agents, registry)
    try:
        limits = UsageLimits(max_requests=args.max_requests)
        permissions = Permissions(mode=args.permission_mode)
        return LeadAgent(
            lead_chat,
            definitions,
            tools=[registry[name] for name in LEAD_TOOLS],
            permissions=permissions,
            usage_limits=limits,
            working_dir=cwd,
            delegation_policy=policy,
        )
    except (DeputyError, ValueError, TypeError) as exc:
        raise _UsageError(str(exc)) from exc


def _load_plugin(target: str) -> DelegationPolicy | None:
    """Import a plugin module (dotted name or .py file); return its delegation_policy.

    A plugin runs before the model is resolved, so it can ``register_provider``. If it
    defines ``delegation_policy`` (a DelegationPolicy, or a function returning one), the
    lead uses it.
    """
    try:
        if target.endswith(".py") or os.sep in target:
            path = Path(target)
            if not path.is_file():
                raise _UsageError(f"--plugin {target!r}: no such file")
            spec = importlib.util.spec_from_file_location(f"deputy_plugin_{path.stem}", path)
            if spec is None or spec.loader is None:
                raise _UsageError(f"--plugin {target!r}: not an importable Python file")
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except _UsageError:
        raise
    except Exception as exc:
        raise _UsageError(
            f"--plugin {target!r} failed to load: {type(exc).__name__}: {exc}"
        ) from exc
    policy = getattr(module, "delegation_policy", None)
    if policy is not None and not isinstance(policy, DelegationPolicy) and callable(policy):
        policy = policy()
    if policy is not None and not isinstance(policy, DelegationPolicy):
        raise _UsageError(
            f"--plugin {target!r}: delegation_policy must be a DelegationPolicy or a "
            f"function returning one, got {type(policy).__name__}"
        )
    return policy


async def _drive(lead: LeadAgent, task: str, view: JsonView | LiveView | PlainView) -> bool:
    """Run the lead, redraw the live view, handle Ctrl-C; ``True`` if interrupted."""
    interrupted = False
    run_scope = anyio.CancelScope()

    async def grace() -> None:
        await anyio.sleep(INTERRUPT_GRACE_SECONDS)
        run_scope.cancel()

    async def watch_signals(
        tg: anyio.abc.TaskGroup, *, task_status: anyio.abc.TaskStatus[None]
    ) -> None:
        nonlocal interrupted
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            task_status.started()  # handlers are installed before the run begins
            async for _ in signals:
                if interrupted:
                    run_scope.cancel()  # a second Ctrl-C: stop waiting for boundaries
                    continue
                interrupted = True
                lead.interrupt()  # the lead and every running subagent
                tg.start_soon(grace)

    async def tick() -> None:
        while True:
            await anyio.sleep(_TICK_SECONDS)
            if isinstance(view, LiveView):
                view.draw()

    async with anyio.create_task_group() as tg:
        await tg.start(watch_signals, tg)
        if isinstance(view, LiveView):
            tg.start_soon(tick)
        with run_scope:
            # An event sink rather than run_stream: events are rendered as they are
            # emitted, including the final ones of a cancelled run.
            await lead.run(task, on_event=view.handle)
        tg.cancel_scope.cancel()
    return interrupted


def _print_summary(lead: LeadAgent, result: AgentResult | None, interrupted: bool) -> None:
    out = sys.stdout
    records = lead.list_subagents()
    out.write("\n" + summary_table(records, result.usage if result else None) + "\n")
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
