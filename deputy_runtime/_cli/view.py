"""What ``deputy-runtime run`` shows: a live tree, plain event lines, JSON lines, a summary.

:class:`RunState` folds the lead's event stream into one node per agent run (the lead
plus one per delegation). Three renderers read it: :class:`LiveView` redraws a tree in
place with ANSI escape codes on a terminal, :class:`PlainView` prints one line per event
when the output is not a terminal, and :class:`JsonView` prints every event as one JSON
line and nothing else. :func:`summary_table` renders the per-delegation table printed
at the end. No dependency beyond the standard library: the escape codes are plain ANSI.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import IO, Any, NamedTuple

from ..chat import add_costs
from ..definitions import AgentDefinition
from ..runtime import (
    DELEGATE_TOOL_NAME,
    AgentResult,
    AgentUsage,
    CompactionEnd,
    CompactionStart,
    DelegationEnd,
    DelegationStart,
    Event,
    McpLogEvent,
    McpProgressEvent,
    McpSamplingEvent,
    McpServerEvent,
    ModelRequestEvent,
    ModelResponseEvent,
    QuestionEvent,
    RunStart,
    StopEvent,
    StopReason,
    SubagentRecord,
    ToolEnd,
    ToolStart,
    UsageEvent,
    UsageLimits,
    UsageNode,
    WarningEvent,
    delegation_status,
    encode_event,
    usage_tree,
)
from . import silence_stream

__all__ = [
    "AGENT_COLOUR_CODES",
    "COLUMNS",
    "DROP_ORDER",
    "FrameRow",
    "JsonView",
    "LiveView",
    "Node",
    "PlainView",
    "RunState",
    "definition_colours",
    "fit_frame",
    "summary_table",
    "terminal_size",
    "tree_frame",
    "tree_lines",
]

_ARGS_CHARS = 40
# Frames are never cut narrower than this, however narrow the terminal says it is.
_MIN_WIDTH = 20
# The terminal size when neither the output descriptor nor the environment gives one.
_FALLBACK_SIZE = (100, 24)
# Redraws at most this often; the ticker redraws anyway so elapsed times move.
_MIN_REDRAW_SECONDS = 0.05
_STATUS_COLOURS = {
    "running": "33",  # yellow
    "completed": "32",  # green
    "stopped": "35",  # magenta
    "failed": "31",  # red
    "interrupted": "35",
}
#: An agent definition's ``color`` -> the SGR code its name is drawn in.
AGENT_COLOUR_CODES = {
    "red": "31",
    "green": "32",
    "yellow": "33",
    "blue": "34",
    "magenta": "35",
    "cyan": "36",
    "purple": "38;5;135",
    "orange": "38;5;208",
    "pink": "38;5;213",
}


def definition_colours(definitions: Iterable[AgentDefinition]) -> dict[str, str]:
    """Agent name -> ``color`` of the definitions that have one (for :class:`RunState`)."""
    return {d.name: d.color for d in definitions if d.color is not None}


class Node:
    """One agent run in the tree: the lead, or one delegation's subagent."""

    __slots__ = (
        "agent_name",
        "children",
        "colour",
        "cost_usd",
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
        self.cost_usd: float | None = None  # of its own responses, None while unreported
        self.usage: AgentUsage | None = None  # authoritative once the run settled
        self.last_tool: str | None = None
        self.error: str | None = None
        self.children: list[Node] = []
        self.colour: str | None = None  # the definition's color, if it has one

    def elapsed(self, now: float) -> float:
        """Seconds since the run started (until it ended)."""
        return (self.ended if self.ended is not None else now) - self.started

    def live_requests(self) -> int:
        """Requests so far: the settled usage, else own requests plus children's."""
        if self.usage is not None:
            return self.usage.requests
        return self.requests + sum(c.live_requests() for c in self.children)

    def live_cost(self) -> float | None:
        """Cost so far, counted like :meth:`live_requests` (``None``: none reported)."""
        if self.usage is not None:
            return self.usage.cost_usd
        cost = self.cost_usd
        for child in self.children:
            cost = add_costs(cost, child.live_cost())
        return cost

    def live_tokens(self) -> int:
        """Tokens so far, counted the same way as :meth:`live_requests`."""
        if self.usage is not None:
            return self.usage.total_tokens
        own = self.input_tokens + self.output_tokens
        return own + sum(c.live_tokens() for c in self.children)


class RunState:
    """The lead and its delegations as a tree, updated from events (synchronously).

    ``colours`` maps agent names to their definitions' ``color``: those delegations'
    names are drawn in it.
    """

    def __init__(
        self, clock: Any = time.monotonic, colours: Mapping[str, str] | None = None
    ) -> None:
        self._clock = clock
        self._colours = dict(colours or {})
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
        node.colour = self._colours.get(node.agent_name)
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
        node.cost_usd = add_costs(node.cost_usd, event.cost_usd)
    elif isinstance(event, ToolStart):
        node.last_tool = _call_text(event)
    elif isinstance(event, ToolEnd) and event.error is not None:
        node.last_tool = f"{event.tool_name} failed"
    elif isinstance(event, McpServerEvent):
        node.last_tool = _mcp_text(event)
    elif isinstance(event, McpProgressEvent):
        node.last_tool = _progress_text(event)
    elif isinstance(event, QuestionEvent):
        node.last_tool = "ask_user: waiting for an answer"
    elif isinstance(event, CompactionStart):
        node.last_tool = f"compacting the conversation ({event.strategy})"
    elif isinstance(event, CompactionEnd):
        node.last_tool = _compaction_text(event)
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
    """The lead row's status: a delegation's status, but ``interrupted`` said plainly."""
    if stop_reason == StopReason.INTERRUPTED:
        return "interrupted"
    return str(delegation_status(stop_reason))


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


class FrameRow(NamedTuple):
    """One delegation's line in a live frame, with what :func:`fit_frame` ranks it by."""

    text: str
    running: bool
    admitted: int  # admission order: higher is more recent


def tree_lines(
    state: RunState,
    now: float,
    *,
    colour: bool,
    unicode: bool = True,
    width: int | None = None,
) -> list[str]:
    """The tree as text lines: a header, then one line per node, children indented."""
    head, rows = tree_frame(state, now, colour=colour, unicode=unicode, width=width)
    return [*head, *(row.text for row in rows)]


def tree_frame(
    state: RunState,
    now: float,
    *,
    colour: bool,
    unicode: bool = True,
    width: int | None = None,
) -> tuple[list[str], list[FrameRow]]:
    """The lines always shown (header and lead), and one row per delegation in tree order.

    With a ``width``, columns that do not fit are left out whole, in the order of
    :data:`DROP_ORDER`, rather than every row being cut in the middle of a column.
    """
    lead = state.lead
    if lead is None:
        return ["starting..."], []
    admitted = {id(node): i for i, node in enumerate(state.delegations())}
    cells: list[_Cells] = [_node_cells(lead, "", now)]
    flags: list[tuple[bool, int]] = []
    branches = _UNICODE_BRANCHES if unicode else _ASCII_BRANCHES
    _child_rows(lead, "", now, branches, admitted, cells, flags)
    layout = _layout(cells, width, "\u2026" if unicode else "...")
    header = _format(_HEADER_CELLS, layout, colour=False)
    lines = [_format(c, layout, colour) for c in cells]
    rows = [
        FrameRow(text, running, order)
        for text, (running, order) in zip(lines[1:], flags, strict=True)
    ]
    return [header, lines[0]], rows


def _child_rows(
    node: Node,
    indent: str,
    now: float,
    branches: tuple[str, ...],
    admitted: dict[int, int],
    cells: list[_Cells],
    flags: list[tuple[bool, int]],
) -> None:
    middle, last_branch, line, blank = branches
    for i, child in enumerate(node.children):
        last = i == len(node.children) - 1
        cells.append(_node_cells(child, indent + (last_branch if last else middle), now))
        flags.append((child.status == "running", admitted.get(id(child), -1)))
        _child_rows(
            child, indent + (blank if last else line), now, branches, admitted, cells, flags
        )


# -- columns ------------------------------------------------------------------------------

#: The live tree's columns, left to right.
COLUMNS = ("agent", "status", "elapsed", "requests", "tokens", "cost", "last tool")
#: On a narrow terminal, columns are left out in this order until a row fits; the agent
#: and its status always stay (what is running, and how it ended, matter most).
DROP_ORDER = ("last tool", "cost", "tokens", "elapsed", "requests")
# Widths of the full layout, and the space before each column.
_WIDTHS = {"agent": 19, "status": 24, "elapsed": 7, "requests": 9, "tokens": 9, "cost": 9}
_GAPS = {
    "agent": "",
    "status": " ",
    "elapsed": " ",
    "requests": "  ",
    "tokens": " ",
    "cost": " ",
    "last tool": " ",
}
_RIGHT = frozenset({"elapsed"})
# The last tool column is shown only with at least this many columns for it.
_MIN_LAST_TOOL = 12


class _Cells(NamedTuple):
    """One row's text per column, the colour of its status and of its agent's name
    (which starts ``name_at`` characters into the agent column, after the tree)."""

    values: dict[str, str]
    colour_code: str | None
    name_colour: str | None = None
    name_at: int = 0


_HEADER_CELLS = _Cells({c: c for c in COLUMNS}, None)


class _Layout(NamedTuple):
    columns: tuple[str, ...]
    widths: dict[str, int]
    last_tool_room: int | None = None  # columns left for the last tool, if limited
    ellipsis: str = "\u2026"


def _node_cells(node: Node, prefix: str, now: float) -> _Cells:
    status = node.status
    if node.stop_reason not in (None, "complete") and node.stop_reason != status:
        status = f"{status} ({node.stop_reason})"
    limits = node.limits
    values = {
        "agent": f"{prefix}{_printable(node.agent_name)}",
        "status": status,
        "elapsed": f"{node.elapsed(now):6.1f}s",
        "requests": _budget(node.live_requests(), limits.max_requests if limits else None),
        "tokens": _budget(node.live_tokens(), limits.max_total_tokens if limits else None),
        "cost": _cost(node.live_cost()),
        "last tool": _printable(node.last_tool or ""),
    }
    name_colour = AGENT_COLOUR_CODES.get(node.colour) if node.colour else None
    return _Cells(values, _STATUS_COLOURS.get(node.status, "0"), name_colour, len(prefix))


def _layout(rows: Sequence[_Cells], width: int | None, ellipsis: str) -> _Layout:
    """The columns that fit ``width`` (all of them without one), with their widths.

    The last tool, free text at the end of the row, is cut to the room left (with an
    ellipsis) once it has at least a few columns; every other column is shown whole or
    not at all.
    """
    widths = dict(_WIDTHS)
    columns = list(COLUMNS)
    if width is None:
        return _Layout(tuple(columns), widths)

    def fixed() -> int:
        return sum(len(_GAPS[c]) + widths[c] for c in columns if c != "last tool")

    if fixed() + len(_GAPS["last tool"]) + _MIN_LAST_TOOL > width:
        columns.remove("last tool")
    for column in DROP_ORDER[1:]:
        if fixed() <= width:
            break
        columns.remove(column)
    if fixed() > width:
        # Still too wide: the two kept columns take only what their contents need.
        for column in ("status", "agent"):
            widths[column] = max(len(column), *(_text_columns(r.values[column]) for r in rows))
    room = width - fixed() - len(_GAPS["last tool"]) if "last tool" in columns else None
    return _Layout(tuple(columns), widths, room, ellipsis)


def _format(cells: _Cells, layout: _Layout, colour: bool) -> str:
    out = []
    for column in layout.columns:
        text = cells.values[column]
        if column == "last tool":
            room = layout.last_tool_room
            if room is not None and _text_columns(text) > room:
                text = _clip(text, room - len(layout.ellipsis)) + layout.ellipsis
            out.append(_GAPS[column] + text)
            continue
        pad = " " * max(0, layout.widths[column] - _text_columns(text))
        cell = pad + text if column in _RIGHT else text + pad
        if column == "status" and colour and cells.colour_code is not None:
            cell = f"\x1b[{cells.colour_code}m{cell}\x1b[0m"
        elif column == "agent" and colour and cells.name_colour is not None:
            at = cells.name_at
            cell = f"{text[:at]}\x1b[{cells.name_colour}m{text[at:]}\x1b[0m{pad}"
        out.append(_GAPS[column] + cell)
    return "".join(out).rstrip()


def _text_columns(text: str) -> int:
    return sum(_columns(ch) for ch in text)


def _printable(text: str) -> str:
    """``text`` with control characters replaced by ``?``.

    A newline (from a model-chosen argument name, say) would break the frame's line
    count, and an escape could move the cursor.
    """
    return "".join("?" if unicodedata.category(ch) == "Cc" else ch for ch in text)


def fit_frame(
    head: Sequence[str], rows: Sequence[FrameRow], height: int, width: int, *, unicode: bool = True
) -> list[str]:
    """The frame cut to fit a terminal ``height`` rows tall and ``width`` columns wide.

    At most ``height - 1`` lines, so writing the frame (a newline after every line) never
    scrolls the screen: a cursor move up cannot go above the top, and a frame that scrolled
    would be drawn again below its own copy instead of over it. When the delegations do
    not all fit, the running ones are kept first, then the most recently admitted, in tree
    order, and one line says how many are hidden. Every line is cut to ``width`` columns,
    because a terminal that wraps a long line breaks the line count the redraw relies on.
    In a terminal too short for even that (under 4 rows), the lead comes first, then the
    hidden-count line, then the header.
    """
    budget = max(1, height - 1)
    lines = [*head, *(row.text for row in rows)]
    if len(lines) > budget:
        lines = _cut_rows(list(head), rows, budget, "\u2026" if unicode else "...")
    return [_clip(line, width) for line in lines]


def _cut_rows(head: list[str], rows: Sequence[FrameRow], budget: int, ellipsis: str) -> list[str]:
    room = max(0, budget - len(head) - 1)  # one line for the "N more" note
    ranked = sorted(range(len(rows)), key=lambda i: (not rows[i].running, -rows[i].admitted))
    shown = sorted(ranked[:room])
    hidden = [rows[i] for i in ranked[room:]]
    running = sum(1 for row in hidden if row.running)
    noun = "delegation" if len(hidden) == 1 else "delegations"
    note = f"{ellipsis} {len(hidden)} more {noun} ({running} running)"
    if len(head) + 1 > budget:  # too short for the header, the lead and the note
        return [head[-1], note, head[0]][:budget] if len(head) > 1 else head[:budget]
    return [*head, *(rows[i].text for i in shown), note]


class LiveView:
    """Redraws the tree in place on a terminal (ANSI cursor movement, no dependencies).

    ``size`` returns the terminal's ``(columns, lines)``; it is read at every draw, so a
    resized terminal gets frames that fit it. The default asks the output stream's file
    descriptor.
    """

    def __init__(
        self,
        stream: IO[str],
        state: RunState,
        *,
        colour: bool | None = None,
        size: Callable[[], tuple[int, int]] | None = None,
    ) -> None:
        self._stream = stream
        self._state = state
        self._colour = colour if colour is not None else "NO_COLOR" not in os.environ
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
        self._unicode = encoding == "utf8"
        self._size = size if size is not None else (lambda: terminal_size(stream))
        self._drawn = 0  # lines of the previous frame, to move back over
        self._last_draw = 0.0
        self._closed = False
        self._held = False
        self.on_closed: Callable[[], None] | None = None  # called once if the reader leaves

    def hold(self) -> None:
        """Stop redrawing (events are still folded in), e.g. while a prompt owns the
        terminal; :meth:`resume` draws again below whatever was written meanwhile."""
        self.draw()
        self._held = True

    def resume(self) -> None:
        """Draw again after :meth:`hold`, a fresh frame below the text written since."""
        self._held = False
        self._drawn = 0
        self.draw()

    def handle(self, event: Event) -> None:
        """Fold an event in and redraw (at most every few hundredths of a second)."""
        self._state.apply(event)
        milestone = isinstance(event, DelegationStart | DelegationEnd | StopEvent | RunStart)
        if milestone or self._state.now() - self._last_draw >= _MIN_REDRAW_SECONDS:
            self.draw()

    def draw(self) -> None:
        """Replace the previous frame with the current tree, cut to fit the terminal."""
        if self._closed or self._held:
            return
        columns, rows = self._size()
        # One column spare: some terminals wrap as soon as the last column is written.
        width = max(_MIN_WIDTH, columns - 1)
        head, tree = tree_frame(
            self._state,
            self._state.now(),
            colour=self._colour,
            unicode=self._unicode,
            width=width,
        )
        lines = fit_frame(head, tree, rows, width, unicode=self._unicode)
        out = ["\x1b[?25l"]  # hide the cursor while drawing
        if self._drawn:
            out.append(f"\x1b[{self._drawn}F")  # to the start of the previous frame
        for line in lines:
            out.append("\x1b[2K" + line + "\n")
        out.append("\x1b[J")  # clear whatever the previous frame left below
        if not _write(self._stream, "".join(out)):
            self._closed = True
            _notify(self.on_closed)
        self._drawn = len(lines)
        self._last_draw = self._state.now()

    def close(self) -> None:
        """Draw the final frame and give the cursor back."""
        self._held = False
        self.draw()
        if not self._closed:
            self._closed = True
            _write(self._stream, "\x1b[?25h")


def terminal_size(stream: IO[Any]) -> tuple[int, int]:
    """``(columns, lines)`` of the terminal ``stream`` writes to.

    The descriptor's own size comes first: ``COLUMNS``/``LINES`` in the environment are
    often stale exports that a resize does not update. Without one (not a descriptor, or
    a pseudo-terminal nobody gave a size, which reports 0x0) the environment, then
    100x24, as :func:`shutil.get_terminal_size` does.
    """
    try:
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, OSError, ValueError):
        size = None
    if size is None or size.columns <= 0 or size.lines <= 0:
        size = shutil.get_terminal_size(_FALLBACK_SIZE)
    return size.columns, size.lines


def _clip(line: str, width: int) -> str:
    """``line`` cut to ``width`` terminal columns.

    Colour codes take no columns; East Asian wide characters take two and combining marks
    none, so a cut line never wraps (a wrapped line breaks the cursor arithmetic).
    """
    visible = 0
    out = []
    coloured = False
    i = 0
    while i < len(line):
        if line[i] == "\x1b":
            end = line.find("m", i)
            if end != -1:
                out.append(line[i : end + 1])
                coloured = True
                i = end + 1
                continue
        columns = _columns(line[i])
        if visible + columns > width:
            if coloured:
                out.append("\x1b[0m")  # a cut may fall inside a colour
            break
        out.append(line[i])
        visible += columns
        i += 1
    return "".join(out)


def _columns(ch: str) -> int:
    if unicodedata.combining(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


# -- plain lines and JSON lines ----------------------------------------------------------


class PlainView:
    """One line per interesting event, for logs and pipes (no escape codes)."""

    def __init__(self, stream: IO[str], state: RunState) -> None:
        self._stream = stream
        self._state = state
        self._closed = False
        self.on_closed: Callable[[], None] | None = None  # called once if the reader leaves

    def handle(self, event: Event) -> None:
        """Fold an event in and print its line, if it has one."""
        node = self._state.apply(event)
        text = plain_line(event, node)
        if text is not None and not self._closed:
            elapsed = self._state.now() - self._state.started
            if not _write(self._stream, f"[{elapsed:7.2f}s] {text}\n"):
                self._closed = True
                _notify(self.on_closed)

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
    if isinstance(event, QuestionEvent):
        asked = "; ".join(str(q.get("question", "")) for q in event.questions)
        return f"{who}: asks the user [{event.question_id}]: {_one_line(asked, 200)}"
    if isinstance(event, McpServerEvent):
        return f"{who}: {_mcp_text(event)}"
    if isinstance(event, CompactionEnd):
        return f"{who}: {_compaction_text(event)}"
    if isinstance(event, McpLogEvent) and event.level not in _QUIET_LOG_LEVELS:
        logger = f" {event.logger}" if event.logger else ""
        return f"{who}: mcp {event.server}{logger} {event.level}: {_one_line(event.data, 200)}"
    if isinstance(event, McpSamplingEvent) and event.error is not None:
        # Answered requests are in the usage (and --json); a refusal is worth a line.
        return f"{who}: mcp {event.server} sampling refused: {_one_line(event.error, 200)}"
    if isinstance(event, DelegationEnd):
        return (
            f"{who}: delegation {event.status} ({event.stop_reason}) "
            f"[{_short_id(event.delegation_id)}] {_usage_text(event.usage)}"
            + (f": {_one_line(event.error)}" if event.error else "")
        )
    if isinstance(event, StopEvent) and event.delegation_id is None:
        return f"{who}: run ended ({event.stop_reason}) {_usage_text(event.usage)}"
    return None


# Server log messages below warning stay out of the plain log (they are in --json).
_QUIET_LOG_LEVELS = frozenset({"debug", "info", "notice"})


def _compaction_text(event: CompactionEnd) -> str:
    """One line for a finished compaction: its sizes, requests and any early stop."""
    text = (
        f"compacted ({event.strategy}): ~{event.tokens_before} -> ~{event.tokens_after} "
        f"tokens, {event.turns_before} -> {event.turns_after} turns, "
        f"{event.requests} request{'s' if event.requests != 1 else ''}"
    )
    return text + (f": {_one_line(event.error)}" if event.error else "")


def _progress_text(event: McpProgressEvent) -> str:
    """One bounded line for a running MCP call's progress."""
    done = f"{event.progress:g}" + (f"/{event.total:g}" if event.total is not None else "")
    message = f" {_one_line(event.message, 60)}" if event.message else ""
    return f"{event.title or event.tool} {done}{message}"


def _mcp_text(event: McpServerEvent) -> str:
    """One bounded line for an MCP server's start or stop (never its stderr output)."""
    pid = f"pid {event.pid}, " if event.pid is not None else ""
    if event.action == "start":
        return f"mcp server {event.server} started ({pid}{event.duration:.2f}s)"
    how = event.kind or "stopped"
    error = f": {_one_line(event.error, 80)}" if event.error else ""
    return f"mcp server {event.server} stopped ({pid}{how} after {event.duration:.1f}s){error}"


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
        self._closed = False
        self.on_closed: Callable[[], None] | None = None  # called once if the reader leaves

    def handle(self, event: Event) -> None:
        """Fold the event in (for the exit status) and write its JSON line."""
        self._state.apply(event)
        if not self._closed and not _write(self._stream, encode_event(event) + b"\n"):
            self._closed = True
            _notify(self.on_closed)

    def close(self) -> None:
        """Nothing to restore (every line is flushed as it is written)."""


def _notify(callback: Callable[[], None] | None) -> None:
    """Tell the command the reader went away; the event sink itself must never raise."""
    if callback is not None:
        with contextlib.suppress(Exception):
            callback()


def _write(stream: IO[Any], data: Any) -> bool:
    """Write and flush; on a closed pipe (``| head``) go quiet instead of failing the run.

    The event sink runs inside the agents' tasks, so it must never raise.
    """
    try:
        stream.write(data)
        stream.flush()
        return True
    except (BrokenPipeError, ValueError):
        silence_stream(stream)
        return False


# -- the summary --------------------------------------------------------------------------


def summary_table(records: Sequence[SubagentRecord], result: AgentResult | None) -> str:
    """The run's cost tree as a table: the lead's own row, one row per delegation
    (nested ones indented under their parent), then the total.

    Each row shows what that run used itself (requests, tokens, cost), so the rows add
    up to the total, which is the lead run's usage (delegations included).
    """
    header = ("delegation", "agent", "status", "stop reason", "requests", "tokens", "cost")
    rows: list[tuple[str, ...]] = []
    nodes: list[tuple[int, UsageNode | None, SubagentRecord]]
    if result is None:
        nodes = [(1, None, r) for r in records]
        tree = None
    else:
        tree = usage_tree(result, records)
        by_id = {r.delegation_id: r for r in records}
        nodes = [
            (depth, node, by_id[node.delegation_id])
            for depth, node in tree.walk()
            if node.delegation_id is not None
        ]
        own = tree.own
        rows.append(
            (
                "-",
                _printable(result.agent_name or "lead"),
                "-",
                str(result.stop_reason),
                _limit_text(own.requests, None),
                str(own.total_tokens),
                _cost(own.cost_usd),
            )
        )
    for depth, node, r in nodes:
        used = node.own if node is not None else r.usage
        rows.append(
            (
                _short_id(r.delegation_id),
                "  " * (depth - 1) + r.agent_name,
                str(r.status),
                str(r.stop_reason or "-"),
                _limit_text(used.requests, r.limits.max_requests if r.limits else None),
                str(used.total_tokens),
                _cost(used.cost_usd),
            )
        )
    if not records:
        rows.append(("(none)", "", "", "", "", "", ""))
    if tree is not None:
        total = tree.subtree
        rows.append(
            (
                "total",
                "lead + subagents",
                "",
                "",
                str(total.requests),
                str(total.total_tokens),
                _cost(total.cost_usd),
            )
        )
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
