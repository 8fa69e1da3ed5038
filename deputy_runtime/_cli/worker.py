"""``deputy-runtime worker``: a Temporal worker for durable lead runs and delegations.

The worker serves the lead and subagent workflows and the model-request and tool-call
activities on one task queue. Its tool registry is ``run``'s: the file tools confined to
the current directory, then each ``--plugin`` module's ``tools``; providers are the
registered ones (a plugin may ``register_provider``); its hooks are the plugins' ``hooks``
and its permission callback a plugin's ``can_use_tool`` (every worker of a task queue
must have the same). The definitions under ``--agents``
are read and checked at start, as ``run`` reads them: each tool they name must be in the
registry, so a worker that could not serve them refuses to start. (The definitions a run
uses travel in the run's input; every worker of a task queue must be able to resolve
their tool and model names.) Skills and MCP servers: :mod:`.worker_extras`.

Exit status: 0 stopped by Ctrl-C or SIGTERM (after running activities finish, within
the grace period); 1 the server could not be reached or the worker failed; 2 bad
arguments, definitions or plugin, or the ``temporal`` extra is not installed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

from .._extras import install_hint
from ..definitions import AgentDefinition
from ..runtime import Hooks
from ..tools import Tool
from .hookplugins import plugin_can_use_tool
from .hostsetup import host_setup
from .leadsetup import UsageError
from .otlp import start_otlp
from .worker_extras import worker_extras

__all__ = ["worker"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
#: How long running activities may take to finish after Ctrl-C or SIGTERM.
SHUTDOWN_GRACE = timedelta(seconds=10)


def worker(args: argparse.Namespace) -> int:
    """Run the worker until Ctrl-C or SIGTERM; returns the exit status."""
    try:
        registry, definitions, resources, hooks, hook_count = _setup(args)
        stop_tracing = start_otlp(args.otlp) if args.otlp is not None else None
    except UsageError as exc:
        print(f"deputy-runtime worker: {exc}", file=sys.stderr)
        return EXIT_USAGE
    names = ", ".join(definitions) or "none"
    print(
        f"deputy-runtime worker: task queue {args.task_queue!r} at {args.temporal} "
        f"(namespace {args.namespace!r}); definitions: {names}; hooks: {hook_count}",
        flush=True,
    )
    try:
        status = asyncio.run(_serve(args, registry, resources, hooks))
    except KeyboardInterrupt:
        status = EXIT_OK
    finally:
        if stop_tracing is not None:
            stop_tracing()  # flushes the spans still batched
    # Temporal's native client keeps threads of its own that can abort the interpreter's
    # finalisation ("PyGILState_Release ... must be current"); leave without it, once
    # everything printed is flushed.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _setup(
    args: argparse.Namespace,
) -> tuple[dict[str, Tool], dict[str, AgentDefinition], dict[str, Any], Hooks, int]:
    try:
        import deputy_runtime.temporal  # noqa: F401
    except ImportError as exc:
        raise UsageError(f"{exc} ({install_hint('temporal')})") from exc
    if not str(args.temporal).strip():
        raise UsageError("--temporal is empty: give the server's HOST:PORT, e.g. 127.0.0.1:7233")
    setup = host_setup(args)
    setup.print_warnings()
    plugins = setup.plugins
    resources = _plugin_resources(plugins.modules)
    extras = worker_extras(
        args,
        setup.loaded.definitions,
        plugins.tools,
        setup.skills,
        resources["lease_backend"],
        plugin_servers=setup.folders.servers,
    )
    definitions = setup.loaded.definitions
    return plugins.tools, definitions, {**resources, **extras}, setup.hooks, setup.hook_count


def _plugin_resources(modules: tuple[ModuleType, ...]) -> dict[str, Any]:
    """``DeputyActivities`` keyword arguments from the plugins' ``owned_resources`` (a
    dict of name to ``OwnedResourceFactory``, merged, later plugins win) and
    ``lease_backend`` (the last plugin's)."""
    owned: dict[str, Any] = {}
    backend: Any = None
    for module in modules:
        found = getattr(module, "owned_resources", None)
        if found is not None:
            if not isinstance(found, Mapping):
                raise UsageError(
                    f"--plugin {module.__name__!r}: owned_resources must be a dict of name "
                    f"to OwnedResourceFactory, got {type(found).__name__}"
                )
            owned.update(found)
        backend = getattr(module, "lease_backend", None) or backend
    return {"owned_resources": owned, "lease_backend": backend, **plugin_can_use_tool(modules)}


async def _serve(
    args: argparse.Namespace, registry: dict[str, Tool], resources: dict[str, Any], hooks: Hooks
) -> int:
    from temporalio.client import Client

    from ..temporal import DeputyActivities, data_converter, deputy_worker

    try:
        client = await Client.connect(
            args.temporal, namespace=args.namespace, data_converter=data_converter
        )
    except Exception as exc:
        print(
            f"deputy-runtime worker: cannot reach Temporal at {args.temporal}: {exc}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    try:
        activities = DeputyActivities(
            registry.values(), working_dir=Path.cwd(), hooks=hooks, **resources
        )
    except (TypeError, ValueError) as exc:
        print(f"deputy-runtime worker: --plugin: {exc}", file=sys.stderr)
        return EXIT_USAGE
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    backend = resources["lease_backend"]
    try:
        async with contextlib.AsyncExitStack() as stack:
            if hasattr(backend, "__aenter__"):  # a backend owning its connection
                await stack.enter_async_context(backend)
            await stack.enter_async_context(activities)  # starts the shared MCP servers
            await stack.enter_async_context(
                deputy_worker(
                    client,
                    activities,
                    task_queue=args.task_queue,
                    graceful_shutdown_timeout=SHUTDOWN_GRACE,
                )
            )
            print("deputy-runtime worker: ready", flush=True)
            await stop.wait()
            print("deputy-runtime worker: stopping", flush=True)
    except Exception as exc:
        print(f"deputy-runtime worker: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
    return EXIT_OK
