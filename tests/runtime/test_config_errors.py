"""Configuration mistakes get errors that say what was wrong and what would be right."""

from __future__ import annotations

from pathlib import Path

import pytest

from deputy_runtime import (
    Agent,
    Chat,
    HookEvent,
    Hooks,
    PermissionMode,
    PermissionModeWideningError,
    Permissions,
)
from deputy_runtime.chat import ScriptedProvider
from deputy_runtime.errors import PermissionsError


@pytest.mark.parametrize("mode", ["read-only", "Full", "", "ask"])
def test_an_unknown_mode_is_not_called_a_widening(mode: str) -> None:
    with pytest.raises(PermissionsError, match="Unknown permission mode") as info:
        Permissions(mode=PermissionMode.FULL).narrow(mode)
    assert not isinstance(info.value, PermissionModeWideningError)
    assert "'readonly', 'plan', 'standard', 'full'" in str(info.value)


def test_set_permission_mode_reports_an_unknown_mode(tmp_path: Path) -> None:
    agent = Agent(Chat(ScriptedProvider([])), working_dir=tmp_path)
    with pytest.raises(PermissionsError, match="Unknown permission mode 'read-only'"):
        agent.set_permission_mode("read-only")
    assert agent.permissions.mode == "standard"


def test_a_real_widening_still_says_so() -> None:
    with pytest.raises(PermissionModeWideningError, match="only narrowing is allowed"):
        Permissions(mode=PermissionMode.READONLY).narrow("full")


def test_a_bad_hook_matcher_names_the_event_and_the_callback() -> None:
    def audit_writes(hook_input: object) -> None:
        return None

    hooks = Hooks()
    with pytest.raises(ValueError, match="not a valid regular expression") as info:
        hooks.add(HookEvent.PreToolUse, audit_writes, matcher="write_(file")
    message = str(info.value)
    assert "PreToolUse" in message
    assert "audit_writes" in message
    assert "'write_(file'" in message
    assert not hooks.has(HookEvent.PreToolUse)
