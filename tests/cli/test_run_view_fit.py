"""Live frames that fit the terminal: the frame builder, the size lookup, the redraws.

A frame taller than the terminal cannot be redrawn in place (the cursor cannot move above
the top of the screen, so every redraw scrolled a new copy of the tree), and a line wider
than the terminal wraps and breaks the line count the cursor move relies on. These tests
check :func:`fit_frame` as a pure function (hypothesis: any row count, height, width),
:func:`terminal_size` on a real pseudo-terminal, and :class:`LiveView` on events from a
real lead run that delegates to more agents than a six-row terminal can show.
"""

from __future__ import annotations

import fcntl
import io
import os
import re
import struct
import termios
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deputy_runtime import LeadAgent, UsageLimits, agent_definition, chat
from deputy_runtime._cli.view import (
    FrameRow,
    LiveView,
    RunState,
    fit_frame,
    terminal_size,
    tree_frame,
    tree_lines,
)
from deputy_runtime.chat import reply, tool_calls
from deputy_runtime.runtime import Event

_SGR = re.compile(r"\x1b\[[0-9;]*m")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_HEADER = re.compile(r"^agent\s+status\s+elapsed", re.M)
_MORE = re.compile(r"^(…|\.\.\.) (\d+) more delegations? \((\d+) running\)$")


def _columns(line: str) -> int:
    """Terminal columns ``line`` takes: no colour codes, wide characters count two."""
    total = 0
    for ch in _SGR.sub("", line):
        if unicodedata.combining(ch):
            continue
        total += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return total


# Text as rows carry it: ASCII, tree branches, wide and combining characters, colour codes.
_pieces = st.one_of(
    st.text(alphabet="abc xyz_()='0123456789", max_size=30),
    st.sampled_from(["├─ ", "└─ ", "│  ", "日本語", "e\u0301", "…", "\x1b[33m", "\x1b[0m"]),
)
_line = st.lists(_pieces, max_size=12).map("".join)
_rows = st.lists(
    st.builds(FrameRow, text=_line, running=st.booleans(), admitted=st.integers(0, 1000)),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(
    header=_line,
    lead=_line,
    rows=_rows,
    height=st.integers(3, 80),
    width=st.integers(20, 240),
    unicode=st.booleans(),
)
def test_a_frame_never_exceeds_the_terminal(
    header: str, lead: str, rows: list[FrameRow], height: int, width: int, unicode: bool
) -> None:
    frame = fit_frame([header, lead], rows, height, width, unicode=unicode)
    assert len(frame) <= height - 1
    # Width in terminal columns: a wide character takes two, a combining mark none.
    assert all(_columns(line) <= width for line in frame), frame
    if 2 + len(rows) <= height - 1:
        assert len(frame) == 2 + len(rows)  # everything fits: nothing is hidden
        return
    assert len(frame) == min(height - 1, 2 + len(rows)) or height == 3
    if width < 40:
        return  # the note itself may be cut: "… 80 more delegations (80 running)"
    note = _MORE.match(_SGR.sub("", frame[-1] if height > 3 else frame[1]))
    assert note is not None, frame
    shown = max(0, len(frame) - 3)
    hidden = int(note.group(2))
    assert hidden == len(rows) - shown
    # Running rows are kept first: the hidden ones are running only if every shown one is.
    running = sum(r.running for r in rows)
    assert int(note.group(3)) == max(0, running - shown)


def _rows_of(*running: bool) -> list[FrameRow]:
    return [FrameRow(f"├─ agent{i}", r, i) for i, r in enumerate(running)]


def test_running_rows_first_then_the_most_recent_in_tree_order() -> None:
    rows = _rows_of(False, True, False, False, True, False, False, False)
    frame = fit_frame(["agent  status", "lead"], rows, 7, 100)
    # Room for three rows: both running ones (1 and 4), then the most recent (7).
    assert frame == [
        "agent  status",
        "lead",
        "├─ agent1",
        "├─ agent4",
        "├─ agent7",
        "… 5 more delegations (0 running)",
    ]
    frame = fit_frame(["agent  status", "lead"], _rows_of(True, True, True), 5, 100)
    assert frame[2:] == ["├─ agent2", "… 2 more delegations (2 running)"]
    frame = fit_frame(["h", "lead"], _rows_of(False, False), 4, 100, unicode=False)
    assert frame == ["h", "lead", "... 2 more delegations (0 running)"]


def test_a_terminal_too_short_for_the_header_keeps_the_lead_and_the_note() -> None:
    rows = _rows_of(True, False)
    assert fit_frame(["header", "lead"], rows, 3, 100) == [
        "lead",
        "… 2 more delegations (1 running)",
    ]
    assert fit_frame(["header", "lead"], rows, 2, 100) == ["lead"]
    assert fit_frame(["header", "lead"], [], 3, 100) == ["header", "lead"]


def test_lines_are_cut_to_the_width_in_columns() -> None:
    frame = fit_frame(["x" * 50, "日本語" * 10], [], 24, 20)
    assert frame[0] == "x" * 20
    assert _SGR.sub("", frame[1]) == "日本語日本語日本語日"  # ten wide characters


def test_control_characters_in_a_row_cannot_break_the_frame() -> None:
    state = _state_with_delegations(1)
    node = state.delegations()[0]
    node.last_tool = "tool(a\nb='\x1b[2J')"  # e.g. a model-chosen argument name
    lines = tree_lines(state, state.now(), colour=False)
    assert len(lines) == 3
    assert "\n" not in "".join(lines)
    assert "\x1b" not in "".join(lines)


# -- terminal_size on a real pseudo-terminal ---------------------------------------------


@contextmanager
def _pty(rows: int, columns: int) -> Iterator[io.TextIOWrapper]:
    master, slave = os.openpty()
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        with open(slave, "w", encoding="utf-8", closefd=False) as stream:
            yield stream
    finally:
        os.close(slave)
        os.close(master)


def test_terminal_size_reads_the_output_descriptor_before_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LINES", "40")  # a stale export: the terminal was resized since
    monkeypatch.setenv("COLUMNS", "200")
    with _pty(6, 100) as stream:
        assert terminal_size(stream) == (100, 6)
    with _pty(0, 0) as stream:  # a pty nobody gave a size: the environment, then 100x24
        assert terminal_size(stream) == (200, 40)
        monkeypatch.delenv("LINES")
        monkeypatch.delenv("COLUMNS")
        columns, lines = terminal_size(stream)
        assert columns > 0
        assert lines > 0
    assert terminal_size(io.StringIO()) == terminal_size(stream)  # no descriptor at all


# -- LiveView on a real run --------------------------------------------------------------

_NAMES = [f"agent{i}" for i in range(8)]


async def _run_events() -> list[Event]:
    """A lead delegating to eight agents in one turn (offline ``scripted`` provider)."""
    calls = [("delegate_to_agent", {"agent_name": n, "task": f"job {n}"}) for n in _NAMES]
    script: dict[str, list[object]] = {"lead": [tool_calls(*calls), reply("all done")]}
    script.update({name: [reply(f"{name} answer")] for name in _NAMES})
    definitions = [agent_definition(n, "A.", "A.", max_requests=2) for n in _NAMES]
    lead = LeadAgent(
        chat("scripted", script=script), definitions, usage_limits=UsageLimits(max_requests=20)
    )
    return [event async for event in lead.run_stream("Do the jobs")]


def _state_with_delegations(count: int) -> RunState:
    """The tree as it stood when the ``count``-th delegation was admitted."""
    events = anyio.run(_run_events)
    state = RunState()
    for event in events:
        state.apply(event)
        if len(state.delegations()) == count:
            break
    return state


def _frames(text: str) -> list[str]:
    """Each redraw's visible lines (the text between hiding the cursor and clearing below)."""
    return [chunk.split("\x1b[J")[0] for chunk in text.split("\x1b[?25l")[1:]]


@pytest.mark.anyio
async def test_live_view_frames_fit_a_six_row_terminal_and_follow_a_resize() -> None:
    events = await _run_events()
    drawn_at: list[tuple[int, int]] = []

    def size() -> tuple[int, int]:
        # 100x6 at first, then resized to 30x4, then to 100x24 for the last frames.
        frame = len(drawn_at)
        drawn_at.append((100, 6) if frame < 20 else (30, 4) if frame < 28 else (100, 24))
        return drawn_at[-1]

    out = io.StringIO()
    view = LiveView(out, RunState(), colour=True, size=size)
    for event in events:
        view.handle(event)
    view.close()
    frames = _frames(out.getvalue())
    assert len(frames) == len(drawn_at) >= 30
    noted = False
    previous = 0
    for frame, (columns, rows) in zip(frames, drawn_at, strict=True):
        move = re.match(r"\x1b\[(\d+)F", frame)
        assert (int(move.group(1)) if move else 0) == previous  # back over the last frame
        lines = _ANSI.sub("", frame).splitlines()
        previous = len(lines)
        assert len(lines) <= rows - 1, lines
        assert all(len(line) <= columns - 1 for line in lines), lines
        assert len(_HEADER.findall("\n".join(lines))) <= 1
        assert re.match(r"lead\s", lines[1 if rows >= 4 else 0]), lines
        noted = noted or any(_MORE.match(line) for line in lines)
    assert noted, "no frame said how many delegations were hidden"
    final = _ANSI.sub("", frames[-1]).splitlines()  # drawn at 100x24: everything fits
    assert len(final) == 2 + len(_NAMES)
    assert not any(_MORE.match(line) for line in final)


def test_tree_frame_ranks_rows_by_admission() -> None:
    state = _state_with_delegations(len(_NAMES))
    head, rows = tree_frame(state, state.now(), colour=False)
    assert len(head) == 2
    assert len(rows) == len(_NAMES)
    order = {n.agent_name: (i, n) for i, n in enumerate(state.delegations())}
    assert [row.admitted for row in rows] == sorted(row.admitted for row in rows)
    for row in rows:
        admitted, node = order[row.text.split()[1]]
        assert row.admitted == admitted
        assert row.running == (node.status == "running")
