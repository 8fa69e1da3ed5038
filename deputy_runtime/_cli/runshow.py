"""How ``run`` shows a run and ends, in-process or on Temporal alike.

The view (JSON lines with ``--json``, the live tree on a terminal, plain lines
otherwise), the summary printed after the run, and the exit status are chosen here, so
``run`` and ``run --temporal`` print the same things and exit with the same status for
the same outcome.

Exit status: 0 the lead completed; 1 it failed (a provider or runtime error); 2 bad
arguments; 3 it stopped early (a limit or a hook); 4 it completed but delegated and no
delegation completed (its answer rests on nothing a subagent produced); 130 interrupted.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Sequence
from typing import BinaryIO, TextIO

from ..runtime import AgentResult, DelegationStatus, StopReason, SubagentRecord
from .view import JsonView, LiveView, PlainView, RunState, summary_table

__all__ = ["Exit", "View", "exit_status", "open_view", "print_summary"]


class Exit(enum.IntEnum):
    """The exit statuses of ``run`` (see the module docstring)."""

    OK = 0
    FAILED = 1
    USAGE = 2
    STOPPED = 3
    NO_DELEGATION_COMPLETED = 4
    INTERRUPTED = 130
    READER_GONE = 128 + 13  # as if killed by SIGPIPE, like Unix tools in a pipeline


#: The three ways a run is shown.
View = JsonView | LiveView | PlainView


def open_view(as_json: bool, state: RunState, out: TextIO | None = None) -> View:
    """JSON lines with ``--json``, the live tree on a terminal, plain lines otherwise."""
    stream = out if out is not None else sys.stdout
    if as_json:
        buffer: BinaryIO = stream.buffer
        return JsonView(buffer, state)
    if stream.isatty():
        return LiveView(stream, state)
    return PlainView(stream, state)


def print_summary(
    records: Sequence[SubagentRecord], result: AgentResult | None, interrupted: bool
) -> None:
    """The table of delegations, their problems, and the lead's stop and answer."""
    out = sys.stdout
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
        finished = sum(1 for r in records if r.status == DelegationStatus.COMPLETED)
        out.write(
            f"\nInterrupted: {finished} of {len(records)} delegations had completed; "
            "running ones were stopped and their resources cleaned up.\n"
        )
    if result is not None:
        if result.error:
            out.write(f"\nError: {result.error}\n")
        if result.stop_reason != StopReason.COMPLETE:
            out.write(f"\nStopped: {result.stop_reason}\n")
        if result.response:
            out.write("\nAnswer:\n" + result.response.rstrip() + "\n")
    out.flush()


def exit_status(
    result: AgentResult | None,
    records: Sequence[SubagentRecord],
    interrupted: bool,
    prog: str = "deputy-runtime run",
) -> Exit:
    """The exit status for how the run ended (says why on stderr for status 4)."""
    if interrupted:
        return Exit.INTERRUPTED
    if result is None or result.stop_reason in (StopReason.ERROR, StopReason.PROVIDER_ERROR):
        return Exit.FAILED
    if result.stop_reason != StopReason.COMPLETE:
        return Exit.STOPPED
    if records and all(r.status != DelegationStatus.COMPLETED for r in records):
        print(f"{prog}: every delegation failed or stopped; none completed", file=sys.stderr)
        return Exit.NO_DELEGATION_COMPLETED
    return Exit.OK
