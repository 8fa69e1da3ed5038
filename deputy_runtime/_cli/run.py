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
import enum
import importlib
import importlib.util
import os
import signal
import sys
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio

from ..chat import (
    Chat,
    TestProvider,
    chat,
    is_model_alias,
    is_provider_name,
    model_alias_map,
    parse_model_spec,
    provider_names,
    resolve_model,
    suggest_model_spec,
)
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
EXIT_READER_GONE = 128 + 13  # as if killed by SIGPIPE, like Unix tools in a pipeline


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
    task = str(args.task)
    if not task.strip():
        raise _UsageError(
            "TASK is empty: say what the lead should do, e.g. "
            'deputy-runtime run --agents examples/agents "Summarise the README"'
        )
    backend = getattr(args, "backend", None) or "asyncio"
    _check_backend(backend)
    aliases: dict[str, str] = {}
    policy = None
    for plugin in getattr(args, "plugin", None) or ():
        loaded = _load_plugin(plugin)
        policy = loaded.policy or policy
        aliases.update(loaded.aliases)
    aliases.update(_alias_options(getattr(args, "model_alias", None) or ()))
    spec, announcement = _lead_alias(*select_model(args.model, os.environ))
    fanout = getattr(args, "test_fanout", None)
    lead_chat = _make_chat(spec, explicit=bool(args.model), fanout=fanout)
    lead = _build_lead(args, lead_chat, policy, aliases)
    as_json = bool(args.json)
    notes = sys.stderr if as_json else sys.stdout
    print(announcement, file=notes, flush=True)
    left_out = _fanout_note(lead_chat, lead.available_sub_agents())
    if left_out:
        print(left_out, file=notes, flush=True)
    state = RunState()
    view: JsonView | LiveView | PlainView
    if as_json:
        view = JsonView(sys.stdout.buffer, state)
    elif sys.stdout.isatty():
        view = LiveView(sys.stdout, state)
    else:
        view = PlainView(sys.stdout, state)
    try:
        outcome = anyio.run(_drive, lead, task, view, backend=backend)
    finally:
        view.close()
    if outcome is _Ending.READER_GONE:
        return EXIT_READER_GONE
    interrupted = outcome is _Ending.INTERRUPTED
    result = lead.last_result
    if not as_json:
        _print_summary(lead, result, interrupted)
    elif interrupted:
        print("deputy-runtime run: interrupted", file=sys.stderr)
    return _exit_status(result, interrupted)


def _lead_alias(spec: str, announcement: str) -> tuple[str, str]:
    """``--model anthropic/sonnet``: the lead's own model is an alias too; resolve it.

    On another provider an alias names no model at all, which is refused.
    """
    provider, _, model = spec.partition("/")
    if not model or not is_model_alias(model):
        return spec, announcement
    if provider.strip().lower() != "anthropic":
        raise _UsageError(
            f"--model {spec!r}: {model.strip()!r} is a Claude Code alias, which provider "
            f"{provider.strip()!r} does not serve; name one of its models, or use "
            f"--model {suggest_model_spec(model)}"
        )
    resolved = f"anthropic/{resolve_model(model, 'anthropic').model}"
    return resolved, f"Model: {resolved} (from --model {spec}, a Claude Code alias)"


def _check_backend(backend: str) -> None:
    """Refuse ``--backend trio`` up front when trio is not installed (it is an extra)."""
    if backend != "trio":
        return
    try:
        import trio  # noqa: F401
    except ImportError:
        raise _UsageError(
            "--backend trio needs the trio package, which is not installed; install the "
            "extra with: pip install 'deputy-runtime[trio]'"
        ) from None


def _alias_options(values: Sequence[str]) -> dict[str, str]:
    """``--model-alias ALIAS=MODEL`` options as a validated map (later ones win)."""
    pairs: dict[str, str] = {}
    for value in values:
        alias, equals, target = value.partition("=")
        if not equals or not alias.strip() or not target.strip():
            raise _UsageError(
                f"--model-alias {value!r}: expected ALIAS=MODEL, e.g. --model-alias "
                "sonnet=openai/gpt-5 (MODEL is provider/model or a model id on the lead's "
                "provider)"
            )
        _check_target(f"--model-alias {value!r}", target.strip())
        pairs[alias.strip()] = target.strip()
    try:
        return model_alias_map(pairs)
    except (TypeError, ValueError) as exc:
        raise _UsageError(f"--model-alias: {exc}") from exc


def _check_target(label: str, target: str) -> None:
    """A mapped model naming an unknown provider is refused with the closest name."""
    if "/" not in target or is_provider_name(parse_model_spec(target)[0]):
        return
    suggestion = suggest_model_spec(target)
    if suggestion is not None:
        raise _UsageError(
            f"{label}: no provider named {target.partition('/')[0]!r}; did you mean {suggestion}?"
        )


def _fanout_note(lead_chat: Chat, agents: Sequence[str]) -> str | None:
    """Say which agents the offline test model leaves out (it fans out to a capped number)."""
    provider = lead_chat.provider
    if not isinstance(provider, TestProvider) or len(agents) <= provider.fanout:
        return None
    fanout = provider.fanout
    skipped = agents[fanout:]
    return (
        f"Note: the test model delegates to at most {fanout} agents per turn, so "
        f"{len(skipped)} of {len(agents)} will not run ({', '.join(skipped)}); pass "
        f"--test-fanout {len(agents)} to run them all."
    )


#: Provider -> environment variable naming its endpoint, as the official OpenAI SDK reads it
#: (``https://host/v1``), so OpenAI-compatible gateways work from the CLI.
BASE_URL_VARIABLES = {"openai": "OPENAI_BASE_URL"}


def _make_chat(spec: str, *, explicit: bool = True, fanout: int | None = None) -> Chat:
    label = f"--model {spec!r}" if explicit else f"the default model {spec!r}"
    provider = spec.partition("/")[0].strip().lower()
    if not is_provider_name(provider):
        suggestion = suggest_model_spec(spec)
        if suggestion is not None:
            hint = f"; did you mean --model {suggestion}?"
        else:
            hint = (
                "; a model is provider/model, e.g. openai/gpt-4.1-mini (known providers: "
                f"{', '.join(provider_names())})"
            )
        raise _UsageError(f"{label}: no provider named {spec.partition('/')[0]!r}{hint}")
    kwargs: dict[str, Any] = {}
    variable = BASE_URL_VARIABLES.get(provider)
    if variable and os.environ.get(variable, "").strip():
        kwargs["base_url"] = os.environ[variable].strip()
    if fanout is not None:
        if provider != OFFLINE_MODEL:
            raise _UsageError(
                f"--test-fanout applies only to the offline test model, not {spec!r}; leave it out"
            )
        kwargs["fanout"] = fanout
    try:
        return chat(spec, system_prompt=LEAD_PROMPT, **kwargs)
    except (DeputyError, ValueError, TypeError) as exc:
        raise _UsageError(f"{label}: {exc}") from exc


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
    args: argparse.Namespace,
    lead_chat: Chat,
    policy: DelegationPolicy | None,
    aliases: Mapping[str, str],
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
            model_aliases=aliases,
        )
    except (DeputyError, ValueError, TypeError) as exc:
        raise _UsageError(str(exc)) from exc


class _Plugin:
    """What a plugin contributes: a delegation policy and model aliases."""

    __slots__ = ("aliases", "policy")

    def __init__(self, policy: DelegationPolicy | None, aliases: dict[str, str]) -> None:
        self.policy = policy
        self.aliases = aliases


def _load_plugin(target: str) -> _Plugin:
    """Import a plugin module (dotted name or .py file); read what it contributes.

    A plugin runs before the model is resolved, so it can ``register_provider``. If it
    defines ``delegation_policy`` (a DelegationPolicy, or a function returning one), the
    lead uses it; ``model_aliases`` (a dict) maps definitions' model aliases, with
    ``--model-alias`` options winning. A plugin that raises is reported with its own
    frames only (file, line, code), not the importer's.
    """
    path: Path | None = None
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
        policy = getattr(module, "delegation_policy", None)
        if policy is not None and not isinstance(policy, DelegationPolicy) and callable(policy):
            policy = policy()
    except _UsageError:
        raise
    except Exception as exc:
        raise _UsageError(f"--plugin {target!r} failed: {_plugin_error(exc)}") from exc
    if policy is not None and not isinstance(policy, DelegationPolicy):
        raise _UsageError(
            f"--plugin {target!r}: delegation_policy must be a DelegationPolicy or a "
            f"function returning one, got {type(policy).__name__}"
        )
    return _Plugin(policy, _plugin_aliases(target, module))


def _plugin_aliases(target: str, module: ModuleType) -> dict[str, str]:
    aliases = getattr(module, "model_aliases", None)
    if aliases is None:
        return {}
    try:
        checked = model_alias_map(aliases)
    except (TypeError, ValueError) as exc:
        raise _UsageError(f"--plugin {target!r}: {exc}") from exc
    for alias, model in checked.items():
        _check_target(f"--plugin {target!r}: model_aliases[{alias!r}]", model)
    return checked


def _plugin_error(exc: BaseException) -> str:
    """``Type: message`` and the plugin's own frames (file:line and code), newest last.

    Frames of the import machinery and of this package are left out: they say nothing
    about the plugin. A syntax error has no plugin frame; its file and line are its own.
    """
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{text}\n  {exc.filename}:{exc.lineno}: {(exc.text or '').strip()}"
    package = str(Path(__file__).resolve().parent.parent)
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith("<")
        and "importlib" not in frame.filename
        and not str(Path(frame.filename).resolve()).startswith(package)
    ]
    lines = [f"  {f.filename}:{f.lineno} in {f.name}: {(f.line or '').strip()}" for f in frames]
    return "\n".join([text, *lines[-5:]])


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
        with run_scope:
            # An event sink rather than run_stream: events are rendered as they are
            # emitted, including the final ones of a cancelled run.
            await lead.run(task, on_event=view.handle)
        tg.cancel_scope.cancel()
    return _Ending.READER_GONE if reader_gone.is_set() else ending


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
