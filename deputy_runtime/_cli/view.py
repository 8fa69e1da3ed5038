"""What ``deputy-runtime run`` shows: a live tree, plain event lines, JSON lines, a summary.

:class:`RunState` folds the lead's event stream into one node per agent run (the lead
plus one per delegation). Three renderers read it: :class:`LiveView` redraws a tree in
place with ANSI escape codes on a terminal, :class:`PlainView` prints one line per event
when the output is not a terminal, and :class:`JsonView` prints every event as one JSON
line and nothing else. :func:`summary_table` renders the per-delegation table printed
at the end. No dependency beyond the standard library: the escape codes are plain ANSI.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Sequence
from typing import IO, Any

from ..runtime._delegation import SubagentRecord
from ..runtime._events import (
    DelegationEnd,
    DelegationStart,
    Event,
    ModelRequestEvent,
    ModelResponseEvent,
    RunStart,
    StopEvent,
    ToolEnd,
    ToolStart,
    UsageEvent,
    WarningEvent,
    encode_event,
)
from ..runtime._permissions import DELEGATE_TOOL_NAME
from ..runtime._usage import AgentUsage, UsageLimits

__all__ = ["JsonView", "LiveView", "Node", "PlainView", "RunState", "summary_table"]

_ARGS_CHARS = 40
# Redraws at most this often; the ticker redraws anyway so elapsed times move.
_MIN_REDRAW_SECONDS = 0.05
_STATUS_COLOURS = {
    "running": "33",  # yellow
    "completed": "32",  # green
    "stopped": "35",  # magenta
    "failed": "31",  # red
    "interrupted": "35",
}


class Node:
    """One agent run in the tree: the lead, or one delegation's subagent."""

    __slots__ = (
        "agent_name",
        "children",
        "delegation_id",
        "ended",
        "error",
        "input_tokens",
        "last_tool",
        "limits",
        "output_tokens",
        "requests",
        "started",
        "status",
        "stop_reason",
        "usage",
    )

    def __init__(self, agent_name: str, delegation_id: str | None, started: float) -> None:
        self.agent_name = agent_name
        self.delegation_id = delegation_id
        self.started = started
        self.ended: float | None = None
        self.status = "running"
        self.stop_reason: str | None = None
        self.limits: UsageLimits | None = None
        self.requests = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.usage: AgentUsage | None = None  # authoritative once the run settled
        self.last_tool: str | None = None
        self.error: str | None = None
        self.children: list[Node] = []

    def elapsed(self, now: float) -> float:
        """Seconds since the run started (until it ended)."""
        return (self.ended if self.ended is not None else now) - self.started

    def live_requests(self) -> int:
        """Requests so far: the settled usage, else own requests plus children's."""
        if self.usage is not None:
            return self.usage.requests
        return self.requests + sum(c.live_requests() for c in self.children)

    def live_tokens(self) -> int:
        """Tokens so far, counted the same way as :meth:`live_requests`."""
        if self.usage is not None:
            return self.usage.total_tokens
        own = self.input_tokens + self.output_tokens
        return own + sum(c.live_tokens() for c in self.children)


class RunState:
    """The lead and its delegations as a tree, updated from events (synchronously)."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self._clock = clock
        self.started = clock()
        self.lead: Node | None = None
        self.nodes: dict[str, Node] = {}  # delegation_id (or "lead") -> node
        self._by_agent: dict[str, Node] = {}  # agent_id -> node, for parent lookups
        self.events = 0

    def now(self) -> float:
        """The state's clock (monotonic seconds)."""
        return float(self._clock())

    def node_for(self, event: Event) -> Node | None:
        """The node an event belongs to (``None`` before the lead's RunStart)."""
        key = event.delegation_id or "lead"
        return self.nodes.get(key)

    def apply(self, event: Event) -> Node | None:
        """Fold one event into the tree; returns the node it touched."""
        self.events += 1
        now = self.now()
        if isinstance(event, RunStart) and event.delegation_id is None:
            if self.lead is None:
                self.lead = Node(event.agent_name or "lead", None, now)
                self.nodes["lead"] = self.lead
                self._by_agent[event.agent_id] = self.lead
            self.lead.limits = event.limits
            return self.lead
        if isinstance(event, DelegationStart):
            return self._start_delegation(event, now)
        node = self.node_for(event)
        if node is None and isinstance(event, DelegationEnd):
            node = self._start_delegation(event, now)  # failed in setup: it never started
        if node is None:
            return None
        _update(node, event, now)
        return node

    def _start_delegation(self, event: DelegationStart | DelegationEnd, now: float) -> Node:
        assert event.delegation_id is not None
        node = Node(event.agent_name or "subagent", event.delegation_id, now)
        if isinstance(event, DelegationStart):
            node.limits = event.limits
        self.nodes[event.delegation_id] = node
        self._by_agent[event.agent_id] = node
        parent = self._by_agent.get(event.parent_agent_id or "") or self.lead
        if parent is not None:
            parent.children.append(node)
        return node

    def delegations(self) -> list[Node]:
        """Every delegation node in admission order."""
        return [n for k, n in self.nodes.items() if k != "lead"]


def _update(node: Node, event: Event, now: float) -> None:
    if isinstance(event, ModelRequestEvent):
        node.requests = max(node.requests, event.index)
    elif isinstance(event, ModelResponseEvent):
        node.input_tokens += event.input_tokens
        node.output_tokens += event.output_tokens
    elif isinstance(event, ToolStart):
        node.last_tool = _call_text(event)
    elif isinstance(event, ToolEnd) and event.error is not None:
        node.last_tool = f"{event.tool_name} failed"
    elif isinstance(event, UsageEvent) and event.delegation_id is None:
        node.usage = event.usage
    elif isinstance(event, StopEvent):
        if event.delegation_id is None:
            node.usage = event.usage
            node.status = _status_of(event.stop_reason)
            node.stop_reason = event.stop_reason
            node.error = event.error
            node.ended = now
    elif isinstance(event, DelegationEnd):
        node.usage = event.usage
        node.status = event.status
        node.stop_reason = event.stop_reason
        node.error = event.error
        node.ended = now


def _status_of(stop_reason: str) -> str:
    if stop_reason == "complete":
        return "completed"
    if stop_reason in ("error", "provider_error"):
        return "failed"
    return "interrupted" if stop_reason == "interrupted" else "stopped"


def _call_text(event: ToolStart) -> str:
    """``tool(arguments)`` shortened; a delegation shows only the agent it goes to."""
    arguments = event.arguments
    if event.tool_name == DELEGATE_TOOL_NAME and "agent_name" in arguments:
        return f"{event.tool_name}({arguments['agent_name']})"
    joined = ", ".join(f"{key}={value!r}" for key, value in arguments.items())
    if len(joined) > _ARGS_CHARS:
        joined = joined[: _ARGS_CHARS - 3] + "..."
    return f"{event.tool_name}({joined})"


def _budget(used: int, limit: int | None) -> str:
    return f"{used}/{limit}" if limit is not None else str(used)


def _short_id(value: str | None) -> str:
    if not value:
        return ""
    prefix, _, hex_part = value.partition("_")
    return f"{prefix}_{hex_part[:8]}" if hex_part else value


# -- the live tree -------------------------------------------------------------------------


# Tree branches: (middle child, last child, continuing line, blank) per character set.
_UNICODE_BRANCHES = ("├─ ", "└─ ", "│  ", "   ")
_ASCII_BRANCHES = ("|- ", "`- ", "|  ", "   ")


def tree_lines(state: RunState, now: float, *, colour: bool, unicode: bool = True) -> list[str]:
    """The tree as text lines: a header, then one line per node, children indented."""
    lead = state.lead
    if lead is None:
        return ["starting..."]
    header = f"{'agent':<19} {'status':<24} {'elapsed':>7}  {'requests':<9} {'tokens':<9} last tool"
    lines = [header, _node_line(lead, "", now, colour)]
    branches = _UNICODE_BRANCHES if unicode else _ASCII_BRANCHES
    _child_lines(lead, "", now, colour, branches, lines)
    return lines


def _child_lines(
    node: Node, indent: str, now: float, colour: bool, branches: tuple[str, ...], out: list[str]
) -> None:
    middle, last_branch, line, blank = branches
    for i, child in enumerate(node.children):
        last = i == len(node.children) - 1
        out.append(_node_line(child, indent + (last_branch if last else middle), now, colour))
        _child_lines(child, indent + (blank if last else line), now, colour, branches, out)


def _node_line(node: Node, prefix: str, now: float, colour: bool) -> str:
    status = node.status
    if node.stop_reason not in (None, "complete") and node.stop_reason != status:
        status = f"{status} ({node.stop_reason})"
    badge = f"{status:<24}"
    if colour:
        badge = f"\x1b[{_STATUS_COLOURS.get(node.status, '0')}m{badge}\x1b[0m"
    limits = node.limits
    requests = _budget(node.live_requests(), limits.max_requests if limits else None)
    tokens = _budget(node.live_tokens(), limits.max_total_tokens if limits else None)
    name = f"{prefix}{node.agent_name}"
    return (
        f"{name:<19} {badge} {node.elapsed(now):6.1f}s  {requests:<9} {tokens:<9} "
        f"{node.last_tool or ''}"
    ).rstrip()


class LiveView:
    """Redraws the tree in place on a terminal (ANSI cursor movement, no dependencies)."""

    def __init__(self, stream: IO[str], state: RunState, *, colour: bool | None = None) -> None:
        self._stream = stream
        self._state = state
        self._colour = colour if colour is not None else "NO_COLOR" not in os.environ
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
        self._unicode = encoding == "utf8"
        self._drawn = 0  # lines of the previous frame, to move back over
        self._last_draw = 0.0
        self._closed = False

    def handle(self, event: Event) -> None:
        """Fold an event in and redraw (at most every few hundredths of a second)."""
        self._state.apply(event)
        milestone = isinstance(event, DelegationStart | DelegationEnd | StopEvent | RunStart)
        if milestone or self._state.now() - self._last_draw >= _MIN_REDRAW_SECONDS:
            self.draw()

    def draw(self) -> None:
        """Replace the previous frame with the current tree."""
        if self._closed:
            return
        width = max(20, shutil.get_terminal_size((100, 24)).columns - 1)
        lines = tree_lines(
            self._state, self._state.now(), colour=self._colour, unicode=self._unicode
        )
        out = ["\x1b[?25l"]  # hide the cursor while drawing
        if self._drawn:
            out.append(f"\x1b[{self._drawn}F")  # to the start of the previous frame
        for line in lines:
            out.append("\x1b[2K" + _clip(line, width) + "\n")
        out.append("\x1b[J")  # clear whatever the previous frame left below
        if not _write(self._stream, "".join(out)):
            self._closed = True
        self._drawn = len(lines)
        self._last_draw = self._state.now()

    def close(self) -> None:
        """Draw the final frame and give the cursor back."""
        self.draw()
        if not self._closed:
            self._closed = True
            _write(self._stream, "\x1b[?25h")


def _clip(line: str, width: int) -> str:
    # Wrapped lines would break the cursor arithmetic; colour codes do not take columns.
    visible = 0
    out = []
    i = 0
    while i < len(line):
        if line[i] == "\x1b":
            end = line.find("m", i)
            if end != -1:
                out.append(line[i : end + 1])
                i = end + 1
                continue
        if visible >= width:
            out.append("\x1b[0m")
            break
        out.append(line[i])
        visible += 1
        i += 1
    return "".join(out)


# -- plain lines and JSON lines ----------------------------------------------------------


class PlainView:
    """One line per interesting event, for logs and pipes (no escape codes)."""

    def __init__(self, stream: IO[str], state: RunState) -> None:
        self._stream = stream
        self._state = state

    def handle(self, event: Event) -> None:
        """Fold an event in and print its line, if it has one."""
        node = self._state.apply(event)
        text = plain_line(event, node)
        if text is not None:
            elapsed = self._state.now() - self._state.started
            _write(self._stream, f"[{elapsed:7.2f}s] {text}\n")

    def close(self) -> None:
        """Nothing to restore."""


def plain_line(event: Event, node: Node | None) -> str | None:
    """The plain-text line for ``event``, or ``None`` for events not worth a line."""
    who = event.agent_name or "agent"
    if isinstance(event, RunStart):
        if event.delegation_id is not None:
            return None  # the delegation_start line already said it
        return f"{who}: run started (requests {_budget(0, event.limits.max_requests)})"
    if isinstance(event, DelegationStart):
        limit = event.limits.max_requests if event.limits else None
        return (
            f"{who}: delegation started [{_short_id(event.delegation_id)}] "
            f"(requests {_budget(0, limit)}): {_one_line(event.task)}"
        )
    if isinstance(event, ModelRequestEvent):
        return f"{who}: model request #{event.index} ({event.model})"
    if isinstance(event, ToolStart):
        if event.tool_name == DELEGATE_TOOL_NAME:
            return None  # the delegation_start line says it better
        return f"{who}: tool {_call_text(event)}"
    if isinstance(event, ToolEnd) and event.error is not None:
        return f"{who}: tool {event.tool_name} failed: {_one_line(event.error)}"
    if isinstance(event, WarningEvent):
        return f"{who}: warning: {_one_line(event.message)}"
    if isinstance(event, DelegationEnd):
        return (
            f"{who}: delegation {event.status} ({event.stop_reason}) "
            f"[{_short_id(event.delegation_id)}] {_usage_text(event.usage)}"
            + (f": {_one_line(event.error)}" if event.error else "")
        )
    if isinstance(event, StopEvent) and event.delegation_id is None:
        return f"{who}: run ended ({event.stop_reason}) {_usage_text(event.usage)}"
    return None


def _one_line(text: str, limit: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _usage_text(usage: AgentUsage) -> str:
    return f"{usage.requests} requests, {usage.total_tokens} tokens"


class JsonView:
    """Every event as one JSON line (``encode_event``) on a binary stream; nothing else."""

    def __init__(self, stream: IO[bytes], state: RunState) -> None:
        self._stream = stream
        self._state = state

    def handle(self, event: Event) -> None:
        """Fold the event in (for the exit status) and write its JSON line."""
        self._state.apply(event)
        _write(self._stream, encode_event(event) + b"\n")

    def close(self) -> None:
        """Nothing to restore (every line is flushed as it is written)."""


def _write(stream: IO[Any], data: Any) -> bool:
    """Write and flush; on a closed pipe (``| head``) go quiet instead of failing the run.

    The event sink runs inside the agents' tasks, so it must never raise.
    """
    try:
        stream.write(data)
        stream.flush()
        return True
    except (BrokenPipeError, ValueError):
        # Point the descriptor at /dev/null so the interpreter's final flush is quiet too.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass
        return False


# -- the summary --------------------------------------------------------------------------


def summary_table(records: Sequence[SubagentRecord], lead_usage: AgentUsage | None) -> str:
    """Per delegation: agent, status, stop reason, requests, tokens, cost; then the total."""
    header = ("delegation", "agent", "status", "stop reason", "requests", "tokens", "cost")
    rows = [
        (
            _short_id(r.delegation_id),
            r.agent_name,
            r.status,
            r.stop_reason or "-",
            _limit_text(r.usage.requests, r.limits.max_requests if r.limits else None),
            str(r.usage.total_tokens),
            _cost(r.usage.cost_usd),
        )
        for r in records
    ]
    if lead_usage is not None:
        rows.append(
            (
                "total",
                "lead + subagents",
                "",
                "",
                str(lead_usage.requests),
                str(lead_usage.total_tokens),
                _cost(lead_usage.cost_usd),
            )
        )
    if not records:
        rows.insert(0, ("(none)", "", "", "", "", "", ""))
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    numeric = {4, 5, 6}

    def fmt(row: Sequence[str]) -> str:
        cells = [
            c.rjust(w) if i in numeric else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    rule = "  ".join("-" * w for w in widths)
    lines = [fmt(header), rule, *(fmt(r) for r in rows)]
    return "\n".join(lines)


def _limit_text(used: int, limit: int | None) -> str:
    return f"{used}/{limit}" if limit is not None else str(used)


def _cost(cost: float | None) -> str:
    return "-" if cost is None else f"${cost:.4f}"
