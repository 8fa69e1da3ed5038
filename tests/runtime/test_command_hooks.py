"""Command hooks: Claude Code's shell-command hooks run as real ``/bin/sh`` processes.

Each test writes a small hook script, dispatches a real event through a ``Hooks``
registry built by ``command_hooks`` and checks what the decision, the recorded errors and
the process table say.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import anyio
import pytest

from deputy_runtime import DefinitionFileError
from deputy_runtime.chat import tool_call
from deputy_runtime.command_hooks import CommandHook, claude_tool_name, command_hooks
from deputy_runtime.runtime import HookEvent, HookInput, Hooks
from tests.runtime.helpers import definition, delegate_many, make_tool, scripted_lead, tool_results

pytestmark = pytest.mark.anyio


def _pre(tool: str = "write_file", cwd: Path | None = None) -> HookInput:
    return HookInput(
        event=HookEvent.PreToolUse,
        agent_id="agent_1",
        agent_name="writer",
        run_id="run_1",
        working_dir=str(cwd) if cwd is not None else None,
        tool_name=tool,
        tool_input={"path": "a.txt", "content": "x"},
    )


def _registry(tmp_path: Path, script: str, *, matcher: str = "", timeout: float = 30) -> Hooks:
    file = tmp_path / "hook.sh"
    file.write_text("#!/bin/sh\n" + script)
    file.chmod(0o755)
    config = {
        "hooks": {
            "PreToolUse": [
                {
                    "matcher": matcher,
                    "hooks": [{"type": "command", "command": str(file), "timeout": timeout}],
                }
            ]
        }
    }
    return command_hooks(config, tmp_path / "hooks.json", plugin_root=tmp_path)


async def test_exit_two_denies_with_stderr_and_the_hook_reads_the_event(tmp_path: Path) -> None:
    hooks = _registry(
        tmp_path, 'cat > "$CLAUDE_PLUGIN_ROOT/seen.json"\necho "not here" >&2\nexit 2\n'
    )
    errors: list[str] = []
    decision = await hooks.dispatch(_pre(cwd=tmp_path), errors)
    assert decision is not None
    assert (decision.decision, decision.reason) == ("deny", "not here")
    assert errors == []
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen["hook_event_name"] == "PreToolUse"
    assert seen["tool_name"] == "Write"  # Claude Code's name for write_file
    assert seen["tool_input"] == {"path": "a.txt", "content": "x"}
    assert (seen["session_id"], seen["cwd"]) == ("run_1", str(tmp_path))
    assert seen["deputy"]["tool_name"] == "write_file"


async def test_json_output_decides_like_claude_code(tmp_path: Path) -> None:
    deny = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "policy says no",
        }
    }
    hooks = _registry(tmp_path, f"echo '{json.dumps(deny)}'\n")
    decision = await hooks.dispatch(_pre(), [])
    assert decision is not None
    assert (decision.decision, decision.reason) == (
        "deny",
        "policy says no",
    )

    hooks = _registry(tmp_path, """echo '{"decision": "approve"}'\n""")
    decision = await hooks.dispatch(_pre(), [])
    assert decision is not None
    assert decision.decision == "allow"

    hooks = _registry(tmp_path, """echo '{"continue": false, "stopReason": "enough"}'\n""")
    decision = await hooks.dispatch(_pre(), [])
    assert decision is not None
    assert (decision.decision, decision.reason) == ("stop", "enough")

    hooks = _registry(tmp_path, "echo 'plain words are no decision'\n")
    assert await hooks.dispatch(_pre(), []) is None


async def test_a_failing_pre_tool_use_hook_denies_and_is_recorded(tmp_path: Path) -> None:
    hooks = _registry(tmp_path, "echo 'boom' >&2\nexit 1\n")
    errors: list[str] = []
    decision = await hooks.dispatch(_pre(), errors)
    assert decision is not None
    assert decision.decision == "deny"
    assert "exited with code 1: boom" in decision.reason
    assert len(errors) == 1
    assert errors[0].startswith("PreToolUse: ")


async def test_the_time_limit_kills_the_hook_and_what_it_started(tmp_path: Path) -> None:
    hooks = _registry(tmp_path, f"sleep 300 &\necho $! > {tmp_path}/child\nwait\n", timeout=2)
    decision = await hooks.dispatch(_pre(), [])
    assert decision is not None
    assert decision.decision == "deny"
    assert "timed out after 2 s" in decision.reason
    child = int((tmp_path / "child").read_text())
    assert await _gone(child)


async def test_a_hook_that_leaves_a_child_behind_still_answers(tmp_path: Path) -> None:
    hooks = _registry(tmp_path, f"sleep 300 &\necho $! > {tmp_path}/child\nexit 2\n")
    decision = await hooks.dispatch(_pre(), [])
    assert decision is not None
    assert decision.decision == "deny"
    assert "timed out" not in decision.reason
    assert await _gone(int((tmp_path / "child").read_text()))


async def test_a_cancelled_dispatch_leaves_no_process(tmp_path: Path) -> None:
    hooks = _registry(tmp_path, f"echo $$ > {tmp_path}/pid\nexec sleep 300\n")
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(hooks.dispatch, _pre(), [])
            while not (tmp_path / "pid").exists() or not (tmp_path / "pid").read_text():
                await anyio.sleep(0.01)
            scope.cancel()
    assert await _gone(int((tmp_path / "pid").read_text()))


async def test_matchers_take_claude_code_names_and_deputy_names(tmp_path: Path) -> None:
    hooks = _registry(tmp_path, "exit 2\n", matcher="Edit|Write")
    assert await hooks.dispatch(_pre("write_file"), []) is not None
    assert await hooks.dispatch(_pre("read_file"), []) is None
    hooks = _registry(tmp_path, "exit 2\n", matcher="mcp__notes__.*")
    assert await hooks.dispatch(_pre("mcp__notes__add"), []) is not None
    assert await hooks.dispatch(_pre("write_file"), []) is None
    assert claude_tool_name("read_file") == "Read"
    assert claude_tool_name("delegate") == "Task"
    assert claude_tool_name("mcp__notes__add") == "mcp__notes__add"


def test_the_configuration_is_checked_and_names_the_field(tmp_path: Path) -> None:
    source = tmp_path / "hooks.json"
    bad = [
        ({"hooks": {"PreToolUse": {"matcher": ""}}}, "hooks.PreToolUse must be a list"),
        ({"hooks": {"PreToolUse": [{"hooks": [{"type": "command"}]}]}}, "command must be"),
        (
            {"hooks": {"PreToolUse": [{"hooks": [{"command": "x", "timeout": -1}]}]}},
            "timeout must be a positive number",
        ),
        ({"hooks": {"PreToolUse": [{"matcher": "(", "hooks": []}]}}, "not a valid regular"),
        ({"hooks": {}, "extra": 1}, "unknown top-level key(s) 'extra'"),
    ]
    for config, message in bad:
        with pytest.raises(DefinitionFileError, match=re.escape(message)):
            command_hooks(config, source)
    warnings: list[str] = []
    hooks = command_hooks(
        {"Stop": [{"hooks": [{"type": "prompt", "prompt": "ok?"}]}], "Nope": []},
        source,
        warnings=warnings,
    )
    assert not hooks.has(HookEvent.Stop)
    assert [w.split("warning: ")[1] for w in warnings] == [
        "hooks.Stop[0].hooks[0]: 'prompt' hooks are not run here (only 'command')",
        "hooks.Nope: no such event here; its hooks are not run",
    ]
    # The event map alone (agent frontmatter, settings files) is read the same way.
    bare = command_hooks({"PostToolUse": [{"hooks": [{"command": "true"}]}]}, source)
    [matcher] = bare.matchers(HookEvent.PostToolUse)
    assert isinstance(matcher.callback, CommandHook)


async def _gone(pid: int) -> bool:
    """Whether ``pid`` is gone once SIGKILL has been sent (the bound guards a hang)."""
    with anyio.move_on_after(30):
        while _alive(pid):
            await anyio.sleep(0.01)
    return not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


async def test_a_definitions_own_hooks_guard_its_delegations_only(tmp_path: Path) -> None:
    script = tmp_path / "deny.sh"
    script.write_text("#!/bin/sh\necho 'guarded agents do not save' >&2\nexit 2\n")
    script.chmod(0o755)
    calls: list[str] = []
    save = make_tool("save", calls=calls)
    hooks = {"PreToolUse": [{"matcher": "save", "hooks": [{"command": str(script)}]}]}
    guarded = definition("guarded", tools=(save,), hooks=hooks)
    free = definition("free", tools=(save,))
    lead, provider = scripted_lead(
        {
            "lead": [delegate_many(("guarded", "a"), ("free", "b")), "done"],
            "guarded": [tool_call("save"), "tried"],
            "free": [tool_call("save"), "saved"],
        },
        [guarded, free],
    )
    assert (await lead.run("go")).stop_reason == "complete"
    assert calls == ["save"]  # only the free agent's call ran
    [denied] = tool_results(provider.requests_for("guarded")[-1])
    assert denied.error is not None
    assert "guarded agents do not save" in denied.error
    [ran] = tool_results(provider.requests_for("free")[-1])
    assert ran.error is None


async def test_a_pre_compact_command_hook_reads_claude_codes_trigger(tmp_path: Path) -> None:
    file = tmp_path / "hook.sh"
    file.write_text('#!/bin/sh\ncat > "$CLAUDE_PLUGIN_ROOT/compact.json"\n')
    file.chmod(0o755)
    config = {"hooks": {"PreCompact": [{"hooks": [{"type": "command", "command": str(file)}]}]}}
    hooks = command_hooks(config, tmp_path / "hooks.json", plugin_root=tmp_path)
    event = HookInput(
        event=HookEvent.PreCompact,
        agent_id="agent_1",
        run_id="run_1",
        reason="auto",
        context_tokens=900,
        context_window=1000,
    )
    errors: list[str] = []
    assert await hooks.dispatch(event, errors) is None
    assert errors == []
    seen = json.loads((tmp_path / "compact.json").read_text())
    assert seen["hook_event_name"] == "PreCompact"
    assert seen["trigger"] == "auto"
    assert (seen["deputy"]["context_tokens"], seen["deputy"]["context_window"]) == (900, 1000)
