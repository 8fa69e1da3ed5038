"""Human input on a real Temporal dev server: an ``ask_user`` call of a delegation (or of
the lead) waits durably for the lead's ``answer`` update, whose validator refuses bad
answers before anything is written; an interrupt ends the wait; a delegation with
``ask_user`` needs ``human_input=True``; the question outlives its worker."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.service import RPCError

from deputy_runtime import (
    AgentDefinition,
    DelegationBindingError,
    DelegationPolicy,
    LeadAgent,
    PermissionMode,
    Permissions,
    QuestionEvent,
    UsageLimits,
    ask_user,
    chat,
    decode_event,
    tools_file,
)
from deputy_runtime.chat import ContentToolResult
from deputy_runtime.temporal import (
    DeputyActivities,
    LeadOutput,
    PendingQuestion,
    answer_question,
    deputy_worker,
    follow_run,
    lead_input,
    pending_questions,
    start_lead,
)
from tests.runtime.helpers import append_then
from tests.temporal.helpers import assert_replays, run_workflow_ids

pytestmark = pytest.mark.anyio

WAIT_SECONDS = 120.0  # generous: the machine is shared; every wait is on a condition
#: What the ``test`` model asks (ask_user's schema example).
QUESTION = "Which option should I use?"
ANSWERS: dict[str, Any] = {QUESTION: ["A", "B"]}
LIMITS = UsageLimits(max_requests=10)


def _asker() -> AgentDefinition:
    return AgentDefinition("asker", "Asks the user.", "You ask.", tools=(ask_user,))


async def _start(
    client: Client, task_queue: str, definitions: list[AgentDefinition], **kwargs: Any
) -> WorkflowHandle[Any, LeadOutput]:
    request = lead_input("Do the work", definitions, model="test", usage_limits=LIMITS, **kwargs)
    return await start_lead(
        client, request, workflow_id=f"lead-{uuid.uuid4().hex}", task_queue=task_queue
    )


async def _first_question(client: Client, workflow_id: str) -> QuestionEvent:
    """Follow the run until a question is announced (from a running child's log)."""
    with anyio.fail_after(WAIT_SECONDS):
        async for event in follow_run(client, workflow_id, poll_interval=0.05):
            if isinstance(event, QuestionEvent):
                return event
    raise AssertionError("the run ended without asking")


def _ask_results(turns: Any) -> list[ContentToolResult]:
    """Every ask_user result in a run's turns."""
    asked = (c for t in turns if t.role == "assistant" for c in t.tool_requests)
    ids = {c.id for c in asked if c.name == "ask_user"}
    return [
        c
        for t in turns
        if t.role == "user"
        for c in t.contents
        if isinstance(c, ContentToolResult) and c.request_id in ids
    ]


async def _updates_accepted(client: Client, workflow_id: str) -> int:
    handle = client.get_workflow_handle(workflow_id)
    count = 0
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            count += 1
    return count


async def _in_process_answer() -> tuple[ContentToolResult, list[Any]]:
    """The same run in-process, its human input answering ANSWERS: the child's ask_user
    result and what the handler was asked."""
    asked: list[Any] = []

    def handler(questions: Any, context: Any) -> dict[str, Any]:
        asked.append(questions)
        return ANSWERS

    lead = LeadAgent(
        chat("test"),
        [_asker()],
        usage_limits=LIMITS,
        delegation_policy=DelegationPolicy(human_input=handler),
    )
    await lead.run("Do the work")
    [result] = lead.get_subagent_results()
    assert result is not None
    [answer] = _ask_results(result.turns)
    return answer, asked


@pytest.fixture
async def worker(client: Client, task_queue: str, workdir: Path) -> AsyncIterator[None]:
    activities = DeputyActivities(tools_file(workdir), working_dir=workdir)
    async with deputy_worker(client, activities, task_queue=task_queue):
        yield


async def test_a_delegations_question_is_answered_through_the_lead(
    client: Client, task_queue: str, worker: None
) -> None:
    expected, asked = await _in_process_answer()
    handle = await _start(client, task_queue, [_asker()], human_input=True)
    question = await _first_question(client, handle.id)
    assert question.agent_name == "asker"
    assert question.delegation_id is not None
    assert question.questions == tuple(asked[0])  # what an in-process handler is given
    [pending] = await pending_questions(client, handle.id)
    assert pending == PendingQuestion(
        question_id=question.question_id,
        tool_call_id=question.tool_call_id,
        agent_id=question.agent_id,
        agent_name="asker",
        run_id=question.run_id,
        delegation_id=question.delegation_id,
        questions=pending.questions,
    )
    assert [(q.question, q.options) for q in pending.questions] == [(QUESTION, ("A", "B"))]
    # The validator refuses, naming the field, before anything is written.
    refused = [
        ("question_nope", ANSWERS, "question_id 'question_nope' is not a pending question"),
        (question.question_id, {"Other?": "x"}, "'Other?' is not one of the questions"),
        (question.question_id, {}, "no answer for 'Which option should I use?'"),
        (question.question_id, {QUESTION: 3}, "must be a string or a list of strings"),
    ]
    for question_id, answers, message in refused:
        with pytest.raises(WorkflowUpdateFailedError) as failed:
            await answer_question(client, handle.id, question_id, answers)
        assert message in str(failed.value.cause)
    # The workflow checks what a client other than answer_question sends, too.
    raw_updates: list[tuple[list[object], str]] = [
        ([question.question_id, ["A"]], "answers must be a JSON object"),
        ([7, ANSWERS], "question_id must be a string"),
    ]
    for args, message in raw_updates:
        with pytest.raises(WorkflowUpdateFailedError) as failed:
            await handle.execute_update("answer", args=args)
        assert message in str(failed.value.cause)
    assert await _updates_accepted(client, handle.id) == 0
    value = await answer_question(client, handle.id, question.question_id, ANSWERS)
    assert value == expected.value
    with pytest.raises(WorkflowUpdateFailedError) as failed:
        await answer_question(handle, None, question.question_id, ANSWERS)
    assert "is already answered" in str(failed.value.cause)
    with anyio.fail_after(WAIT_SECONDS):
        out = await handle.result()
    assert out.result.stop_reason == "complete"
    [record] = out.subagents
    assert (record.status, record.stop_reason) == ("completed", "complete")
    [result] = out.subagent_results
    assert result is not None
    [answer] = _ask_results(result.turns)
    assert (answer.value, answer.error) == (expected.value, expected.error)
    assert await pending_questions(handle) == ()
    assert await _updates_accepted(client, handle.id) == 1
    assert await assert_replays(client, run_workflow_ids(handle.id, out)) == 2


async def test_the_leads_own_question(client: Client, task_queue: str, worker: None) -> None:
    helper = AgentDefinition("helper", "Helps.", "You help.")
    handle = await _start(client, task_queue, [helper], tools=("ask_user",))
    question = await _first_question(client, handle.id)
    assert (question.delegation_id, question.agent_name) == (None, "lead")
    value = await answer_question(client, handle.id, question.question_id, {QUESTION: "A"})
    assert value == '{"Which option should I use?":"A"}'
    with anyio.fail_after(WAIT_SECONDS):
        out = await handle.result()
    assert out.result.stop_reason == "complete"
    [answer] = _ask_results(out.result.turns)
    assert answer.value == value
    assert await assert_replays(client, run_workflow_ids(handle.id, out)) == 2


async def test_an_interrupt_ends_the_wait(client: Client, task_queue: str, worker: None) -> None:
    handle = await _start(client, task_queue, [_asker()], human_input=True)
    question = await _first_question(client, handle.id)
    await handle.signal("interrupt", "test stop")
    with anyio.fail_after(WAIT_SECONDS):
        out = await handle.result()
    assert out.result.stop_reason == "interrupted"
    [record] = out.subagents
    assert (record.status, record.stop_reason) == ("stopped", "interrupted")
    [result] = out.subagent_results
    assert result is not None
    [answer] = _ask_results(result.turns)
    assert answer.value is None
    assert answer.error is not None
    assert "interrupted" in answer.error
    assert await pending_questions(handle) == ()
    with pytest.raises(RPCError, match="already completed"):  # too late to answer
        await answer_question(client, handle.id, question.question_id, ANSWERS)
    assert await assert_replays(client, run_workflow_ids(handle.id, out)) == 2


async def test_ask_user_without_human_input_fails_setup_as_in_process(
    client: Client, task_queue: str, worker: None
) -> None:
    lead = LeadAgent(chat("test"), [_asker()], usage_limits=LIMITS)
    await lead.run("Do the work")
    [expected] = lead.list_subagents()
    handle = await _start(client, task_queue, [_asker()])
    with anyio.fail_after(WAIT_SECONDS):
        out = await handle.result()
    [record] = out.subagents
    assert (record.status, record.stop_reason) == (expected.status, expected.stop_reason)
    assert (record.status, record.stop_reason) == ("failed", "setup_error")
    assert record.error is not None
    assert "lead_input(human_input=True)" in record.error
    assert out.subagent_results == (None,)
    assert lead.last_result is not None
    assert out.result.usage == lead.last_result.usage


async def test_the_question_survives_a_worker_restart(
    client: Client, task_queue: str, workdir: Path
) -> None:
    activities = DeputyActivities(tools_file(workdir), working_dir=workdir)
    async with deputy_worker(client, activities, task_queue=task_queue):
        handle = await _start(client, task_queue, [_asker()], human_input=True)
        question = await _first_question(client, handle.id)
    # No worker now: the run waits on the server. A new worker takes it over.
    async with deputy_worker(client, activities, task_queue=task_queue):
        await answer_question(client, handle.id, question.question_id, ANSWERS)
        with anyio.fail_after(WAIT_SECONDS):
            out = await handle.result()
        assert out.result.stop_reason == "complete"
        [result] = out.subagent_results
        assert result is not None
        [answer] = _ask_results(result.turns)
        assert answer.value == '{"Which option should I use?":"A, B"}'
        assert await assert_replays(client, run_workflow_ids(handle.id, out)) == 2


def test_lead_input_refuses_a_human_input_handler_and_a_non_bool() -> None:
    policy = DelegationPolicy(human_input=lambda questions, context: {})
    with pytest.raises(DelegationBindingError, match=r"lead_input\(human_input=True\)"):
        lead_input("task", [_asker()], model="test", delegation_policy=policy)
    with pytest.raises(ValueError, match="human_input must be True or False"):
        lead_input("task", [_asker()], model="test", human_input="yes")  # type: ignore[arg-type]


async def test_a_denied_question_is_refused_as_in_process(
    client: Client, task_queue: str, worker: None
) -> None:
    # Under a readonly lead the subagent inherits readonly, where ask_user is refused.
    asked: list[Any] = []
    lead = LeadAgent(
        chat("test"),
        [_asker()],
        usage_limits=LIMITS,
        permissions=Permissions(mode=PermissionMode.READONLY),
        delegation_policy=DelegationPolicy(human_input=lambda q, c: append_then(asked, q, {})),
    )
    await lead.run("Do the work")
    [expected_result] = lead.get_subagent_results()
    assert expected_result is not None
    [expected] = _ask_results(expected_result.turns)
    assert asked == []
    handle = await _start(
        client,
        task_queue,
        [_asker()],
        human_input=True,
        permissions=Permissions(mode=PermissionMode.READONLY),
    )
    with anyio.fail_after(WAIT_SECONDS):
        out = await handle.result()
    [result] = out.subagent_results
    assert result is not None
    [answer] = _ask_results(result.turns)
    assert (answer.value, answer.error) == (expected.value, expected.error)
    assert answer.error is not None
    assert "permission mode 'readonly'" in answer.error
    events = [decode_event(e) for e in await handle.query("events", 0)]
    assert not [e for e in events if isinstance(e, QuestionEvent)]
    assert await assert_replays(client, run_workflow_ids(handle.id, out)) == 2


async def test_a_disallowed_ask_user_needs_no_human_input(
    client: Client, task_queue: str, worker: None
) -> None:
    # In-process the disallowed tool is removed before the human-input check, so the
    # delegation starts without it; here too (lead_input leaves it out of the offer).
    asker = AgentDefinition(
        "asker", "Asks.", "You ask.", tools=(ask_user,), disallowed_tools=("ask_user",)
    )
    lead = LeadAgent(chat("test"), [asker], usage_limits=LIMITS)
    await lead.run("Do the work")
    [expected] = lead.list_subagents()
    handle = await _start(client, task_queue, [asker])
    with anyio.fail_after(WAIT_SECONDS):
        out = await handle.result()
    [record] = out.subagents
    assert (record.status, record.stop_reason) == (expected.status, expected.stop_reason)
    assert (record.status, record.stop_reason) == ("completed", "complete")
    [result] = out.subagent_results
    assert result is not None
    [expected_result] = lead.get_subagent_results()
    assert expected_result is not None
    assert _ask_results(result.turns) == _ask_results(expected_result.turns) == []
