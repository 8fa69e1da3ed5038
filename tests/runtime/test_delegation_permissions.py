"""Permission ceilings for subagents.

The ceiling is fixed when a delegation starts (mode transition table, lead deny list and
``can_use_tool`` inherited, ``disallowed_tools`` added), and every child tool call is also
checked against the lead's *current* permissions. Real file tools on a tmp directory.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import anyio
import pytest

from deputy_runtime import (
    HookDecision,
    HookEvent,
    PermissionAllow,
    PermissionDeny,
    PermissionMode,
    Permissions,
    tools_file,
)
from deputy_runtime.chat import reply, tool_call
from deputy_runtime.runtime import MODE_TRANSITIONS, PermissionEvent
from tests.runtime.helpers import (
    definition,
    delegate,
    delegate_results,
    make_tool,
    scripted_lead,
    tool_results,
)

pytestmark = pytest.mark.anyio

MODES = ("readonly", "plan", "standard", "full")


def file_tools(root: Path) -> dict[str, Any]:
    return {t.name: t for t in tools_file(root)}


def child_error(provider: Any, agent: str = "worker", index: int = 1) -> str | None:
    """The error of the first tool result in the child's ``index``-th request."""
    [result] = tool_results(provider.requests_for(agent)[index])
    return result.error


# -- the transition table -------------------------------------------------------------------


@pytest.mark.parametrize(("lead_mode", "child_mode"), list(itertools.product(MODES, MODES)))
async def test_mode_transition_table_for_children(
    tmp_path: Path, lead_mode: str, child_mode: str
) -> None:
    lead, p = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": ["done"]},
        [definition("worker", permission_mode=child_mode)],
        tmp_path,
        permissions=Permissions(mode=PermissionMode(lead_mode)),
    )
    await lead.run("go")
    [record] = lead.list_subagents()
    if child_mode in MODE_TRANSITIONS[PermissionMode(lead_mode)]:
        assert record.status == "completed"
        assert [r.agent_id for r in lead.get_subagent_results() if r] == [record.agent_id]
    else:
        assert (record.status, record.stop_reason) == ("failed", "setup_error")
        assert p.requests_for("worker") == []
        assert f"Lead mode {lead_mode} cannot delegate with mode {child_mode}" in (
            delegate_results(p)[0].error or ""
        )


@pytest.mark.parametrize("lead_mode", MODES)
async def test_delegate_is_allowed_in_every_lead_mode(tmp_path: Path, lead_mode: str) -> None:
    lead, _ = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": ["done"]},
        [definition("worker")],
        tmp_path,
        permissions=Permissions(mode=lead_mode),  # type: ignore[arg-type]
    )
    await lead.run("go")
    [record] = lead.list_subagents()
    assert record.status == "completed"


# -- the ceiling --------------------------------------------------------------------------------


async def test_full_lead_readonly_child_cannot_write(tmp_path: Path) -> None:
    files = file_tools(tmp_path)
    lead, p = scripted_lead(
        {
            "lead": [delegate("worker"), reply("ok")],
            "worker": [tool_call("write_file", {"path": "x.txt", "content": "hi"}), "done"],
        },
        [definition("worker", tools=[files["write_file"]], permission_mode="readonly")],
        tmp_path,
        permissions=Permissions(mode=PermissionMode.FULL),
    )
    await lead.run("go")
    assert not (tmp_path / "x.txt").exists()
    assert "readonly" in (child_error(p) or "")


async def test_lead_deny_list_applies_to_children(tmp_path: Path) -> None:
    calls: list[str] = []
    effect = make_tool("effect", calls=calls, read_only=True)
    lead, p = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": [tool_call("effect", {}), "done"]},
        [definition("worker", tools=[effect])],
        tmp_path,
        permissions=Permissions(mode=PermissionMode.FULL, deny=frozenset({"Effect"})),
    )
    await lead.run("go")
    assert calls == []
    assert "deny list" in (child_error(p) or "")


async def test_lead_can_use_tool_applies_to_children(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("secret")
    files = file_tools(tmp_path)
    seen: list[Any] = []

    def callback(name: str, arguments: Any, context: Any) -> Any:
        seen.append((name, context.agent_id if context is not None else None))
        if name == "read_file":
            return PermissionDeny("custom read denial")
        return PermissionAllow()

    lead, p = scripted_lead(
        {
            "lead": [delegate("worker"), reply("ok")],
            "worker": [tool_call("read_file", {"path": "notes.txt"}), "done"],
        },
        [definition("worker", tools=[files["read_file"]], permission_mode="readonly")],
        tmp_path,
        permissions=Permissions(mode=PermissionMode.STANDARD, can_use_tool=callback),
    )
    await lead.run("go")
    error = child_error(p) or ""
    assert "custom read denial" in error
    assert "secret" not in repr(p.requests_for("worker")[1])
    [record] = lead.list_subagents()
    assert [s for s in seen if s[0] == "read_file"] == [("read_file", record.agent_id)]


async def test_lead_allow_list_gates_children(tmp_path: Path) -> None:
    calls: list[str] = []
    lead, p = scripted_lead(
        {
            "lead": [delegate("worker"), reply("ok")],
            "worker": [tool_call("other", {}), tool_call("lookup", {}), "done"],
        },
        [
            definition(
                "worker",
                tools=[
                    make_tool("lookup", calls=calls, read_only=True),
                    make_tool("other", calls=calls, read_only=True),
                ],
            )
        ],
        tmp_path,
        permissions=Permissions(
            mode=PermissionMode.STANDARD, allow=frozenset({"delegate_to_agent", "lookup"})
        ),
    )
    await lead.run("go")
    assert calls == ["lookup"]
    assert "allow list" in (child_error(p, index=1) or "")


async def test_disallowed_tools_removes_definition_and_skill_tools(tmp_path: Path) -> None:
    from deputy_runtime import Skill

    calls: list[str] = []
    skill = Skill(
        "helper-skill",
        "a skill",
        "instructions",
        tools=(make_tool("effect", calls=calls, read_only=True),),
    )
    lead, p = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": [tool_call("effect", {}), "done"]},
        [
            definition(
                "worker",
                tools=[make_tool("keep", read_only=True)],
                skills=[skill],
                disallowed_tools=["effect"],
            )
        ],
        tmp_path,
    )
    await lead.run("go")
    names = [t.name for t in p.requests_for("worker")[0].tools]
    assert "effect" not in names
    assert "keep" in names
    assert calls == []


# -- live re-check against the lead's current permissions --------------------------------------


async def test_lead_narrowed_in_subagent_start_denies_the_childs_later_write(
    tmp_path: Path,
) -> None:
    files = file_tools(tmp_path)
    lead, p = scripted_lead(
        {
            "lead": [delegate("worker"), reply("ok")],
            "worker": [
                tool_call("write_file", {"path": "result.txt", "content": "data"}),
                "could not write",
            ],
        },
        [definition("worker", tools=[files["write_file"]])],
        tmp_path,
        permissions=Permissions(mode=PermissionMode.STANDARD),
    )
    lead.hooks.add(HookEvent.SubagentStart, lambda h: lead.set_permission_mode("readonly"))
    events = [e async for e in lead.run_stream("go")]
    assert not (tmp_path / "result.txt").exists()
    error = child_error(p) or ""
    assert "readonly" in error
    [record] = lead.list_subagents()
    assert record.status == "completed"
    denials = [
        e
        for e in events
        if isinstance(e, PermissionEvent) and e.delegation_id == record.delegation_id
    ]
    assert [(d.decision, d.tool_name) for d in denials] == [("deny", "write_file")]


async def test_lead_narrowed_mid_delegation_narrows_the_running_child(tmp_path: Path) -> None:
    files = file_tools(tmp_path)
    lead, p = scripted_lead(
        {
            "lead": [delegate("worker"), reply("ok")],
            "worker": [
                tool_call("write_file", {"path": "one.txt", "content": "1"}),
                tool_call("write_file", {"path": "two.txt", "content": "2"}),
                "done",
            ],
        },
        [definition("worker", tools=[files["write_file"]])],
        tmp_path,
    )

    def narrow_after_first_write(h: Any) -> None:
        if h.delegation_id is not None:
            lead.set_permission_mode("readonly")

    lead.hooks.add(HookEvent.PostToolUse, narrow_after_first_write)
    await lead.run("go")
    assert (tmp_path / "one.txt").read_text() == "1"
    assert not (tmp_path / "two.txt").exists()
    assert "readonly" in (child_error(p, index=2) or "")


async def test_permission_request_is_never_forwarded(tmp_path: Path) -> None:
    files = file_tools(tmp_path)
    asked: list[Any] = []

    def approve_everything(h: Any) -> HookDecision:
        asked.append(h)
        return HookDecision.allow()

    lead, p = scripted_lead(
        {
            "lead": [delegate("worker"), reply("ok")],
            "worker": [tool_call("write_file", {"path": "x.txt", "content": "hi"}), "done"],
        },
        [definition("worker", tools=[files["write_file"]], permission_mode="readonly")],
        tmp_path,
    )
    lead.hooks.add(HookEvent.PermissionRequest, approve_everything)
    await lead.run("go")
    assert asked == []
    assert not (tmp_path / "x.txt").exists()
    assert "readonly" in (child_error(p) or "")


async def test_child_write_root_is_the_leads(tmp_path: Path) -> None:
    inside = tmp_path / "work"
    inside.mkdir()
    files = file_tools(tmp_path)
    lead, p = scripted_lead(
        {
            "lead": [delegate("worker"), reply("ok")],
            "worker": [tool_call("write_file", {"path": "../escape.txt", "content": "x"}), "done"],
        },
        [definition("worker", tools=[files["write_file"]])],
        inside,
    )
    await lead.run("go")
    assert not (tmp_path / "escape.txt").exists()
    assert child_error(p) is not None


# -- tools whose *names* match a special tool ---------------------------------------------------


async def test_a_child_tool_named_like_the_delegate_tool_gets_no_exemption(
    tmp_path: Path,
) -> None:
    calls: list[str] = []
    spoof = make_tool("delegate_to_agent", calls=calls, destructive=True)
    lead, _ = scripted_lead(
        {
            "lead": [delegate("worker"), reply("ok")],
            "worker": [tool_call("delegate_to_agent", {}), "done"],
        },
        [definition("worker", tools=[spoof])],
        tmp_path,
        permissions=Permissions(mode=PermissionMode.READONLY),
    )
    await lead.run("go")
    assert calls == [], "a destructive tool ran in a readonly subagent"


async def test_an_unannotated_tool_named_like_ask_user_is_not_allowed_in_plan(
    tmp_path: Path,
) -> None:
    calls: list[str] = []
    spoof = make_tool("Ask-User", calls=calls)  # no annotations: plan must deny it
    lead, _ = scripted_lead(
        {"lead": [delegate("worker"), reply("ok")], "worker": [tool_call("Ask-User", {}), "done"]},
        [definition("worker", tools=[spoof])],
        tmp_path,
        permissions=Permissions(mode=PermissionMode.PLAN),
    )
    await lead.run("go")
    assert calls == [], "an unannotated tool ran in a plan subagent"


async def test_lead_narrowed_during_pre_tool_use_still_denies_the_write(tmp_path: Path) -> None:
    files = file_tools(tmp_path)
    lead, _ = scripted_lead(
        {
            "lead": [delegate("worker"), reply("ok")],
            "worker": [tool_call("write_file", {"path": "x.txt", "content": "hi"}), "done"],
        },
        [definition("worker", tools=[files["write_file"]])],
        tmp_path,
        permissions=Permissions(mode=PermissionMode.STANDARD),
    )

    async def slow_approval(h: Any) -> None:
        if h.delegation_id is not None and h.tool_name == "write_file":
            await anyio.sleep(0)  # e.g. waiting for a person or a policy service
            lead.set_permission_mode("readonly")  # meanwhile the host narrows the lead

    lead.hooks.add(HookEvent.PreToolUse, slow_approval)
    await lead.run("go")
    assert lead.permissions.mode == "readonly"
    assert not (tmp_path / "x.txt").exists(), "the write ran under a readonly lead"
