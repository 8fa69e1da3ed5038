"""Property tests of the permission rules on the durable path: the ceiling a delegation
gets in workflow code, and the tool activity's double check (a subagent's call runs only
if its own permissions and its lead's both allow it). No server needed: the activity runs
in Temporal's ``ActivityEnvironment``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from temporalio.testing import ActivityEnvironment

from deputy_runtime import (
    MODE_TRANSITIONS,
    PermissionCeilingError,
    PermissionMode,
    Permissions,
    Tool,
)
from deputy_runtime.temporal import (
    AgentSpec,
    DeputyActivities,
    PermissionSpec,
    ToolCall,
    child_permissions,
)

MODES = sorted(MODE_TRANSITIONS)
TOOL_NAMES = ("alpha", "beta", "gamma")

names = st.lists(st.sampled_from(TOOL_NAMES), max_size=3, unique=True).map(tuple)
specs = st.builds(
    PermissionSpec, mode=st.sampled_from(MODES), allow=names, deny=names, write_root=st.none()
)


def _spec(mode: str | None, disallowed: tuple[str, ...]) -> AgentSpec:
    return AgentSpec(
        name="child",
        description="d",
        system_prompt="p",
        permission_mode=mode,
        disallowed_tools=disallowed,
    )


@settings(max_examples=300, deadline=None)
@given(lead=specs, mode=st.one_of(st.none(), st.sampled_from(MODES)), disallowed=names)
def test_a_child_never_gets_wider_than_its_lead(
    lead: PermissionSpec, mode: str | None, disallowed: tuple[str, ...]
) -> None:
    wanted = lead.mode if mode is None else mode
    if wanted not in MODE_TRANSITIONS[PermissionMode(lead.mode)]:
        with pytest.raises(PermissionCeilingError, match=f"Lead mode {lead.mode}"):
            child_permissions(lead, _spec(mode, disallowed))
        return
    child = child_permissions(lead, _spec(mode, disallowed))
    assert child.mode == wanted
    assert set(child.deny) == set(lead.deny) | set(disallowed)
    assert set(child.allow) == set(lead.allow)
    assert child.write_root == lead.write_root


def _tool(
    name: str, calls: list[str], *, read_only: bool = False, destructive: bool = False
) -> Tool:
    def run(**_: Any) -> str:
        calls.append(name)
        return f"{name} ran"

    parameters = {"type": "object", "properties": {}, "additionalProperties": True}
    return Tool(
        name, f"The {name} tool.", parameters, run, read_only=read_only, destructive=destructive
    )


def _denied(spec: PermissionSpec, tool: Tool, workdir: Path) -> bool:
    permissions = Permissions(
        mode=PermissionMode(spec.mode), allow=frozenset(spec.allow), deny=frozenset(spec.deny)
    )
    return permissions.bind(workdir).check_static(tool, {}) is not None


@settings(max_examples=200, deadline=None)
@given(
    own=specs,
    lead=specs,
    name=st.sampled_from(TOOL_NAMES),
    read_only=st.booleans(),
    destructive=st.booleans(),
)
def test_a_tool_call_runs_only_when_both_permission_sets_allow_it(
    tmp_path_factory: pytest.TempPathFactory,
    own: PermissionSpec,
    lead: PermissionSpec,
    name: str,
    read_only: bool,
    destructive: bool,
) -> None:
    workdir = tmp_path_factory.getbasetemp()
    calls: list[str] = []
    tool = _tool(name, calls, read_only=read_only, destructive=destructive)
    activities = DeputyActivities([tool], working_dir=workdir)
    call = ToolCall(
        request_id="call_1",
        name=name,
        arguments={},
        offered=(name,),
        permissions=own,
        lead_permissions=lead,
    )
    reply = asyncio.run(ActivityEnvironment().run(activities.tool_call, call))
    denied = _denied(own, tool, workdir) or _denied(lead, tool, workdir)
    assert (reply.denied is not None) == denied
    assert calls == ([] if denied else [name])
    if denied:
        assert reply.result.error is not None
        assert reply.result.error.startswith("Permission denied: ")
    else:
        assert reply.result.value == f"{name} ran"


def test_a_tool_not_offered_is_unknown_even_if_the_worker_has_it(tmp_path: Path) -> None:
    calls: list[str] = []
    activities = DeputyActivities([_tool("alpha", calls)], working_dir=tmp_path)
    call = ToolCall(
        request_id="c", name="alpha", arguments={}, offered=("beta",), permissions=PermissionSpec()
    )
    reply = asyncio.run(ActivityEnvironment().run(activities.tool_call, call))
    assert reply.result.error == "Unknown tool: alpha. Available tools: beta"
    assert calls == []
