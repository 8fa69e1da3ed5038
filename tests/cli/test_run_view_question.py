"""A durable run's ``QuestionEvent`` in the run views: a plain line naming the question,
the live tree's last tool column, the JSON line; and the live view pausing while a
prompt owns the terminal."""

from __future__ import annotations

import io
import re

from deputy_runtime import QuestionEvent, UsageLimits, decode_event, encode_event
from deputy_runtime._cli.view import LiveView, PlainView, RunState, tree_lines
from deputy_runtime.runtime import DelegationStart, Event, RunStart

LEAD = {"agent_id": "agent_lead", "agent_name": "lead", "run_id": "run_lead"}
CHILD = {
    "agent_id": "agent_child",
    "agent_name": "asker",
    "run_id": "run_child",
    "delegation_id": "delegation_1",
    "parent_agent_id": "agent_lead",
    "parent_run_id": "run_lead",
}
QUESTION = QuestionEvent(
    **CHILD,
    question_id="question_abc",
    tool_call_id="call_1",
    questions=({"question": "Which option?", "options": ["A", "B"]},),
)


def _events() -> list[Event]:
    return [
        RunStart(**LEAD, task="Ask", limits=UsageLimits(max_requests=5)),
        DelegationStart(**CHILD, task="Ask the user", limits=UsageLimits(max_requests=2)),
        QUESTION,
    ]


def test_the_question_event_round_trips_as_json() -> None:
    line = encode_event(QUESTION)
    assert b'"type":"question"' in line
    assert decode_event(line) == QUESTION


def test_plain_view_names_the_question_and_its_id() -> None:
    out = io.StringIO()
    view = PlainView(out, RunState())
    for event in _events():
        view.handle(event)
    last = out.getvalue().splitlines()[-1]
    assert last.endswith("asker: asks the user [question_abc]: Which option?")


def test_the_tree_shows_the_delegation_waiting_for_an_answer() -> None:
    state = RunState()
    for event in _events():
        state.apply(event)
    [row] = [line for line in tree_lines(state, state.now(), colour=False) if "asker" in line]
    assert row.endswith("ask_user: waiting for an answer")


def test_a_held_live_view_draws_nothing_and_resumes_below_the_prompt() -> None:
    out = io.StringIO()
    view = LiveView(out, RunState(), colour=False, size=lambda: (120, 40))
    for event in _events()[:2]:
        view.handle(event)
    view.hold()
    drawn = len(out.getvalue())
    view.handle(QUESTION)
    view.draw()
    assert len(out.getvalue()) == drawn  # nothing while the prompt owns the terminal
    out.write("asker asks: ...\n")  # the prompt's text
    view.resume()
    after_prompt = out.getvalue().split("asker asks: ...\n", 1)[1]
    # A fresh frame below the prompt: the cursor never moves back up over it.
    assert re.search(r"\x1b\[\d+F", after_prompt) is None
    assert "ask_user: waiting for an answer" in after_prompt
    view.handle(QUESTION)
    view.draw()  # the next frame replaces the resumed one as usual
    assert re.search(r"\x1b\[\d+F", out.getvalue().split("asker asks: ...\n", 1)[1])
