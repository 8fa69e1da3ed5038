"""On a narrow terminal the live tree leaves whole columns out instead of cutting rows.

The tree comes from a real lead run (offline ``scripted`` provider, both anyio backends)
that delegates to agents with long names; it is drawn at several widths. At each width
the header names exactly the columns every row shows, each shown cell is whole (a number
is never cut in half), the columns left out are a prefix of ``DROP_ORDER``, and no line
is wider than the terminal.
"""

from __future__ import annotations

import io
import re
import unicodedata

import pytest

from deputy_runtime import LeadAgent, UsageLimits, agent_definition, chat
from deputy_runtime._cli.view import COLUMNS, DROP_ORDER, LiveView, RunState, tree_lines
from deputy_runtime.chat import reply, tool_call, tool_calls

pytestmark = pytest.mark.anyio

_NAMES = ["researcher", "code_reviewer", "summarizer"]
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_CELL = {
    "elapsed": re.compile(r"^\d+\.\ds$"),
    "requests": re.compile(r"^\d+(/\d+)?$"),
    "tokens": re.compile(r"^\d+(/\d+)?$"),
    "status": re.compile(r"^(running|completed|stopped|failed|interrupted)( \(\w+\))?$"),
}
WIDTHS = [160, 100, 86, 80, 70, 60, 50, 40, 30]


async def _state() -> RunState:
    calls = [("delegate_to_agent", {"agent_name": n, "task": f"job {n}"}) for n in _NAMES]
    script: dict[str, list[object]] = {"lead": [tool_calls(*calls), reply("all done")]}
    for name in _NAMES:
        script[name] = [tool_call("lookup", {"query": "x" * 30}), reply(f"{name} answer")]
    definitions = [agent_definition(n, "A.", "A.", max_requests=3) for n in _NAMES]
    lead = LeadAgent(
        chat("scripted", script=script), definitions, usage_limits=UsageLimits(max_requests=20)
    )
    state = RunState()
    async for event in lead.run_stream("Do the jobs"):
        state.apply(event)
    return state


def _width(line: str) -> int:
    return sum(
        0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1
        for ch in _ANSI.sub("", line)
    )


def _shown(header: str) -> list[str]:
    return [c for c in COLUMNS if re.search(rf"(^|\s){re.escape(c)}(\s|$)", header)]


def _cells(line: str, header: str, shown: list[str]) -> dict[str, str]:
    """Cut ``line`` at the header's column starts (elapsed is exactly its header's width)."""
    starts = [header.index(c) for c in shown]
    ends = [*starts[1:], None]
    return {c: line[s:e].strip() for c, s, e in zip(shown, starts, ends, strict=True)}


async def test_narrow_terminals_drop_whole_columns_in_priority_order() -> None:
    state = await _state()
    previous: list[str] = list(COLUMNS)
    seen_layouts = set()
    for width in WIDTHS:
        lines = tree_lines(state, state.now(), colour=False, width=width)
        header, rows = lines[0], lines[1:]
        shown = _shown(header)
        seen_layouts.add(tuple(shown))
        assert shown[:2] == ["agent", "status"], (width, header)
        dropped = {c for c in COLUMNS if c not in shown}
        assert dropped == set(DROP_ORDER[: len(dropped)]), (width, dropped)
        assert set(shown) <= set(previous)  # narrower never brings a column back
        previous = shown
        assert len(rows) == 1 + len(_NAMES)
        for line in lines:
            assert _width(line) <= width, (width, line)
        for row in rows:
            cells = _cells(row, header, shown)
            for column, pattern in _CELL.items():
                if column in shown:
                    assert pattern.match(cells[column]), (width, column, row)
    # Every stage of the degradation was exercised, from all columns to agent + status.
    assert (*COLUMNS,) in seen_layouts
    assert ("agent", "status") in seen_layouts
    assert len(seen_layouts) == len(DROP_ORDER) + 1


async def test_the_live_view_uses_the_terminal_width() -> None:
    state = await _state()
    for width in (120, 64, 36):
        out = io.StringIO()

        def size(width: int = width) -> tuple[int, int]:
            return (width, 24)

        view = LiveView(out, state, colour=True, size=size)
        view.draw()
        frame = _ANSI.sub("", out.getvalue()).splitlines()
        assert frame, out.getvalue()
        assert all(_width(line) <= width - 1 for line in frame)
        header = frame[0]
        # The header ends with a whole column name: nothing was cut mid-column.
        assert header.split()[-1] in {"agent", "status", "elapsed", "requests", "tokens", "tool"}
        if width < 80:
            assert "last tool" not in header
