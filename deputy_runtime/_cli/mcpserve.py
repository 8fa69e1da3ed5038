"""``deputy-runtime mcp-serve``: the lead, and each agent, as tools of an MCP server.

An MCP client (Claude Code, Claude Desktop, the SDK's ``ClientSession``) starts it as a
stdio server, or connects to ``--http HOST:PORT`` (streamable HTTP at ``/mcp``), and
delegates to deputy_runtime agents through tools (:mod:`.mcptools`). The lead is built
exactly as ``deputy-runtime run`` builds it (:mod:`.hostsetup`, :mod:`.leadsetup`): the
same model choice, plugins, plugin folders, definitions, MCP servers and resource modes,
the ``--permission-mode`` ceiling and the hooks; one is built per call, with
``--max-requests`` (and ``--max-total-tokens``) as the call's limits, all drawing on one
server-wide budget (``--total-requests``, ``--total-cost-usd``) kept in an
:class:`~deputy_runtime.InProcessLedger`.

Each call has a shell of its own (the ``bash`` tools of the definitions that name them):
the background commands a call starts are killed when the call ends, cancelled or not.

stdout is the protocol's on stdio, so every note (the warnings, the ``Model:`` line) goes
to stderr. Over HTTP, tokens come from ``--token-file`` or ``DEPUTY_RUNTIME_TOKEN`` as for
``serve``, never from the command line; without one the server only listens on a
loopback address.

Exit status: 0 the client closed stdio, or SIGTERM/Ctrl-C stopped the HTTP server; 2 bad
arguments, tokens, definitions or plugins (the message names the option or file).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
import msgspec

from .. import __version__
from .._extras import install_hint
from ..definitions import AgentDefinition
from ..runtime import InProcessLedger, LeadAgent
from ..tools import BashTools
from .ask import TerminalAsker
from .definitions import host_shell
from .hostsetup import host_setup, model_choice
from .leadsetup import UsageError, attach_mcp_servers, build_lead, check_backend, make_chat
from .serve import TOKEN_VARIABLE, is_loopback, read_tokens

__all__ = ["mcp_serve", "parse_address", "with_shell"]

EXIT_OK, EXIT_USAGE, EXIT_INTERRUPTED = 0, 2, 130


def mcp_serve(args: argparse.Namespace) -> int:
    """Serve until the client leaves (stdio) or a signal (HTTP); returns the exit status."""
    try:
        return _mcp_serve(args)
    except UsageError as exc:
        print(f"deputy-runtime mcp-serve: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("deputy-runtime mcp-serve: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as a host and a port from 1 to 65535.

    Raises:
        UsageError: It is not of that form (the message names ``--http``).
    """
    host, colon, port = text.strip().rpartition(":")
    host = host.strip("[]")
    if not colon or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise UsageError(
            f"--http {text!r}: expected HOST:PORT with a port from 1 to 65535, e.g. "
            "--http 127.0.0.1:8766 (or [::1]:8766)"
        )
    return host, int(port)


def with_shell(
    agents: Mapping[str, AgentDefinition], old: BashTools | None, new: BashTools
) -> dict[str, AgentDefinition]:
    """``agents`` with the host shell's tools (``old``) swapped for ``new``'s.

    Only the host's own shell tools are swapped (by identity): a plugin's replacement
    for them is the plugin's to own.
    """
    if old is None:
        return dict(agents)
    swap = {id(tool): fresh for tool, fresh in zip(old.tools, new.tools, strict=True)}
    swapped: dict[str, AgentDefinition] = {}
    for name, definition in agents.items():
        if any(id(tool) in swap for tool in definition.tools):
            tools = tuple(swap.get(id(tool), tool) for tool in definition.tools)
            definition = msgspec.structs.replace(definition, tools=tools)
        swapped[name] = definition
    return swapped


def _check_extras(http: bool) -> None:
    try:
        import mcp.server  # noqa: F401
    except ImportError as exc:
        raise UsageError(
            f"mcp-serve needs the 'mcp' extra ({exc.name} is not installed); install it "
            f"with: {install_hint('mcp')}"
        ) from None
    if http:
        try:
            import hypercorn  # noqa: F401
        except ImportError:
            raise UsageError(
                "--http needs the 'serve' extra (hypercorn is not installed); install it "
                f"with: {install_hint('serve')}"
            ) from None


def _http_tokens(args: argparse.Namespace, host: str) -> tuple[str, ...] | None:
    """The accepted tokens, or ``None`` to serve without (loopback only), as ``serve``."""
    tokens = read_tokens(args.token_file, dict(os.environ))
    if tokens:
        return tokens
    if not is_loopback(host):
        raise UsageError(
            f"--http {host}: serving without a token is allowed only on a loopback address; "
            f"set {TOKEN_VARIABLE} or pass --token-file FILE to listen there"
        )
    return None


def _mcp_serve(args: argparse.Namespace) -> int:
    backend = args.backend
    check_backend(backend)
    address = parse_address(args.http) if args.http is not None else None
    if address is None and args.token_file is not None:
        raise UsageError("--token-file applies only with --http (stdio needs no token)")
    _check_extras(address is not None)
    tokens = _http_tokens(args, address[0]) if address is not None else None
    setup = host_setup(args)
    plugins = setup.plugins
    choice = model_choice(args, plugins)
    spec, explicit, fanout = choice.spec, choice.explicit, args.test_fanout
    make_chat(spec, explicit=explicit, fanout=fanout)  # refuses a bad model now
    definitions: dict[str, AgentDefinition] = setup.loaded.definitions
    servers, mcp_modes = setup.mcp_servers(args)
    try:
        ledger = InProcessLedger(requests=args.total_requests, cost_usd=args.total_cost_usd)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc

    def make_lead(agents: Mapping[str, AgentDefinition]) -> LeadAgent:
        # Attached per lead: each call hosts its own MCP sessions ("shared" is per call).
        return build_lead(
            make_chat(spec, explicit=explicit, fanout=fanout),
            agents,
            plugins.tools,
            working_dir=setup.cwd,
            permission_mode=args.permission_mode,
            max_requests=args.max_requests,
            max_total_tokens=args.max_total_tokens,
            policy=attach_mcp_servers(plugins.policy, servers, mcp_modes),
            aliases=choice.aliases,
            shared_budget=ledger,
            hooks=setup.hooks,
            # The client is a program, not a person at a terminal: ask_user is refused.
            human_input=TerminalAsker(interactive=False),
        )

    make_lead(definitions)  # refuses a bad ceiling or definition before serving
    from .mcptools import LeadTools, build_server

    @asynccontextmanager
    async def open_lead(agents: Mapping[str, AgentDefinition]) -> AsyncIterator[LeadAgent]:
        # A shell of the call's own: its background commands are killed when the call
        # ends, cancelled or not, not when the server stops.
        shell = host_shell(setup.cwd)
        lead = make_lead(with_shell(agents, plugins.shell, shell))
        async with shell, lead:
            yield lead

    budget = [
        f"{option} {value}"
        for option, value in (
            ("--total-requests", args.total_requests),
            ("--total-cost-usd", args.total_cost_usd),
        )
        if value is not None
    ]
    try:
        tools = LeadTools(
            definitions,
            open_lead,
            ledger=ledger,
            lead_tool=args.tools in ("all", "lead"),
            agent_tools=args.tools in ("all", "agents"),
            max_calls=args.max_calls,
            budget_option=", ".join(budget) or "the server's budget",
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    server = build_server(tools, __version__)
    setup.print_warnings()
    print(choice.announcement, file=sys.stderr, flush=True)
    if address is not None and tokens is None:
        print(
            "deputy-runtime mcp-serve: WARNING: serving without authentication (loopback only)",
            file=sys.stderr,
            flush=True,
        )

    async def serve() -> None:
        async with AsyncExitStack() as stack:
            if address is None:
                from mcp.server.stdio import stdio_server

                read, write = await stack.enter_async_context(stdio_server())
                await server.run(read, write, server.create_initialization_options())
            else:
                from .mcphttp import serve_http

                await serve_http(server, address[0], address[1], tokens)

    anyio.run(serve, backend=backend)
    return EXIT_OK
