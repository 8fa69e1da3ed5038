"""``deputy-runtime serve``: the delegation service over HTTP (see docs/service.md).

The lead is built exactly as ``deputy-runtime run`` builds it (model selection, plugins
with their tools and skills, model aliases, the definitions directory: :mod:`.leadsetup`),
once per run, with the client's narrower limits and mode. Tokens come from
``--token-file`` (one per line) or the ``DEPUTY_RUNTIME_TOKEN`` environment variable,
never from the command line, where other users could read them in the process list.
Without a token the command refuses to start, unless ``--insecure-no-auth`` is given and
the server listens on loopback only.

Exit status: 0 served and shut down cleanly (SIGTERM or Ctrl-C); 2 bad arguments,
tokens, definitions or plugins (the message names the option or file). Warnings about
definition files are printed on stderr at startup, one ``file:line: warning: message``
line each, before the model line.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from contextlib import AsyncExitStack
from pathlib import Path

import anyio

from .._extras import install_hint
from ..definitions import AgentDefinition
from ..errors import DeputyError
from ..runtime import LeadAgent, UsageLimits
from ..service.auth import check_token_text
from ..service.config import Resolved, ServiceConfig
from .ask import TerminalAsker
from .hostsetup import host_setup, model_choice
from .leadsetup import (
    UsageError,
    attach_mcp_servers,
    build_lead,
    check_backend,
    fanout_note,
    make_chat,
    redis_setup,
    with_lease_backend,
)
from .otlp import start_otlp

__all__ = ["TOKEN_VARIABLE", "is_loopback", "read_tokens", "serve"]

TOKEN_VARIABLE = "DEPUTY_RUNTIME_TOKEN"
EXIT_OK, EXIT_USAGE, EXIT_INTERRUPTED = 0, 2, 130


def serve(args: argparse.Namespace) -> int:
    """Run the service until SIGTERM or Ctrl-C; returns the exit status."""
    try:
        return _serve(args)
    except UsageError as exc:
        print(f"deputy-runtime serve: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        # Ctrl-C before the signal handlers were installed: nothing was running yet.
        print("deputy-runtime serve: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_tokens(token_file: str | None, environ: dict[str, str]) -> tuple[str, ...]:
    """The accepted tokens: the file's lines (``#`` comments and blanks skipped), else the
    environment variable; empty when neither gives one."""
    if token_file is not None:
        path = Path(token_file)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"--token-file {token_file!r}: cannot read it ({exc})") from exc
        tokens = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip() and not line.lstrip().startswith("#"):
                tokens.append(_checked(line, f"--token-file {token_file!r} line {number}"))
        if not tokens:
            raise UsageError(f"--token-file {token_file!r} holds no token (one per line)")
        return tuple(tokens)
    value = environ.get(TOKEN_VARIABLE, "")
    return (_checked(value, TOKEN_VARIABLE),) if value.strip() else ()


def _checked(token: str, source: str) -> str:
    try:
        return check_token_text(token, source)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def _check_extra() -> None:
    """Refuse up front when the ``serve`` extra (Starlette, Hypercorn) is not installed."""
    try:
        import hypercorn  # noqa: F401
        import starlette  # noqa: F401
    except ImportError as exc:
        raise UsageError(
            f"serve needs the 'serve' extra ({exc.name} is not installed); install it with: "
            + install_hint("serve")
        ) from None


def _serve(args: argparse.Namespace) -> int:
    backend = args.backend
    _check_extra()
    check_backend(backend)
    token_file = Path(args.token_file) if args.token_file is not None else None
    if token_file is not None and token_file.is_file() and token_file.stat().st_mode & 0o077:
        print(
            f"deputy-runtime serve: warning: --token-file {args.token_file!r} can be read by "
            "other users; chmod 600 it",
            file=sys.stderr,
            flush=True,
        )
    tokens: tuple[str, ...] | None = read_tokens(args.token_file, dict(os.environ))
    if not tokens:
        if not args.insecure_no_auth:
            raise UsageError(
                f"no token: set {TOKEN_VARIABLE} or pass --token-file FILE (tokens are "
                "never taken from the command line); --insecure-no-auth serves without "
                "one, on a loopback address only"
            )
        if not is_loopback(args.host):
            raise UsageError(
                f"--insecure-no-auth is allowed only on a loopback address, not "
                f"--host {args.host!r}; configure a token to listen there"
            )
        tokens = None
    elif args.insecure_no_auth:
        raise UsageError("--insecure-no-auth contradicts the configured token; drop one")
    setup = host_setup(args)
    cwd, plugins = setup.cwd, setup.plugins
    policy, registry = plugins.policy, plugins.tools
    choice = model_choice(args, plugins)
    spec, announcement, aliases = choice.spec, choice.announcement, choice.aliases
    explicit, fanout = choice.explicit, args.test_fanout
    probe = make_chat(spec, explicit=explicit, fanout=fanout)  # refuses a bad model now
    definitions: dict[str, AgentDefinition] = setup.loaded.definitions
    servers, mcp_modes = setup.mcp_servers(args)
    hooks = setup.hooks
    try:
        config = ServiceConfig(
            max_requests=args.max_requests,
            max_total_tokens=args.max_total_tokens,
            permission_mode=args.permission_mode,
            max_runs=args.max_runs,
            keep_runs=args.keep_runs,
            rate=args.rate,
            burst=args.burst,
            max_body_bytes=args.max_body_bytes,
            event_log_size=args.event_log_size,
            shutdown_grace=args.shutdown_grace,
        )
    except (DeputyError, ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from exc

    redis = redis_setup(args.redis, args.shared_budget, args.redis_namespace)
    if redis is not None:
        policy = with_lease_backend(policy, redis.leases)
    shared_budget = redis.budget if redis is not None else None

    def make_lead(resolved: Resolved) -> LeadAgent:
        # Attached per lead: each run hosts its own MCP sessions ("shared" is per run).
        return build_lead(
            make_chat(spec, explicit=explicit, fanout=fanout),
            {name: definitions[name] for name in resolved.agents},
            registry,
            working_dir=cwd,
            permission_mode=resolved.permission_mode,
            max_requests=resolved.limits.max_requests or config.max_requests,
            max_total_tokens=resolved.limits.max_total_tokens,
            policy=attach_mcp_servers(
                policy,
                servers,
                mcp_modes,
                lease_backend=None if redis is None else redis.leases,
            ),
            aliases=aliases,
            shared_budget=shared_budget,
            hooks=hooks,
            # No one sits at the server: a delegation's ask_user is told so.
            human_input=TerminalAsker(interactive=False),
        )

    limits = UsageLimits(max_requests=config.max_requests, max_total_tokens=config.max_total_tokens)
    make_lead(Resolved("check", tuple(definitions), limits, config.permission_mode))
    setup.print_warnings()
    print(announcement, file=sys.stderr, flush=True)
    note = fanout_note(probe, list(definitions))
    if note:
        print(note, file=sys.stderr, flush=True)
    if tokens is None:
        print(
            "deputy-runtime serve: WARNING: serving without authentication "
            "(--insecure-no-auth, loopback only)",
            file=sys.stderr,
            flush=True,
        )
    from ..service.app import build_app
    from ..service.server import serve_forever

    async def serve() -> None:
        async with AsyncExitStack() as stack:
            if plugins.shell is not None:  # background commands end with the server
                await stack.enter_async_context(plugins.shell)
            if redis is not None:
                await stack.enter_async_context(redis.opened())
            await serve_forever(
                config,
                agents=tuple(definitions),
                make_lead=make_lead,
                make_app=lambda manager: build_app(manager, definitions, tokens),
                host=args.host,
                port=args.port,
            )

    stop_tracing = start_otlp(args.otlp) if args.otlp is not None else None
    try:
        anyio.run(serve, backend=backend)
    finally:
        if stop_tracing is not None:
            stop_tracing()
    return EXIT_OK
