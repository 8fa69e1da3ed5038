"""Structured results: a definition's output schema, the retries inside the subagent's run,
the decoded value on the record, in the lead model's outcome and in ``parallel_delegate``.

Everything runs the real runtime on a ScriptedProvider keyed per agent name; the scripts
answer wrongly, then rightly, exactly as a model would.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from deputy_runtime import Agent, Chat, DefinitionError, UsageLimits
from deputy_runtime.chat import ScriptedProvider, reply
from deputy_runtime.chat._types import ModelRequest
from deputy_runtime.runtime import WarningEvent
from tests.runtime.helpers import (
    definition,
    delegate,
    delegate_results,
    meter_spy,
    outcome,
    scripted_lead,
)

pytestmark = pytest.mark.anyio

__all__ = ["meter_spy"]

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"enum": ["approve", "reject"]},
        "score": {"type": "integer", "minimum": 0, "maximum": 10},
    },
    "required": ["verdict", "score"],
    "additionalProperties": False,
}


class Verdict(msgspec.Struct, frozen=True):
    verdict: str
    score: int


@dataclasses.dataclass(frozen=True)
class Finding:
    file: str
    line: int


def retry_turns(provider: ScriptedProvider, agent: str) -> list[str]:
    """The text of every user turn after the first that ``agent``'s model received."""
    requests = provider.requests_for(agent)
    last = requests[-1]
    return [t.text for t in last.turns[1:] if t.role == "user"]


async def test_wrong_twice_then_right_decodes_the_value(tmp_path: Path, meter_spy: Any) -> None:
    lead, p = scripted_lead(
        {
            "lead": [delegate("judge"), reply("done")],
            "judge": [
                "Approve, score 7.",  # not JSON
                '{"verdict": "approve", "score": 11}',  # out of range
                '{"verdict": "approve", "score": 7}',
            ],
        },
        [definition("judge", output_schema=SCHEMA)],
        tmp_path,
    )
    result = await lead.run("review it")
    [record] = lead.list_subagents()
    assert record.status == "completed"
    assert record.stop_reason == "complete"
    assert record.output == {"verdict": "approve", "score": 7}
    assert record.error is None
    # Three requests of the subagent's own run, settled into the lead's usage.
    assert record.usage.requests == 3
    assert result.usage.requests == 2 + 3
    assert meter_spy.open_reservations() == 0
    # The model was told exactly what was wrong, each time.
    first, second = retry_turns(p, "judge")
    assert "the answer is not valid JSON" in first
    assert "(attempt 2 of 3)" in first
    assert "$.score: expected at most 10, got 11" in second
    assert "(attempt 3 of 3)" in second
    # The lead's model got the decoded value as JSON, in place of the answer text.
    [tool_result] = delegate_results(p)
    seen = outcome(tool_result)
    assert seen["output"] == {"verdict": "approve", "score": 7}
    assert "answer" not in seen
    assert seen["status"] == "completed"
    # The subagent was shown the schema in its system prompt.
    [first_request, *_] = p.requests_for("judge")
    prompt = first_request.system_prompt or ""
    assert prompt.startswith("ROLE:judge\n\n<!-- deputy-output-schema:v1:start -->")
    # Keys sorted: the same text on both engines (a durable input sorts mapping keys).
    assert json.dumps(SCHEMA, separators=(",", ":"), sort_keys=True) in prompt


async def test_never_right_fails_the_delegation_with_the_reason(
    tmp_path: Path, meter_spy: Any
) -> None:
    events: list[Any] = []
    lead, p = scripted_lead(
        {
            "lead": [delegate("judge"), reply("gave up")],
            "judge": ['{"verdict": "maybe", "score": 1}'] * 3,
        },
        [definition("judge", output_schema=SCHEMA)],
        tmp_path,
    )
    result = await lead.run("review it", on_event=events.append)
    assert result.stop_reason == "complete"  # the lead itself carries on
    [record] = lead.list_subagents()
    assert record.status == "failed"
    assert record.stop_reason == "invalid_output"
    assert record.output is None
    assert record.error is not None
    assert record.error.startswith(
        "The final answer did not match the output schema after 3 attempts: "
    )
    assert '$.verdict: expected one of "approve", "reject", got "maybe"' in record.error
    assert record.usage.requests == 3
    assert result.usage.requests == 2 + 3
    assert meter_spy.open_reservations() == 0
    # The lead's model got the failure as a tool error carrying the outcome and reason.
    [tool_result] = delegate_results(p)
    assert tool_result.error is not None
    seen = outcome(tool_result)
    assert seen["status"] == "failed"
    assert seen["stop_reason"] == "invalid_output"
    assert seen["error"] == record.error
    assert "output" not in seen
    # Each rejected answer but the last was announced as a warning of the subagent.
    warnings = [e for e in events if isinstance(e, WarningEvent) and e.agent_name == "judge"]
    assert [w.message.split(":")[0] for w in warnings] == [
        "final answer rejected (1 of 3)",
        "final answer rejected (2 of 3)",
    ]


async def test_a_msgspec_type_gives_an_instance_on_the_record(tmp_path: Path) -> None:
    lead, p = scripted_lead(
        {
            "lead": [delegate("judge"), reply("done")],
            "judge": ['{"verdict": "reject"}', '```json\n{"verdict": "reject", "score": 2}\n```'],
        },
        [definition("judge", output_schema=Verdict, output_retries=1)],
        tmp_path,
    )
    await lead.run("review it")
    [record] = lead.list_subagents()
    assert record.output == Verdict("reject", 2)
    assert isinstance(record.output, Verdict)
    assert record.usage.requests == 2
    [retry] = retry_turns(p, "judge")
    assert "Object missing required field `score`" in retry
    assert outcome(delegate_results(p)[0])["output"] == {"verdict": "reject", "score": 2}
    # The results keep the instance too.
    [child] = lead.get_subagent_results("judge")
    assert child is not None
    assert child.output == Verdict("reject", 2)
    prompt = p.requests_for("judge")[0].system_prompt or ""
    assert '"required":["verdict","score"]' in prompt


async def test_a_dataclass_type_and_zero_retries(tmp_path: Path) -> None:
    lead, _ = scripted_lead(
        {
            "lead": [delegate("finder"), delegate("finder"), reply("done")],
            "finder": ['{"file": "a.py", "line": 3}', '{"file": "a.py", "line": "3"}'],
        },
        [definition("finder", output_schema=Finding, output_retries=0)],
        tmp_path,
    )
    await lead.run("find it")
    good, bad = lead.list_subagents()
    assert good.output == Finding("a.py", 3)
    assert bad.status == "failed"
    assert bad.stop_reason == "invalid_output"
    assert bad.error is not None
    assert "after 1 attempt: " in bad.error
    assert "Expected `int`, got `str` - at `$.line`" in bad.error
    assert bad.usage.requests == 1


async def test_a_request_limit_stops_the_retries(tmp_path: Path) -> None:
    lead, _ = scripted_lead(
        {"lead": [delegate("judge"), reply("done")], "judge": ["no", "still no"]},
        [definition("judge", output_schema=SCHEMA, max_requests=2)],
        tmp_path,
    )
    await lead.run("review it")
    [record] = lead.list_subagents()
    # The retries are ordinary requests: the definition's cap ends them first.
    assert record.stop_reason == "request_limit"
    assert record.status == "stopped"
    assert record.usage.requests == 2
    assert record.output is None


async def test_parallel_delegate_returns_the_decoded_values(tmp_path: Path, meter_spy: Any) -> None:
    def judge(request: ModelRequest) -> str:
        task = json.loads(request.turns[0].text)["brief"]["task"]
        retried = len(request.turns) > 1
        if task == "b" and not retried:
            return '{"verdict": "reject"}'  # b is wrong once
        return json.dumps({"verdict": "approve" if task == "a" else "reject", "score": 5})

    lead, _ = scripted_lead(
        {"judge": judge, "plain": lambda request: "free text"},
        [definition("judge", output_schema=Verdict), definition("plain")],
        tmp_path,
    )
    result = await lead.parallel_delegate([("judge", "a"), ("judge", "b"), ("plain", "c")])
    assert result.statuses == ("completed",) * 3
    assert result.outputs == (Verdict("approve", 5), Verdict("reject", 5), None)
    assert [type(o) for o in result.outputs[:2]] == [Verdict, Verdict]
    assert [r.output if r else None for r in result.results] == list(result.outputs)
    assert [rec.output for rec in lead.list_subagents()] == list(result.outputs)
    assert result.outcomes[1]["output"] == {"verdict": "reject", "score": 5}
    assert result.outcomes[2]["answer"] == "free text"
    assert "output" not in result.outcomes[2]
    # b's retry is one more request of its own, within the batch's budget.
    assert result.run.usage.requests == 4
    assert meter_spy.open_reservations() == 0


async def test_parallel_retries_fit_in_the_batch_request_limit(tmp_path: Path) -> None:
    lead, _ = scripted_lead(
        {"judge": lambda request: "not json"},
        [definition("judge", output_schema=SCHEMA)],
        tmp_path,
    )
    result = await lead.parallel_delegate(
        [("judge", "a")], usage_limits=UsageLimits(max_requests=2)
    )
    # The share is capped at what the batch has: two requests, then the limit.
    assert result.statuses == ("stopped",)
    assert result.outcomes[0]["stop_reason"] == "request_limit"
    assert result.outputs == (None,)
    assert result.run.usage.requests == 2


async def test_a_plain_agent_can_have_an_output_schema(tmp_path: Path) -> None:
    provider = ScriptedProvider(['{"score": 4}', '{"verdict": "approve", "score": 4}'])
    agent = Agent(Chat(provider, "Judge."), output_schema=SCHEMA, working_dir=tmp_path, name="solo")
    result = await agent.run("judge")
    assert result.stop_reason == "complete"
    assert result.output == {"verdict": "approve", "score": 4}
    assert result.usage.requests == 2
    assert (agent.system_prompt or "").startswith("Judge.\n\n<!-- deputy-output-schema:v1:start")


def test_an_agent_refuses_a_bad_schema_naming_the_argument(tmp_path: Path) -> None:
    chat = Chat(ScriptedProvider([]))
    with pytest.raises(DefinitionError, match=r"^output_schema: the schema uses the keyword"):
        Agent(chat, output_schema={"type": "string", "pattern": "x"}, working_dir=tmp_path)
    with pytest.raises(DefinitionError, match=r"^output_retries: is set but there is no"):
        Agent(chat, output_retries=1, working_dir=tmp_path)
    with pytest.raises(DefinitionError, match=r"^output_retries: expected an int from 0 to 10"):
        Agent(chat, output_schema=Verdict, output_retries=11, working_dir=tmp_path)


async def test_without_a_schema_nothing_changes(tmp_path: Path) -> None:
    lead, p = scripted_lead(
        {"lead": [delegate("worker"), reply("done")], "worker": ["plain words"]},
        [definition("worker")],
        tmp_path,
    )
    await lead.run("go")
    [record] = lead.list_subagents()
    assert record.output is None
    seen = outcome(delegate_results(p)[0])
    assert seen["answer"] == "plain words"
    assert "output" not in seen
    assert "deputy-output-schema" not in (p.requests_for("worker")[0].system_prompt or "")
