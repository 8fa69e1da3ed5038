"""Property tests for the permission rules (security-relevant, so hypothesis-checked).

Each property states a permission rule as an implication that must hold for
every combination of tool annotations, names, allow/deny lists, modes and paths.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deputy_runtime import PermissionMode
from deputy_runtime.errors import PermissionCeilingError, PermissionModeWideningError
from deputy_runtime.runtime._permissions import (
    KNOWN_WRITE_TOOLS,
    MODE_TRANSITIONS,
    PermissionAllow,
    PermissionDeny,
    Permissions,
    delegate_placeholder,
    normalize_tool_name,
)
from deputy_runtime.tools import Tool

ROOT = Path(os.path.realpath(tempfile.gettempdir())) / "deputy-perm-root"
INTERESTING = [
    "read_file",
    "write_file",
    "edit_file",
    "multi_edit",
    "bash",
    "ask_user",
    "delegate_to_agent",
    "web_search",
    "lookup",
    "Lookup",
    "my-tool",
]
PATHS = [
    "ok.txt",
    "sub/ok.txt",
    "../escape.txt",
    "/etc/passwd",
    str(ROOT / "abs.txt"),
    "",
    "a/../..",
]

names = st.sampled_from(INTERESTING) | st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,8}", fullmatch=True)
modes = st.sampled_from(PermissionMode)


@st.composite
def tools(draw: st.DrawFn) -> Tool:
    name = draw(names)
    # Only the lead's real delegate tool (its placeholder function) is exempt from modes.
    real_delegate = name == "delegate_to_agent" and draw(st.booleans())
    return Tool(
        name=name,
        description="",
        parameters={"type": "object"},
        function=delegate_placeholder if real_delegate else (lambda **kw: None),
        read_only=draw(st.booleans()),
        destructive=draw(st.booleans()),
        idempotent=draw(st.booleans()),
        open_world=draw(st.booleans()),
    )


name_lists = st.lists(names, max_size=4)
arguments = st.fixed_dictionaries({"path": st.sampled_from(PATHS)})


@st.composite
def permissions(draw: st.DrawFn, mode: Any = None) -> Permissions:
    return Permissions(
        mode=draw(modes) if mode is None else mode,
        allow=frozenset(draw(name_lists)),
        deny=frozenset(draw(name_lists)),
        write_root=draw(st.sampled_from([None, ROOT, ROOT / "sub"])),
        working_dir=ROOT,
    )


def _inside(root: Path | None, path: str) -> bool:
    root = root or ROOT
    target = os.path.realpath(os.path.join(ROOT, path))
    return target == str(root) or target.startswith(str(root) + os.sep)


def _read_only(tool: Tool, name: str) -> bool:
    return tool.read_only and not tool.destructive and name not in KNOWN_WRITE_TOOLS


FAST = settings(max_examples=int(os.environ.get("DEPUTY_PROPERTY_EXAMPLES", "400")), deadline=None)


@FAST
@given(perms=permissions(), tool=tools(), args=arguments)
def test_allowed_only_if_mode_and_lists_allow(
    perms: Permissions, tool: Tool, args: dict[str, Any]
) -> None:
    name = normalize_tool_name(tool.name)
    allowed = perms.check_static(tool, args) is None
    listed = name in perms.allow
    lists_ok = name not in perms.deny and (not perms.allow or listed)
    if allowed:
        assert lists_ok
    if tool.function is delegate_placeholder or perms.mode == "full":
        assert allowed == lists_ok
        return
    if perms.mode == "standard":
        if allowed and name in ("write_file", "edit_file", "multi_edit"):
            assert _inside(perms.write_root, args["path"])
        if allowed and tool.destructive:
            assert listed or name in ("write_file", "edit_file", "multi_edit")
        if (
            lists_ok
            and not tool.destructive
            and name not in ("write_file", "edit_file", "multi_edit")
        ):
            assert allowed
        return
    # readonly and plan
    plan_ask = (
        perms.mode == "plan" and name == "ask_user" and tool.read_only and not tool.destructive
    )
    if allowed:
        assert (
            plan_ask
            or (_read_only(tool, name) and name != "ask_user")
            or (listed and not tool.destructive and name not in KNOWN_WRITE_TOOLS)
        )
    if lists_ok and (plan_ask or (_read_only(tool, name) and name != "ask_user")):
        assert allowed


@FAST
@given(perms=permissions(mode="readonly"), tool=tools(), args=arguments)
def test_readonly_never_allows_non_read_only_unlisted_tools(
    perms: Permissions, tool: Tool, args: dict[str, Any]
) -> None:
    name = normalize_tool_name(tool.name)
    if perms.check_static(tool, args) is None and tool.function is not delegate_placeholder:
        assert (tool.read_only and not tool.destructive) or name in perms.allow
        assert name not in KNOWN_WRITE_TOOLS
        assert not tool.destructive


@FAST
@given(perms=permissions(), tool=tools(), args=arguments, deny_name=names)
def test_deny_always_wins(
    perms: Permissions, tool: Tool, args: dict[str, Any], deny_name: str
) -> None:
    denied = Permissions(
        mode=perms.mode,
        allow=frozenset({*perms.allow, tool.name}),
        deny=frozenset({*perms.deny, tool.name}),
        write_root=perms.write_root,
        working_dir=perms.working_dir,
    )
    assert denied.check_static(tool, args) is not None


@FAST
@given(perms=permissions(), target=modes, tool=tools(), args=arguments)
def test_narrowing_never_grants(
    perms: Permissions, target: str, tool: Tool, args: dict[str, Any]
) -> None:
    try:
        narrowed = perms.narrow(target)
    except PermissionModeWideningError:
        assert target not in MODE_TRANSITIONS[perms.mode]
        return
    assert target in MODE_TRANSITIONS[perms.mode]
    if narrowed.check_static(tool, args) is None:
        assert perms.check_static(tool, args) is None


@FAST
@given(
    lead=permissions(),
    requested=st.none() | modes,
    extra=name_lists,
    tool=tools(),
    args=arguments,
)
def test_ceiling_never_allows_what_lead_denies(
    lead: Permissions,
    requested: str | None,
    extra: list[str],
    tool: Tool,
    args: dict[str, Any],
) -> None:
    try:
        child = lead.ceiling(requested, extra)
    except PermissionCeilingError:
        assert requested is not None
        assert requested not in MODE_TRANSITIONS[lead.mode]
        return
    assert child.mode == (requested or lead.mode)
    if child.check_static(tool, args) is None:
        assert lead.check_static(tool, args) is None
        assert normalize_tool_name(tool.name) not in {normalize_tool_name(e) for e in extra}


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=60, deadline=None)
@given(
    perms=permissions(mode="full"),
    tool=tools(),
    junk=st.none()
    | st.booleans()
    | st.integers()
    | st.text(max_size=5)
    | st.dictionaries(st.text(max_size=3), st.booleans(), max_size=2)
    | st.just("raise"),
)
def test_callback_raising_or_junk_denies(
    backend: str, perms: Permissions, tool: Tool, junk: Any
) -> None:
    """can_use_tool that raises or returns anything but a permission result denies."""

    async def callback(name: str, args: Any, ctx: Any) -> Any:
        if junk == "raise":
            raise ValueError("broken callback")
        return junk

    guarded = Permissions(
        mode=perms.mode,
        allow=perms.allow,
        deny=perms.deny,
        can_use_tool=callback,
        working_dir=ROOT,
    )
    result = anyio.run(guarded.check, tool, {"path": "ok.txt"}, None, backend=backend)
    assert isinstance(result, PermissionDeny)
    assert not isinstance(result, PermissionAllow)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=100, deadline=None)
@given(perms=permissions(), tool=tools(), args=arguments, verdict=st.booleans())
def test_check_is_static_then_callback(
    backend: str, perms: Permissions, tool: Tool, args: dict[str, Any], verdict: bool
) -> None:
    """check() allows exactly when check_static() does and the callback allows; the
    callback is asked only about calls the static rules already allow."""
    asked: list[str] = []

    def callback(name: str, arguments: Any, ctx: Any) -> PermissionAllow | PermissionDeny:
        asked.append(name)
        return PermissionAllow() if verdict else PermissionDeny("callback says no")

    guarded = Permissions(
        mode=perms.mode,
        allow=perms.allow,
        deny=perms.deny,
        can_use_tool=callback,
        write_root=perms.write_root,
        working_dir=perms.working_dir,
    )
    static_ok = guarded.check_static(tool, args) is None
    result = anyio.run(guarded.check, tool, args, None, backend=backend)
    assert isinstance(result, PermissionAllow) == (static_ok and verdict)
    assert asked == ([tool.name] if static_ok else [])
