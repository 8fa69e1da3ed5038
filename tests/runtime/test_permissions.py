"""Permissions: modes, lists, write root, can_use_tool, transitions and ceilings."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from deputy_runtime import PermissionMode
from deputy_runtime.errors import (
    PermissionCeilingError,
    PermissionModeWideningError,
    PermissionsError,
)
from deputy_runtime.runtime._permissions import (
    MODE_TRANSITIONS,
    PermissionAllow,
    PermissionDeny,
    Permissions,
    delegate_placeholder,
    normalize_tool_name,
)
from deputy_runtime.tools import Tool, ask_user, tools_file

pytestmark = pytest.mark.anyio


def make_tool(name: str, **annotations: Any) -> Tool:
    return Tool(
        name=name,
        description="",
        parameters={"type": "object", "properties": {}},
        function=lambda **kw: None,
        **annotations,
    )


READER = make_tool("lookup", read_only=True)
PLAIN = make_tool("compute")
NUKE = make_tool("nuke", destructive=True)
DELEGATE = Tool(
    name="delegate_to_agent",
    description="",
    parameters={"type": "object", "properties": {}},
    function=delegate_placeholder,
)
SPOOFED_DELEGATE = make_tool("delegate_to_agent")


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Tool]:
    (tmp_path / "sub").mkdir()
    return {t.name: t for t in tools_file(tmp_path)}


def allowed(perms: Permissions, tool: Tool, args: Mapping[str, Any] | None = None) -> bool:
    return perms.check_static(tool, args or {}) is None


# -- construction ---------------------------------------------------------------------


def test_presets_and_defaults() -> None:
    assert Permissions().mode == "standard"
    # The documented list form; the field is annotated as the frozenset it becomes.
    assert Permissions(mode=PermissionMode.FULL, deny=["x"]).deny == frozenset({"x"})  # type: ignore[arg-type]


def test_names_are_normalised() -> None:
    # Lists and tuples are accepted (documented); the fields are annotated as frozensets.
    perms = Permissions(allow=["Read_File", "My-Tool"], deny=("WRITE file",))  # type: ignore[arg-type]
    assert perms.allow == frozenset({"read_file", "my_tool"})
    assert perms.deny == frozenset({"write_file"})
    assert normalize_tool_name("Grep-Files") == "grep_files"
    assert not allowed(perms, make_tool("Write_File"))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "admin"}, "mode 'admin' is invalid"),
        ({"allow": "read_file"}, "allow must be a list"),
        ({"deny": [""]}, "deny entries must be non-empty strings"),
        ({"deny": [3]}, "deny entries must be non-empty strings"),
        ({"can_use_tool": 5}, "can_use_tool must be callable"),
        ({"write_root": 5}, "write_root must be a path"),
    ],
)
def test_invalid_construction_names_the_field(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(PermissionsError, match=message):
        Permissions(**kwargs)


def test_frozen() -> None:
    with pytest.raises(AttributeError):
        Permissions().mode = PermissionMode.FULL  # type: ignore[misc]  # frozen: under test


def test_bind_sets_working_dir_and_default_write_root(tmp_path: Path) -> None:
    bound = Permissions().bind(tmp_path)
    assert bound.working_dir == bound.write_root == Path(os.path.realpath(tmp_path))
    assert bound.bind(tmp_path / "other") is bound  # already bound: kept
    explicit = Permissions(write_root=tmp_path / "sub").bind(tmp_path)
    assert explicit.write_root == Path(os.path.realpath(tmp_path / "sub"))
    assert explicit.working_dir == Path(os.path.realpath(tmp_path))


# -- mode rules -----------------------------------------------------------------------


def test_readonly_rules(files: dict[str, Tool]) -> None:
    ro = Permissions(mode=PermissionMode.READONLY)
    for name in ("read_file", "list_files", "grep_files"):
        assert allowed(ro, files[name], {"path": "."})
    assert allowed(ro, READER)
    for tool in (PLAIN, NUKE, files["write_file"], files["edit_file"], ask_user):
        denial = ro.check_static(tool, {"path": "x"})
        assert isinstance(denial, PermissionDeny)
        assert "readonly" in denial.reason
        assert tool.name in denial.reason
    # A read-only annotation does not make a known write tool or a destructive tool safe.
    assert not allowed(ro, make_tool("write_file", read_only=True))
    assert not allowed(ro, make_tool("odd", read_only=True, destructive=True))
    # The allowlist grants non-writing tools, never destructive or known write tools.
    listed = Permissions(
        mode=PermissionMode.READONLY, allow=frozenset({"compute", "nuke", "write_file", "ask_user"})
    )
    assert allowed(listed, PLAIN)
    assert allowed(listed, ask_user)
    assert not allowed(listed, NUKE)
    assert not allowed(listed, files["write_file"], {"path": "x"})


def test_plan_adds_ask_user_and_suggests_it(files: dict[str, Tool]) -> None:
    plan = Permissions(mode=PermissionMode.PLAN)
    assert allowed(plan, ask_user)
    assert allowed(plan, READER)
    denial = plan.check_static(files["write_file"], {"path": "x"})
    assert denial is not None
    assert "Use ask_user" in denial.reason
    no_ask = Permissions(mode=PermissionMode.PLAN, deny=frozenset({"ask_user"}))
    assert not allowed(no_ask, ask_user)
    denial = no_ask.check_static(PLAIN, {})
    assert denial is not None
    assert "ask_user" not in denial.reason
    gated = Permissions(mode=PermissionMode.PLAN, allow=frozenset({"compute"}))
    denial = gated.check_static(NUKE, {})
    assert denial is not None
    assert "ask_user" not in denial.reason


def test_standard_rules_and_write_root(tmp_path: Path, files: dict[str, Tool]) -> None:
    std = Permissions(mode=PermissionMode.STANDARD).bind(tmp_path)
    assert allowed(std, PLAIN)
    assert allowed(std, READER)
    assert allowed(std, ask_user)
    denial = std.check_static(NUKE, {})
    assert denial is not None
    assert "destructive" in denial.reason
    assert allowed(Permissions(mode=PermissionMode.STANDARD, allow=frozenset({"nuke"})), NUKE)
    write = files["write_file"]
    assert allowed(std, write, {"path": "ok.txt"})
    assert allowed(std, write, {"path": str(tmp_path / "sub" / "x")})
    for bad in ("../x", "/etc/passwd", "sub/../../x"):
        denial = std.check_static(write, {"path": bad})
        assert denial is not None
        assert "may only write under" in denial.reason
    for bad_arg in ({}, {"path": ""}, {"path": 3}, {"path": "a\x00b"}):
        assert not allowed(std, files["edit_file"], bad_arg)
    narrow_root = Permissions(mode=PermissionMode.STANDARD, write_root=tmp_path / "sub").bind(
        tmp_path
    )
    assert allowed(narrow_root, write, {"path": "sub/x.txt"})
    assert not allowed(narrow_root, write, {"path": "x.txt"})
    os.symlink("/tmp", tmp_path / "sub" / "escape")
    assert not allowed(narrow_root, write, {"path": "sub/escape/x"})


def test_unbound_standard_uses_current_directory(tmp_path: Path, files: dict[str, Tool]) -> None:
    std = Permissions(mode=PermissionMode.STANDARD)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert allowed(std, files["write_file"], {"path": "x.txt"})
        assert not allowed(std, files["write_file"], {"path": "../x.txt"})
    finally:
        os.chdir(cwd)


def test_full_allows_all_but_denied(files: dict[str, Tool]) -> None:
    full = Permissions(mode=PermissionMode.FULL, deny=frozenset({"nuke"}))
    assert allowed(full, PLAIN)
    assert allowed(full, ask_user)
    assert allowed(full, files["write_file"], {"path": "/anywhere"})
    assert not allowed(full, NUKE)


def test_deny_wins_over_allow_in_every_mode() -> None:
    for mode in MODE_TRANSITIONS:
        perms = Permissions(mode=mode, allow=["lookup"], deny=["LOOKUP"])  # type: ignore[arg-type]
        denial = perms.check_static(READER, {})
        assert denial is not None
        assert "deny list" in denial.reason


def test_allow_list_gates_every_mode() -> None:
    for mode in MODE_TRANSITIONS:
        perms = Permissions(mode=mode, allow=["compute"])  # type: ignore[arg-type]
        denial = perms.check_static(READER, {})
        assert denial is not None
        assert "not on the allow list (compute)" in denial.reason


def test_delegate_passes_mode_rules_but_not_lists() -> None:
    for mode in MODE_TRANSITIONS:
        assert allowed(Permissions(mode=mode), DELEGATE)
        assert not allowed(Permissions(mode=mode, deny=frozenset({"delegate_to_agent"})), DELEGATE)
        assert not allowed(Permissions(mode=mode, allow=["lookup"]), DELEGATE)  # type: ignore[arg-type]
    # A host tool that only shares the name gets no exemption.
    assert not allowed(Permissions(mode=PermissionMode.READONLY), SPOOFED_DELEGATE)


# -- can_use_tool ---------------------------------------------------------------------


async def test_check_without_callback_allows_what_static_allows() -> None:
    assert await Permissions(mode=PermissionMode.READONLY).check(READER, {}) == PermissionAllow()
    result = await Permissions(mode=PermissionMode.READONLY).check(PLAIN, {})
    assert isinstance(result, PermissionDeny)


async def test_sync_and_async_callbacks_decide() -> None:
    calls: list[tuple[str, Any, Any]] = []

    def sync_cb(name: str, args: Mapping[str, Any], ctx: Any) -> PermissionAllow | PermissionDeny:
        calls.append((name, dict(args), ctx))
        return PermissionDeny("no", interrupt=True) if args.get("x") else PermissionAllow()

    async def async_cb(name: str, args: Mapping[str, Any], ctx: Any) -> PermissionDeny:
        await anyio.sleep(0)
        return PermissionDeny(f"async says no to {name}")

    perms = Permissions(mode=PermissionMode.FULL, can_use_tool=sync_cb)
    assert await perms.check(PLAIN, {}, "ctx") == PermissionAllow()
    assert await perms.check(PLAIN, {"x": 1}) == PermissionDeny("no", interrupt=True)
    assert calls == [("compute", {}, "ctx"), ("compute", {"x": 1}, None)]
    result = await Permissions(mode=PermissionMode.FULL, can_use_tool=async_cb).check(PLAIN, {})
    assert result == PermissionDeny("async says no to compute")


async def test_callback_not_called_when_static_denies() -> None:
    calls: list[str] = []

    def cb(name: str, args: Any, ctx: Any) -> PermissionAllow:
        calls.append(name)
        return PermissionAllow()

    result = await Permissions(mode=PermissionMode.READONLY, can_use_tool=cb).check(NUKE, {})
    assert isinstance(result, PermissionDeny)
    assert calls == []


def _raises(name: str, args: Any, ctx: Any) -> Any:
    raise KeyError("boom")


async def _raises_async(name: str, args: Any, ctx: Any) -> Any:
    await anyio.sleep(0)
    raise RuntimeError("async boom")


@pytest.mark.parametrize(
    ("callback", "fragment"),
    [
        (_raises, "can_use_tool raised KeyError"),
        (_raises_async, "can_use_tool raised RuntimeError: async boom"),
        (lambda n, a, c: True, "returned bool"),
        (lambda n, a, c: None, "returned NoneType"),
        (lambda n, a, c: "allow", "returned str"),
        (lambda n, a, c: {"behavior": "allow"}, "returned dict"),
    ],
)
async def test_callback_errors_and_junk_deny(callback: Any, fragment: str) -> None:
    result = await Permissions(mode=PermissionMode.FULL, can_use_tool=callback).check(PLAIN, {})
    assert isinstance(result, PermissionDeny)
    assert fragment in result.reason
    assert "compute" in result.reason


async def test_callback_cancellation_propagates() -> None:
    """Cancelling a check while its callback waits cancels the check; no result comes back.

    A check that caught the cancellation like a callback error would return a deny and let
    the caller carry on as if it had not been cancelled, so the test records which one the
    caller saw instead of only checking that the task group exits.
    """
    started = anyio.Event()
    outcome: list[object] = []

    async def slow(name: str, args: Any, ctx: Any) -> PermissionAllow:
        started.set()
        await anyio.sleep_forever()
        return PermissionAllow()

    perms = Permissions(mode=PermissionMode.FULL, can_use_tool=slow)

    async def run_check() -> None:
        try:
            outcome.append(await perms.check(PLAIN, {}))
        except anyio.get_cancelled_exc_class():
            outcome.append("cancelled")
            raise

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_check)
        await started.wait()
        tg.cancel_scope.cancel()
    assert outcome == ["cancelled"]


def test_results_are_json_encodable_tagged_values() -> None:
    union = PermissionAllow | PermissionDeny
    for value in (PermissionAllow(), PermissionDeny("why", interrupt=True, final=True)):
        assert msgspec.json.decode(msgspec.json.encode(value), type=union) == value
    assert (
        msgspec.json.encode(PermissionDeny("r"))
        == b'{"type":"deny","reason":"r","interrupt":false,"final":false}'
    )


# -- transitions and ceilings -----------------------------------------------------------


@pytest.mark.parametrize(
    ("current", "target", "ok"),
    [
        ("readonly", "readonly", True),
        ("readonly", "plan", False),
        ("readonly", "standard", False),
        ("readonly", "full", False),
        ("standard", "standard", True),
        ("standard", "readonly", True),
        ("standard", "plan", False),
        ("standard", "full", False),
        ("plan", "plan", True),
        ("plan", "readonly", True),
        ("plan", "standard", False),
        ("plan", "full", False),
        ("full", "full", True),
        ("full", "standard", True),
        ("full", "plan", True),
        ("full", "readonly", True),
    ],
)
def test_transition_table_for_narrow_and_ceiling(current: str, target: str, ok: bool) -> None:
    perms = Permissions(mode=PermissionMode(current), deny=frozenset({"x"}), allow=frozenset({"y"}))
    assert (target in MODE_TRANSITIONS[PermissionMode(current)]) is ok
    if ok:
        narrowed = perms.narrow(target)
        assert narrowed.mode == target
        assert (narrowed.allow, narrowed.deny) == (perms.allow, perms.deny)
        assert perms.ceiling(target).mode == target
    else:
        with pytest.raises(PermissionModeWideningError) as wide:
            perms.narrow(target)
        assert repr(current) in str(wide.value)
        assert repr(target) in str(wide.value)
        with pytest.raises(PermissionCeilingError) as ceil:
            perms.ceiling(target)
        assert f"Lead mode {current} cannot delegate with mode {target}" in str(ceil.value)


def test_narrow_same_mode_is_identity_and_unknown_mode_raises() -> None:
    perms = Permissions(mode=PermissionMode.STANDARD)
    assert perms.narrow("standard") is perms
    with pytest.raises(PermissionsError, match="Unknown permission mode 'bogus'"):
        perms.narrow("bogus")
    with pytest.raises(PermissionCeilingError, match="mode bogus"):
        perms.ceiling("bogus")


def test_ceiling_message_matches_deputy() -> None:
    with pytest.raises(PermissionCeilingError) as info:
        Permissions(mode=PermissionMode.READONLY).ceiling("full")
    assert str(info.value).endswith(
        "Lead mode readonly cannot delegate with mode full. Use mode readonly, then tighten "
        "the child with disallowed_tools or max_requests."
    )


def test_ceiling_inherits_and_extends(tmp_path: Path) -> None:
    def cb(name: str, args: Any, ctx: Any) -> PermissionAllow:
        return PermissionAllow()

    lead = Permissions(
        mode=PermissionMode.FULL,
        allow=frozenset({"a", "b"}),
        deny=frozenset({"c"}),
        can_use_tool=cb,
    ).bind(tmp_path)
    same = lead.ceiling(None)
    assert same is lead
    child = lead.ceiling("standard", ["Dangerous", "b"])
    assert child.mode == "standard"
    assert child.deny == frozenset({"c", "dangerous", "b"})
    assert child.allow == lead.allow
    assert child.can_use_tool is cb
    assert child.write_root == lead.write_root
    assert child.working_dir == lead.working_dir
    # A child built in another directory keeps the lead's roots.
    assert child.bind(tmp_path / "elsewhere") is child
    assert lead.ceiling(None, ["z"]).mode == "full"


def test_describe_is_plain_json_data(tmp_path: Path) -> None:
    perms = Permissions(
        mode=PermissionMode.PLAN,
        deny=frozenset({"B", "a"}),
        can_use_tool=lambda n, a, c: PermissionAllow(),
    ).bind(tmp_path)
    data = perms.describe()
    assert data == {
        "mode": "plan",
        "allow": [],
        "deny": ["a", "b"],
        "can_use_tool": True,
        "write_root": str(Path(os.path.realpath(tmp_path))),
    }
    assert msgspec.json.decode(msgspec.json.encode(data)) == data
