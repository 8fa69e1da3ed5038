"""Hooks across delegation.

The lead's PreToolUse/PostToolUse/PostToolUseFailure hooks always run for child tool calls,
with the child's context, looked up live; ``observers`` forward other events;
PermissionRequest, SubagentStart and SubagentStop never forward. SubagentStart/Stop fire on
the lead with the delegation's payload.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deputy_runtime import DelegationPolicy, HookDecision, HookEvent, PermissionMode, Permissions
from deputy_runtime.chat import reply, tool_call
from tests.runtime.helpers import (
    append_then,
    definition,
    delegate,
    make_tool,
    scripted_lead,
    tool_results,
)

pytestmark = pytest.mark.anyio


def child_tool_error(provider: Any, index: int = 1) -> str | None:
    [result] = tool_results(provider.requests_for("worker")[index])
    return result.error


def effect_lead(tmp_path: Path, calls: list[str], **kwargs: Any) -> tuple[Any, Any]:
    effect = make_tool("effect", calls=calls, read_only=True)
    return scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": [tool_call("effect", {}), "done"]},
        [definition("worker", tools=[effect])],
        tmp_path,
        **kwargs,
    )


async def test_lead_pre_tool_use_deny_blocks_the_childs_tool(tmp_path: Path) -> None:
    calls: list[str] = []
    seen: list[Any] = []

    def veto(h: Any) -> HookDecision | None:
        seen.append(h)
        if h.delegation_id is not None:
            return HookDecision.deny("host veto")
        return None

    lead, p = effect_lead(tmp_path, calls)
    lead.hooks.add(HookEvent.PreToolUse, veto)
    await lead.run("go")
    assert calls == []
    assert "host veto" in (child_tool_error(p) or "")
    [record] = lead.list_subagents()
    child_calls = [h for h in seen if h.delegation_id is not None]
    [h] = child_calls
    assert h.tool_name == "effect"
    assert h.agent_id == record.agent_id
    assert h.agent_name == "worker"
    assert h.delegation_id == record.delegation_id
    assert h.delegation_id.startswith("delegation_")
    assert h.parent_agent_id == lead.agent_id
    assert h.parent_run_id == record.parent_run_id
    assert h.run_id == record.run_id
    assert record.status == "completed"


async def test_hook_added_after_construction_applies_to_running_children(
    tmp_path: Path,
) -> None:
    calls: list[str] = []
    lead, p = effect_lead(tmp_path, calls)

    def add_veto_now(h: Any) -> None:
        # registered while the delegation is already starting
        lead.hooks.add(
            HookEvent.PreToolUse, lambda hi: HookDecision.deny("late veto"), matcher="effect"
        )

    lead.hooks.add(HookEvent.SubagentStart, add_veto_now)
    await lead.run("go")
    assert calls == []
    assert "late veto" in (child_tool_error(p) or "")


async def test_matcher_applies_to_child_tool_names(tmp_path: Path) -> None:
    calls: list[str] = []
    lead, _p = effect_lead(tmp_path, calls)
    lead.hooks.add(HookEvent.PreToolUse, lambda h: HookDecision.deny("no"), matcher="other")
    await lead.run("go")
    assert calls == ["effect"]


async def test_failing_lead_pre_tool_use_fails_closed_but_child_completes(
    tmp_path: Path,
) -> None:
    calls: list[str] = []
    lead, p = effect_lead(tmp_path, calls)

    def broken(h: Any) -> None:
        if h.delegation_id is not None:
            raise RuntimeError("host governance failed")

    lead.hooks.add(HookEvent.PreToolUse, broken)
    await lead.run("go")
    assert calls == []
    assert "host governance failed" in (child_tool_error(p) or "")
    [record] = lead.list_subagents()
    assert record.status == "completed"
    assert record.hook_error is not None
    assert "PreToolUse: host governance failed" in record.hook_error


async def test_pre_tool_use_stop_for_a_child_stops_only_the_child(tmp_path: Path) -> None:
    calls: list[str] = []
    lead, _p = effect_lead(tmp_path, calls)
    lead.hooks.add(
        HookEvent.PreToolUse,
        lambda h: HookDecision.stop("enough") if h.delegation_id else None,
    )
    result = await lead.run("go")
    [record] = lead.list_subagents()
    assert calls == []
    assert (record.status, record.stop_reason) == ("stopped", "hook_requested_stop")
    assert result.stop_reason == "complete"


async def test_post_tool_use_and_failure_are_forwarded_with_child_context(
    tmp_path: Path,
) -> None:
    def explode() -> str:
        raise ValueError("tool broke")

    good = make_tool("good", read_only=True)
    bad = make_tool("bad", explode, read_only=True)
    lead, _ = scripted_lead(
        {
            "lead": [delegate("worker"), reply("ok")],
            "worker": [tool_call("good", {}), tool_call("bad", {}), "done"],
        },
        [definition("worker", tools=[good, bad])],
        tmp_path,
    )
    post: list[Any] = []
    failure: list[Any] = []
    lead.hooks.add(HookEvent.PostToolUse, post.append)
    lead.hooks.add(HookEvent.PostToolUseFailure, failure.append)
    await lead.run("go")
    [record] = lead.list_subagents()
    child_post = [h for h in post if h.delegation_id == record.delegation_id]
    assert [h.tool_name for h in child_post] == ["good"]
    assert child_post[0].tool_result == "good ran"
    assert child_post[0].agent_id == record.agent_id
    [f] = failure
    assert f.tool_name == "bad"
    assert "tool broke" in (f.tool_error or "")
    assert f.delegation_id == record.delegation_id
    # the lead's own delegate call also reaches its PostToolUse, without a delegation id
    assert [h.tool_name for h in post if h.delegation_id is None] == ["delegate_to_agent"]


async def test_observers_forward_stop_once_per_child_run(tmp_path: Path) -> None:
    for observers, expected in (((), 0), (("Stop",), 1)):
        stops: list[Any] = []
        lead, _ = scripted_lead(
            {"lead": [delegate("worker"), reply("ok")], "worker": ["done"]},
            [definition("worker")],
            tmp_path,
            delegation_policy=DelegationPolicy(observers=observers),  # type: ignore[arg-type]
        )
        lead.hooks.add(HookEvent.Stop, stops.append)
        await lead.run("go")
        [record] = lead.list_subagents()
        child_stops = [h for h in stops if h.agent_id == record.agent_id]
        assert len(child_stops) == expected
        if expected:
            assert child_stops[0].delegation_id == record.delegation_id
            assert child_stops[0].reason == "complete"
        lead_stops = [h for h in stops if h.agent_id == lead.agent_id]
        assert len(lead_stops) == 1


async def test_observers_forward_notifications(tmp_path: Path) -> None:
    notes: list[Any] = []
    files = make_tool("write_file", destructive=True)
    lead, _ = scripted_lead(
        {
            "lead": [delegate("worker"), reply("ok")],
            "worker": [tool_call("write_file", {"path": "x"}), "done"],
        },
        [definition("worker", tools=[files], permission_mode="readonly")],
        tmp_path,
        delegation_policy=DelegationPolicy(observers=("Notification",)),  # type: ignore[arg-type]
    )
    lead.hooks.add(HookEvent.Notification, notes.append)
    await lead.run("go")
    [record] = lead.list_subagents()
    assert [n.delegation_id for n in notes] == [record.delegation_id]
    assert (notes[0].message or "").startswith("permission_denied")


async def test_permission_request_subagent_start_and_stop_never_forward(
    tmp_path: Path,
) -> None:
    starts: list[Any] = []
    stops: list[Any] = []
    requests: list[Any] = []
    lead, _ = scripted_lead(
        {
            "lead": [delegate("worker"), reply("ok")],
            "worker": [tool_call("write_file", {"path": "x"}), "done"],
        },
        [
            definition(
                "worker",
                tools=[make_tool("write_file", destructive=True)],
                permission_mode="readonly",
            )
        ],
        tmp_path,
        permissions=Permissions(mode=PermissionMode.FULL),
    )
    lead.hooks.add(HookEvent.SubagentStart, starts.append)
    lead.hooks.add(HookEvent.SubagentStop, stops.append)
    lead.hooks.add(
        HookEvent.PermissionRequest, lambda h: append_then(requests, h, HookDecision.allow())
    )
    await lead.run("go")
    assert requests == []
    # SubagentStart/Stop fire once each, on the lead, for the lead's delegation
    assert [h.agent_id for h in starts] == [lead.agent_id]
    assert [h.agent_id for h in stops] == [lead.agent_id]


async def test_subagent_start_and_stop_payloads(tmp_path: Path) -> None:
    starts: list[Any] = []
    stops: list[Any] = []
    lead, _ = scripted_lead(
        {
            "lead": [delegate("helper", "Do a task", id="call_h"), reply("ok")],
            "helper": ["Sub-agent result"],
        },
        [definition("helper")],
        tmp_path,
    )
    lead.hooks.add(HookEvent.SubagentStart, starts.append)
    lead.hooks.add(HookEvent.SubagentStop, stops.append)
    result = await lead.run("go")
    [record] = lead.list_subagents()
    [start] = starts
    [stop] = stops
    for h in (start, stop):
        assert h.child_agent_name == "helper"
        assert h.task == "Do a task"
        assert h.working_dir == str(lead.working_dir)
        assert h.delegation_id == record.delegation_id
        assert h.child_agent_id == record.agent_id
        assert h.child_run_id == record.run_id
        assert h.agent_id == lead.agent_id
        assert h.run_id == result.run_id
        assert h.tool_call_id == "call_h"
    assert start.status == "running"
    assert stop.status == "completed"
    assert stop.result == "Sub-agent result"
    assert stop.reason == "complete"


async def test_subagent_stop_hook_error_does_not_change_status(tmp_path: Path) -> None:
    lead, _ = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": ["done"]},
        [definition("worker")],
        tmp_path,
    )

    def broken(h: Any) -> None:
        raise RuntimeError("stop hook broke")

    lead.hooks.add(HookEvent.SubagentStop, broken)
    await lead.run("go")
    [record] = lead.list_subagents()
    assert record.status == "completed"
    assert "SubagentStop: stop hook broke" in (record.hook_error or "")


async def test_subagent_stop_not_fired_without_start(tmp_path: Path) -> None:
    stops: list[Any] = []
    lead, _ = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": ["never"]},
        [definition("worker", mcp_servers=["srv"])],  # setup error: never starts
        tmp_path,
    )
    lead.hooks.add(HookEvent.SubagentStop, stops.append)
    await lead.run("go")
    assert stops == []
    assert lead.list_subagents()[0].status == "failed"


async def test_child_hooks_share_callbacks_not_registries(tmp_path: Path) -> None:
    """Callbacks are shared (captured state shared), the lead's registry is not copied."""
    counter = {"n": 0}

    def count(h: Any) -> None:
        counter["n"] += 1

    calls: list[str] = []
    lead, _ = effect_lead(tmp_path, calls)
    lead.hooks.add(HookEvent.PreToolUse, count)
    await lead.run("go")
    # the lead's delegate call and the child's effect call both went through the same callback
    assert counter["n"] == 2
    assert calls == ["effect"]


async def test_subagent_start_hook_error_is_recorded_and_child_runs(tmp_path: Path) -> None:
    lead, p = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": ["done"]},
        [definition("worker")],
        tmp_path,
    )

    def broken(h: Any) -> None:
        raise RuntimeError("start broke")

    lead.hooks.add(HookEvent.SubagentStart, broken)
    await lead.run("go")
    [record] = lead.list_subagents()
    assert record.status == "completed"
    assert record.hook_error == "SubagentStart: start broke"
    assert len(p.requests_for("worker")) == 1


async def test_factory_cannot_pre_empt_the_leads_pre_tool_use(tmp_path: Path) -> None:
    from deputy_runtime import DelegationResources

    calls: list[str] = []

    def factory(agent: Any, definition: Any, context: Any) -> DelegationResources:
        agent.hooks.add(HookEvent.PreToolUse, lambda h: HookDecision.allow())
        return DelegationResources((make_tool("effect", calls=calls, read_only=True),))

    lead, _ = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": [tool_call("effect", {}), "done"]},
        [definition("worker")],
        tmp_path,
        delegation_policy=DelegationPolicy("owned", resources=factory),
    )
    lead.hooks.add(
        HookEvent.PreToolUse,
        lambda h: HookDecision.deny("host veto") if h.delegation_id else None,
    )
    await lead.run("go")
    assert calls == [], "the child's tool ran although the lead's PreToolUse denied it"


@pytest.mark.parametrize("observed", [False, True])
async def test_observed_user_prompt_submit_can_stop_a_child(tmp_path: Path, observed: bool) -> None:
    seen: list[Any] = []

    def gate(h: Any) -> HookDecision | None:
        seen.append(h)
        if h.delegation_id is not None:
            return HookDecision.deny("no prompts for children")
        return None

    lead, p = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": ["done"]},
        [definition("worker")],
        tmp_path,
        delegation_policy=DelegationPolicy(
            observers=("UserPromptSubmit",) if observed else ()  # type: ignore[arg-type]
        ),
    )
    lead.hooks.add(HookEvent.UserPromptSubmit, gate)
    await lead.run("go")
    [record] = lead.list_subagents()
    child_prompts = [h for h in seen if h.delegation_id is not None]
    if observed:
        assert len(child_prompts) == 1
        assert child_prompts[0].prompt is not None
        assert "deputy_delegation_v1" in child_prompts[0].prompt
        assert (record.status, record.stop_reason) == ("stopped", "hook_requested_stop")
        assert p.requests_for("worker") == []
    else:
        assert child_prompts == []
        assert record.status == "completed"
    # the lead's own prompt always reached its hook
    assert [h.prompt for h in seen if h.delegation_id is None] == ["go"]
