"""Property: a subagent never runs a tool its lead's current permissions would deny.

Hypothesis draws the lead's mode, allow and deny lists and ``can_use_tool`` denials, the
definition's mode and ``disallowed_tools``, optional narrowing of the lead while the child
runs, and the child's tool calls. Each example drives real delegations on a scripted
provider (once per anyio backend) and checks every tool execution, at the moment it
happens, against two oracles: the lead's live ``Permissions`` and an independent model of
the mode rules written from the spec (so a bug shared by both checks is still caught).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deputy_runtime import (
    Chat,
    HookEvent,
    LeadAgent,
    PermissionAllow,
    PermissionDeny,
    PermissionMode,
    Permissions,
    Tool,
    tools_file,
)
from deputy_runtime.chat import ScriptedProvider, reply, tool_calls
from deputy_runtime.errors import PermissionModeWideningError
from deputy_runtime.runtime import MODE_TRANSITIONS
from tests.runtime.helpers import definition, delegate

MODES = ("readonly", "plan", "standard", "full")
CUSTOM: dict[str, dict[str, Any]] = {
    "reader": {"read_only": True},
    "plain": {},
    "nuke": {"destructive": True},
    "browse": {"read_only": True, "open_world": True},
}
TOOL_NAMES = (*CUSTOM, "read_file", "write_file")
KNOWN_WRITE = {
    "write_file",
    "edit_file",
    "multi_edit",
    "notebook_edit",
    "bash",
    "kill_shell",
    "run_code",
    "install_package",
}


def spec_allows(
    mode: str, perms: Permissions, tool: Tool, args: dict[str, Any], root: Path
) -> bool:
    """The permission modes written out independently (deny wins; an allow list gates)."""
    name = tool.name.lower()
    if name in perms.deny:
        return False
    if perms.allow and name not in perms.allow:
        return False
    if mode == "full":
        return True
    if mode == "standard":
        if tool.destructive and name not in perms.allow:
            return False
        if name == "write_file":
            target = os.path.realpath(os.path.join(root, args.get("path", "")))
            return target.startswith(str(root) + os.sep)
        return True
    # readonly and plan: nothing that writes or destroys; read-only tools or allowlisted
    if tool.destructive or name in KNOWN_WRITE:
        return False
    return tool.read_only or name in perms.allow


class Example(msgspec.Struct, frozen=True):
    lead_mode: str
    allow: tuple[str, ...]
    deny: tuple[str, ...]
    callback_denies: tuple[str, ...]
    child_mode: str | None
    disallowed: tuple[str, ...]
    narrow_at_start: str | None
    narrow_mid_run: str | None
    turns: tuple[tuple[tuple[str, str], ...], ...]


names = st.sampled_from(TOOL_NAMES)
examples = st.builds(
    Example,
    lead_mode=st.sampled_from(MODES),
    allow=st.one_of(
        st.just(()),
        st.lists(names, max_size=3, unique=True).map(lambda xs: (*xs, "delegate_to_agent")),
    ).map(tuple),
    deny=st.lists(names, max_size=2, unique=True).map(tuple),
    callback_denies=st.lists(names, max_size=2, unique=True).map(tuple),
    child_mode=st.one_of(st.none(), st.sampled_from(MODES)),
    disallowed=st.lists(names, max_size=2, unique=True).map(tuple),
    narrow_at_start=st.one_of(st.none(), st.sampled_from(MODES)),
    narrow_mid_run=st.one_of(st.none(), st.sampled_from(MODES)),
    turns=st.lists(
        st.lists(
            st.tuples(names, st.sampled_from(("inside.txt", "../outside.txt", "sub/x.txt"))),
            min_size=1,
            max_size=4,
        ).map(tuple),
        min_size=1,
        max_size=3,
    ).map(tuple),
)


async def _run_example(ex: Example, root: Path) -> tuple[list[str], int]:
    violations: list[str] = []
    executed = 0
    lead: LeadAgent
    real = {t.name: t for t in tools_file(root)}

    def guard(tool: Tool, function: Any) -> Tool:
        async def run(**kwargs: Any) -> Any:
            nonlocal executed
            executed += 1
            perms = lead.permissions
            if perms.check_static(tool, kwargs) is not None:
                violations.append(f"{tool.name} ran; lead's live check denies it: {perms}")
            if not spec_allows(perms.mode, perms, tool, kwargs, root):
                violations.append(f"{tool.name} ran in lead mode {perms.mode} ({kwargs})")
            if ex.child_mode is not None and not spec_allows(
                ex.child_mode, perms, tool, kwargs, root
            ):
                violations.append(f"{tool.name} ran above the child's mode {ex.child_mode}")
            if tool.name in ex.disallowed:
                violations.append(f"{tool.name} ran although disallowed")
            if tool.name in ex.callback_denies:
                violations.append(f"{tool.name} ran although can_use_tool denies it")
            result = function(**kwargs)
            if hasattr(result, "__await__"):
                result = await result
            return result

        return msgspec.structs.replace(tool, function=run)

    tools = [
        guard(
            Tool(
                n,
                n,
                {"type": "object", "properties": {}, "additionalProperties": True},
                lambda **kw: "ok",
                **a,
            ),
            lambda **kw: "ok",
        )
        for n, a in CUSTOM.items()
    ]
    tools += [
        guard(real["read_file"], real["read_file"].function),
        guard(real["write_file"], real["write_file"].function),
    ]

    def callback(name: str, arguments: Any, context: Any) -> Any:
        return (
            PermissionDeny("callback says no")
            if name in ex.callback_denies
            else (PermissionAllow())
        )

    def child_turn(calls: tuple[tuple[str, str], ...]) -> Any:
        return tool_calls(
            *[
                (
                    n,
                    {"path": p, "content": "x"}
                    if n == "write_file"
                    else {"path": "inside.txt"}
                    if n == "read_file"
                    else {},
                )
                for n, p in calls
            ]
        )

    provider = ScriptedProvider(
        {
            "lead": [delegate("worker"), delegate("worker"), reply("done")],
            "worker": [*(child_turn(t) for t in ex.turns), "child done"] * 2,
        }
    )
    lead = LeadAgent(
        Chat(provider),
        [
            definition(
                "worker",
                tools=tools,
                permission_mode=ex.child_mode,
                disallowed_tools=list(ex.disallowed) or None,
            )
        ],
        working_dir=root,
        permissions=Permissions(
            mode=PermissionMode(ex.lead_mode),
            allow=frozenset(ex.allow),
            deny=frozenset(ex.deny),
            can_use_tool=callback,
        ),
    )

    def narrow(mode: str | None) -> None:
        if mode is not None and mode in MODE_TRANSITIONS[lead.permissions.mode]:
            lead.set_permission_mode(mode)
        elif mode is not None:
            with pytest.raises(PermissionModeWideningError):
                lead.set_permission_mode(mode)

    lead.hooks.add(HookEvent.SubagentStart, lambda h: narrow(ex.narrow_at_start))
    lead.hooks.add(
        HookEvent.PostToolUse,
        lambda h: narrow(ex.narrow_mid_run) if h.delegation_id is not None else None,
    )
    await lead.run("go")
    return violations, executed


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ex=examples)
def test_no_child_runs_a_tool_the_leads_current_permissions_deny(backend: str, ex: Example) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(os.path.realpath(tmp)) / "work"
        (root / "sub").mkdir(parents=True)
        (root / "inside.txt").write_text("data")
        violations, _ = anyio.run(_run_example, ex, root, backend=backend)
        assert violations == []
        assert not (root.parent / "outside.txt").exists() or ex.lead_mode == "full"


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_property_exercises_real_executions(backend: str) -> None:
    """Guard against a vacuous property: permissive examples really run tools."""
    ex = Example(
        lead_mode="full",
        allow=(),
        deny=(),
        callback_denies=(),
        child_mode=None,
        disallowed=(),
        narrow_at_start=None,
        narrow_mid_run=None,
        turns=((("reader", "inside.txt"), ("write_file", "inside.txt")),),
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(os.path.realpath(tmp))
        (root / "inside.txt").write_text("data")
        violations, executed = anyio.run(_run_example, ex, root, backend=backend)
    assert violations == []
    assert executed == 4  # two calls in each of the two delegations
