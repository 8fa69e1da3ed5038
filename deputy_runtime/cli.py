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
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="deputy-runtime",
        description="Run a lead agent that delegates to subagents built from definitions.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("validate", help="check definition files (YAML and markdown)")
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or directories")

    p = sub.add_parser("list", help="list the definitions in a directory")
    p.add_argument("directory", nargs="?", default=".deputy/agents", metavar="DIR")

    sub.add_parser("schema", help="print the JSON Schema of definition format v1")

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
    p.add_argument("task", metavar="TASK")
    p.add_argument("--agents", default=".deputy/agents", metavar="DIR")
    p.add_argument("--model", default=None, metavar="SPEC", help='e.g. "openai/gpt-4.1-mini"')
    p.add_argument(
        "--permission-mode",
        default="standard",
        choices=PERMISSION_MODES,
    )
    p.add_argument("--max-requests", type=int, default=25, metavar="N")
    p.add_argument("--json", action="store_true", help="print the event stream as JSON lines")
    p.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="import a module or .py file first (e.g. to register_provider a custom model)",
    )
    p.add_argument("--backend", default="asyncio", choices=["asyncio", "trio"])

    p = sub.add_parser("bench", help="measure delegation overhead against a bare floor")
    p.add_argument("--quick", action="store_true", help="small sizes, few repetitions")
    p.add_argument("--json", action="store_true", help="print results as JSON")
    return parser


_SIGPIPE = 13  # the exit status of a process killed by SIGPIPE is 128 + 13


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``deputy-runtime`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    module_name, _, function_name = _COMMANDS[args.command].partition(":")
    function = getattr(importlib.import_module(module_name), function_name)
    try:
        status: int = function(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, as Unix tools do.
        silence_stream(sys.stdout)
        return 128 + _SIGPIPE
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
