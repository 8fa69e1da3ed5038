"""The ``deputy-runtime`` command.

This module only parses arguments and dispatches; each subcommand lives in its own module
under ``deputy_runtime._cli`` and is imported when used, so ``deputy-runtime validate``
never pays for the HTTP stack.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from . import __version__
from ._cli import silence_stream
from ._modes import PERMISSION_MODES

__all__ = ["main"]

# subcommand -> "module:function"; each function takes the parsed namespace, returns the
# exit status.
_COMMANDS = {
    "validate": "deputy_runtime._cli.definitions:validate",
    "list": "deputy_runtime._cli.definitions:list_agents",
    "schema": "deputy_runtime._cli.definitions:schema",
    "convert": "deputy_runtime._cli.convert:convert",
    "run": "deputy_runtime._cli.run:run",
    "bench": "deputy_runtime._cli.bench:bench",
    "worker": "deputy_runtime._cli.worker:worker",
    "attach": "deputy_runtime._cli.run_temporal:attach",
    "answer": "deputy_runtime._cli.answer:answer",
    "serve": "deputy_runtime._cli.serve:serve",
    "mcp-serve": "deputy_runtime._cli.mcpserve:mcp_serve",
    "budget": "deputy_runtime._cli.budget:budget",
}


class _Parser(argparse.ArgumentParser):
    """An argument parser whose mistakes are one line, not the whole usage.

    ``run``'s usage is a dozen lines; the mistake is what the user needs to see, with a
    pointer to ``--help``. The exit status stays argparse's 2.
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="deputy-runtime",
        description="Run a lead agent that delegates to subagents built from definitions.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )

    p = sub.add_parser("validate", help="check definition files (YAML and markdown)")
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or directories")
    p.add_argument("--strict", action="store_true", help="treat warnings as errors")
    p.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="import a module or .py file first, as run does (its tools count as known)",
    )
    _mcp_arguments(p, modes=False)
    p.add_argument(
        "--mcp-tools",
        action="store_true",
        help="start the configured MCP servers the definitions name and check every "
        "mcp__server__tool name against the tools each lists (default: names are checked "
        "without starting anything, so a mistyped tool name is not seen)",
    )

    p = sub.add_parser("list", help="list the definitions in a directory")
    p.add_argument(
        "directory",
        nargs="?",
        default=".deputy/agents",
        metavar="DIR",
        help="directory of *.yaml, *.yml and *.md definitions (default: .deputy/agents)",
    )
    p.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="import a module or .py file first, as run does (its tools count as known)",
    )

    sub.add_parser("schema", help="print the JSON Schema of definition formats 1 and 2")

    p = sub.add_parser("convert", help="convert a definition between YAML and markdown")
    p.add_argument("source", metavar="IN")
    p.add_argument("destination", metavar="OUT")
    p.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    p.add_argument(
        "--strip-whitespace",
        action="store_true",
        help="let a markdown OUT drop the prompt's and description's surrounding whitespace "
        "(a warning per field) instead of refusing",
    )

    p = sub.add_parser("run", help="run a lead agent over the discovered definitions")
    p.add_argument("task", metavar="TASK", nargs="?", default=None)
    p.add_argument(
        "--agents",
        default=".deputy/agents",
        metavar="DIR",
        help="directory of definition files (default: .deputy/agents)",
    )
    p.add_argument("--model", default=None, metavar="SPEC", help='e.g. "openai/gpt-4.1-mini"')
    p.add_argument(
        "--model-alias",
        action="append",
        default=[],
        metavar="ALIAS=MODEL",
        help="run definitions saying ALIAS (e.g. sonnet) on MODEL (provider/model or a model "
        "id on the lead's provider); repeatable",
    )
    p.add_argument(
        "--permission-mode",
        default="standard",
        choices=PERMISSION_MODES,
        help="what subagents may do: readonly, plan, standard or full (default standard)",
    )
    p.add_argument(
        "--max-requests",
        type=_whole_number,
        default=25,
        metavar="N",
        help="model requests for the whole run, delegations included (default 25)",
    )
    p.add_argument(
        "--test-fanout",
        type=_whole_number,
        default=None,
        metavar="N",
        help="the offline test model delegates to at most N agents per turn (default 8)",
    )
    p.add_argument("--json", action="store_true", help="print the event stream as JSON lines")
    p.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="import a module or .py file first (e.g. to register_provider a custom model)",
    )
    p.add_argument(
        "--backend",
        default="asyncio",
        choices=["asyncio", "trio"],
        help="the event loop (default asyncio; trio needs the 'trio' extra)",
    )
    _mcp_arguments(p, modes=True)
    p.add_argument(
        "--temporal",
        default=None,
        metavar="ADDRESS",
        help="run durably on the Temporal server at HOST:PORT (workers: deputy-runtime worker)",
    )
    p.add_argument(
        "--task-queue",
        default="deputy",
        metavar="QUEUE",
        help="with --temporal: the workers' task queue (default deputy)",
    )
    _otlp_argument(p)
    _redis_arguments(p)
    p.add_argument(
        "--checkpoint-dir",
        default=None,
        metavar="DIR",
        help="save the run in DIR at every turn boundary, so it can be resumed after a crash",
    )
    p.add_argument(
        "--resume",
        default=None,
        metavar="RUN_ID",
        help="continue the run saved in --checkpoint-dir under RUN_ID (no TASK)",
    )
    p.add_argument(
        "--checkpoint-key-file",
        default=None,
        metavar="FILE",
        help="sign checkpoints with the key in FILE (HMAC-SHA256; at least 16 bytes)",
    )

    p = sub.add_parser(
        "attach", help="follow a durable run on Temporal started earlier (temporal extra)"
    )
    p.add_argument("workflow_id", metavar="WORKFLOW_ID", help="the run's lead workflow id")
    p.add_argument("--temporal", required=True, metavar="ADDRESS", help="HOST:PORT of Temporal")
    p.add_argument("--json", action="store_true", help="print the event stream as JSON lines")

    p = sub.add_parser(
        "answer", help="answer a durable run's pending ask_user question (temporal extra)"
    )
    p.add_argument("workflow_id", metavar="WORKFLOW_ID", help="the run's lead workflow id")
    p.add_argument("question_id", nargs="?", metavar="QUESTION_ID", help="omit to list them")
    p.add_argument(
        "answers", nargs="?", metavar="ANSWERS", help='JSON object: {"question": "answer"}'
    )
    p.add_argument("--temporal", required=True, metavar="ADDRESS", help="HOST:PORT of Temporal")

    p = sub.add_parser("worker", help="run a Temporal worker for durable runs (temporal extra)")
    p.add_argument("--temporal", required=True, metavar="ADDRESS", help="HOST:PORT of Temporal")
    p.add_argument(
        "--agents",
        default=".deputy/agents",
        metavar="DIR",
        help="directory of definition files (default: .deputy/agents)",
    )
    p.add_argument(
        "--task-queue", default="deputy", metavar="QUEUE", help="task queue (default deputy)"
    )
    p.add_argument(
        "--namespace",
        default="default",
        metavar="NAMESPACE",
        help="Temporal namespace (default: default)",
    )
    p.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="import a module or .py file first (register_provider; its tools join the registry)",
    )
    _mcp_arguments(p, modes=True)
    _otlp_argument(p)

    _serve_arguments(
        sub.add_parser(
            "serve",
            help="serve leads over HTTP with a live web view (needs the 'serve' extra)",
            description="Serve leads over HTTP: POST /runs, server-sent events, a web view at "
            "/. The bearer token comes from DEPUTY_RUNTIME_TOKEN or --token-file, never from "
            "the command line. Reference: python -m pydoc deputy_runtime.service (and "
            "docs/service.md in a checkout).",
        )
    )

    _mcp_serve_arguments(
        sub.add_parser(
            "mcp-serve",
            help="serve the lead and each agent as tools of an MCP server (needs the 'mcp' extra)",
            description="Serve the lead (run_lead) and each agent (a tool named after it) "
            "to an MCP client over stdio, or over streamable HTTP at /mcp with --http. Every "
            "call runs a fresh lead under the ceiling, hooks and per-call limits; all calls "
            "draw on the server's budget (--total-requests). Over HTTP the bearer token "
            "comes from DEPUTY_RUNTIME_TOKEN or --token-file; without one only a loopback "
            "address is served.",
        )
    )

    p = sub.add_parser("bench", help="measure delegation overhead against a bare floor")
    p.add_argument(
        "--quick", action="store_true", help="small sizes, few repetitions (about a minute)"
    )
    p.add_argument("--json", action="store_true", help="print results as JSON")
    _budget_parser(sub)
    return parser


def _mcp_arguments(p: argparse.ArgumentParser, *, modes: bool) -> None:
    p.add_argument(
        "--mcp-config",
        default=None,
        metavar="FILE",
        help="MCP servers from this .mcp.json file (default: .mcp.json in the current "
        "directory, if any)",
    )
    if modes:
        p.add_argument(
            "--mcp-mode",
            action="append",
            default=[],
            metavar="NAME=MODE",
            help="how delegations get MCP server NAME: owned (one per delegation), shared "
            "(default) or exclusive (one delegation at a time); repeatable",
        )


def _serve_arguments(p: argparse.ArgumentParser) -> None:
    _mcp_arguments(p, modes=True)
    p.add_argument(
        "--agents",
        default=".deputy/agents",
        metavar="DIR",
        help="directory of definition files (default: .deputy/agents)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8765, help="TCP port (default 8765)")
    p.add_argument("--token-file", default=None, metavar="FILE", help="accepted tokens, one a line")
    p.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="serve without a token; refused unless --host is a loopback address",
    )
    p.add_argument("--model", default=None, metavar="SPEC", help='e.g. "openai/gpt-4.1-mini"')
    p.add_argument(
        "--model-alias",
        action="append",
        default=[],
        metavar="ALIAS=MODEL",
        help="run definitions saying ALIAS on MODEL; repeatable",
    )
    p.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="import a module or .py file first; repeatable",
    )
    p.add_argument(
        "--permission-mode",
        default="standard",
        choices=["readonly", "plan", "standard", "full"],
        help="every run's mode ceiling (default standard)",
    )
    p.add_argument(
        "--max-requests",
        type=_whole_number,
        default=25,
        metavar="N",
        help="ceiling of a run's model requests, delegations included (default 25)",
    )
    p.add_argument(
        "--max-total-tokens",
        type=_whole_number,
        default=None,
        metavar="N",
        help="ceiling of a run's tokens (default: none)",
    )
    p.add_argument(
        "--max-runs",
        type=_whole_number,
        default=32,
        metavar="N",
        help="active runs at once (default 32)",
    )
    p.add_argument(
        "--keep-runs",
        type=_whole_number,
        default=1000,
        metavar="N",
        help="finished runs kept for GET /runs/ID (default 1000)",
    )
    p.add_argument(
        "--rate",
        type=_positive,
        default=20.0,
        metavar="R",
        help="requests per second per token, after --burst (default 20)",
    )
    p.add_argument(
        "--burst",
        type=_whole_number,
        default=60,
        metavar="N",
        help="requests a token may make at once before --rate applies (default 60)",
    )
    p.add_argument(
        "--max-body-bytes",
        type=_whole_number,
        default=64 * 1024,
        metavar="N",
        help="largest request body accepted (default 65536)",
    )
    p.add_argument(
        "--event-log-size",
        type=_whole_number,
        default=10_000,
        metavar="N",
        help="events kept per run for Last-Event-ID resumption (default 10000)",
    )
    p.add_argument(
        "--shutdown-grace",
        type=_positive,
        default=5.0,
        metavar="SECONDS",
        help="on SIGTERM, runs get this long to stop at a boundary "
        "before being cancelled (default 5)",
    )
    p.add_argument(
        "--test-fanout",
        type=_whole_number,
        default=None,
        metavar="N",
        help="the offline test model delegates to at most N agents per turn (default 8)",
    )
    p.add_argument(
        "--backend",
        default="asyncio",
        choices=["asyncio", "trio"],
        help="the event loop (default asyncio; trio needs the 'trio' extra)",
    )
    _otlp_argument(p)
    _redis_arguments(p)


def _mcp_serve_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--agents",
        default=".deputy/agents",
        metavar="DIR",
        help="directory of definition files (default: .deputy/agents)",
    )
    p.add_argument(
        "--tools",
        default="all",
        choices=["all", "agents", "lead"],
        help="the tools offered: run_lead and one per agent (all, the default), only the "
        "agents' or only run_lead",
    )
    p.add_argument(
        "--http",
        default=None,
        metavar="HOST:PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (needs the "
        "'serve' extra); a non-loopback HOST needs a token",
    )
    p.add_argument(
        "--token-file",
        default=None,
        metavar="FILE",
        help="with --http: accepted bearer tokens, one a line (else DEPUTY_RUNTIME_TOKEN)",
    )
    p.add_argument("--model", default=None, metavar="SPEC", help='e.g. "openai/gpt-4.1-mini"')
    p.add_argument(
        "--model-alias",
        action="append",
        default=[],
        metavar="ALIAS=MODEL",
        help="run definitions saying ALIAS on MODEL; repeatable",
    )
    p.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="import a module or .py file first (providers, policy, tools, skills, hooks); "
        "repeatable",
    )
    p.add_argument(
        "--permission-mode",
        default="standard",
        choices=PERMISSION_MODES,
        help="what subagents may do, the ceiling of every call: readonly, plan, standard or "
        "full (default standard)",
    )
    p.add_argument(
        "--max-requests",
        type=_whole_number,
        default=25,
        metavar="N",
        help="model requests of one call, delegations included (default 25)",
    )
    p.add_argument(
        "--max-total-tokens",
        type=_whole_number,
        default=None,
        metavar="N",
        help="tokens of one call (default: not limited)",
    )
    p.add_argument(
        "--total-requests",
        type=_whole_number,
        default=None,
        metavar="N",
        help="model requests of all calls over the server's lifetime; a call once they are "
        "spent is refused (default: not limited)",
    )
    p.add_argument(
        "--total-cost-usd",
        type=_positive,
        default=None,
        metavar="USD",
        help="dollars of all calls over the server's lifetime (default: not limited)",
    )
    p.add_argument(
        "--max-calls",
        type=_whole_number,
        default=4,
        metavar="N",
        help="tool calls running at once; more wait for one to end (default 4)",
    )
    p.add_argument(
        "--test-fanout",
        type=_whole_number,
        default=None,
        metavar="N",
        help="the offline test model delegates to at most N agents per turn (default 8)",
    )
    p.add_argument(
        "--backend",
        default="asyncio",
        choices=["asyncio", "trio"],
        help="the event loop (default asyncio; trio needs the 'trio' extra)",
    )
    _mcp_arguments(p, modes=True)


def _budget_parser(sub: Any) -> None:
    p = sub.add_parser(
        "budget",
        help="create, show, reset or delete a shared budget in Redis",
        description="A shared budget has limits of its own; run and serve draw from it "
        "with --shared-budget NAME.",
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    helps = {
        "create": "create the budget with its limits (unchanged if it exists with them)",
        "show": "what is used, reserved and left",
        "reset": "nothing used and nothing reserved again, the same limits",
        "delete": "remove the budget",
    }
    for action, text in helps.items():
        a = actions.add_parser(action, help=text, description=text)
        a.add_argument("name", metavar="NAME", help="the budget's name")
        a.add_argument(
            "--redis", required=True, metavar="URL", help="the Redis server, e.g. "
            "redis://127.0.0.1:6379/0 (needs the 'redis' extra)",
        )  # fmt: skip
        a.add_argument(
            "--redis-namespace", default="deputy", metavar="NS",
            help="prefix of the Redis keys (default deputy)",
        )  # fmt: skip
        if action == "show":
            a.add_argument("--json", action="store_true", help="print the state as JSON")
        if action == "create":
            for option in ("requests", "tool-calls", "input-tokens", "output-tokens"):
                a.add_argument(
                    f"--max-{option}", type=_whole_number, default=None, metavar="N",
                    help=f"limit of {option.replace('-', ' ')} (default: not limited)",
                )  # fmt: skip
            a.add_argument(
                "--max-cost-usd", type=_positive, default=None, metavar="USD",
                help="limit of cost in dollars (default: not limited)",
            )  # fmt: skip


def _redis_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--redis",
        default=None,
        metavar="URL",
        help="keep exclusive leases (and --shared-budget) in Redis, e.g. "
        "redis://127.0.0.1:6379/0 (needs the 'redis' extra)",
    )
    p.add_argument(
        "--shared-budget",
        default=None,
        metavar="NAME",
        help="draw every delegation also from the Redis budget NAME, shared by every "
        "process using it, with the limits it was created with (deputy-runtime budget "
        "create NAME); a budget that does not exist is refused",
    )
    p.add_argument(
        "--redis-namespace",
        default=None,
        metavar="NS",
        help="prefix of the Redis keys (default deputy)",
    )


def _otlp_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--otlp",
        default=None,
        metavar="ENDPOINT",
        help="export traces to this OTLP/HTTP URL, e.g. http://localhost:4318/v1/traces "
        "(needs the 'otel' extra, opentelemetry-sdk and the OTLP/HTTP exporter)",
    )


def _port(text: str) -> int:
    """A TCP port, 1 to 65535."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 1 to 65535, got {text!r}")
    return value


def _positive(text: str) -> float:
    """A number above 0."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {text!r}")
    return value


def _whole_number(text: str) -> int:
    """A count of at least 1 (argparse names the option when this raises)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


_INTERRUPTED = 130  # as a shell reports a process ended by SIGINT
_SIGPIPE = 13  # the exit status of a process killed by SIGPIPE is 128 + 13


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``deputy-runtime`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    command = args.command
    module_name, _, function_name = _COMMANDS[command].partition(":")
    try:
        function = getattr(importlib.import_module(module_name), function_name)
        status: int = function(args)
        sys.stdout.flush()
    except KeyboardInterrupt:
        # Ctrl-C before a command installs its own handling (e.g. while Temporal's SDK
        # is imported): one line and the usual status, not a traceback.
        print(f"deputy-runtime {args.command}: interrupted", file=sys.stderr)
        return _INTERRUPTED
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, as Unix tools do.
        silence_stream(sys.stdout)
        return 128 + _SIGPIPE
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
