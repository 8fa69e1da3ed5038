"""Writes to one file are serialised process-wide: no edit reported as applied is lost.

Real file tools on temp dirs, driven the way a model drives them: several edit_file
calls in one scripted model turn (the agent runs them concurrently), several subagents
delegated at once that share a working directory, and event loops of both backends in
separate threads. Every check is on the final file and the answers the model got.
"""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deputy_runtime import (
    Agent,
    AgentDefinition,
    Chat,
    LeadAgent,
    PermissionMode,
    Permissions,
    UsageLimits,
    tools_file,
)
from deputy_runtime.chat import ScriptedProvider, reply, tool_call, tool_calls
from deputy_runtime.chat._types import ContentToolResult, Turn
from deputy_runtime.tools import Tool, invoke_tool
from deputy_runtime.tools._pathlock import lock_key, locks_in_use

LINES = 8


def numbered(lines: int = LINES) -> str:
    return "".join(f"line{i}\n" for i in range(lines))


def results_of(turns: list[Turn] | tuple[Turn, ...]) -> dict[str, ContentToolResult]:
    return {
        c.request_id: c for turn in turns for c in turn.contents if isinstance(c, ContentToolResult)
    }


async def one_turn_of_edits(base: Path, targets: list[int]) -> tuple[str, list[str | None]]:
    """One model turn with an edit_file call per target line; the file and each error."""
    (base / "f.txt").write_text(numbered())
    calls = [
        (
            "edit_file",
            {"path": "f.txt", "old_string": f"line{t}\n", "new_string": f"E{k}\n"},
            f"c{k}",
        )
        for k, t in enumerate(targets)
    ]
    agent = Agent(
        Chat(ScriptedProvider([tool_calls(*calls), reply("done")])),
        tools=tools_file(base),
        working_dir=base,
        permissions=Permissions(mode=PermissionMode.FULL),
    )
    result = await agent.run("edit")
    by_id = results_of(result.turns)
    return (base / "f.txt").read_text(), [by_id[f"c{k}"].error for k in range(len(targets))]


def check_edits(final: str, targets: list[int], errors: list[str | None]) -> None:
    """Each line ends up edited by exactly one call that said so; the others were told
    their text was gone; untouched lines are as they were."""
    expected = numbered().splitlines()
    for line in set(targets):
        applied = [k for k, t in enumerate(targets) if t == line and errors[k] is None]
        assert len(applied) == 1, (line, errors)
        expected[line] = f"E{applied[0]}"
    for error in errors:
        if error is not None:
            assert "not found in f.txt" in error, error
            assert "read_file it again" in error, error
    assert final.splitlines() == expected
    assert locks_in_use() == 0


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(targets=st.lists(st.integers(0, LINES - 1), min_size=2, max_size=10))
def test_property_edits_in_one_turn_are_never_lost(backend: str, targets: list[int]) -> None:
    """N edits in one turn (some aiming at the same line): every edit reported as
    applied is in the final file; an edit whose text an earlier one replaced fails."""
    with tempfile.TemporaryDirectory() as base:
        final, errors = anyio.run(one_turn_of_edits, Path(base), targets, backend=backend)
    check_edits(final, targets, errors)


async def delegated_edits(base: Path, workers: int) -> tuple[str, list[str | None]]:
    """A lead delegating to ``workers`` subagents at once, each with its own file tools
    on the shared directory, each editing its own line."""
    (base / "f.txt").write_text(numbered())
    script: dict[str | None, Any] = {
        "lead": [
            tool_calls(
                *[
                    ("delegate_to_agent", {"agent_name": f"w{i}", "task": "edit"})
                    for i in range(workers)
                ]
            ),
            reply("ok"),
        ]
    }
    definitions = []
    for i in range(workers):
        edit = {"path": "f.txt", "old_string": f"line{i}\n", "new_string": f"E{i}\n"}
        script[f"w{i}"] = [tool_call("edit_file", edit, id=f"e{i}"), reply("done")]
        [edit_tool] = [t for t in tools_file(base) if t.name == "edit_file"]
        definitions.append(
            AgentDefinition(f"w{i}", description=f"Worker {i}.", prompt="x", tools=(edit_tool,))
        )
    provider = ScriptedProvider(script)
    lead = LeadAgent(
        Chat(provider),
        definitions,
        working_dir=base,
        permissions=Permissions(mode=PermissionMode.FULL),
        usage_limits=UsageLimits(max_requests=None),
    )
    await lead.run("go")
    errors = []
    for i in range(workers):
        [*_, last] = provider.requests_for(f"w{i}")
        errors.append(results_of(last.turns)[f"e{i}"].error)
    return (base / "f.txt").read_text(), errors


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workers=st.integers(2, LINES))
def test_property_parallel_subagents_sharing_a_directory_lose_no_edit(
    backend: str, workers: int
) -> None:
    with tempfile.TemporaryDirectory() as base:
        final, errors = anyio.run(delegated_edits, Path(base), workers, backend=backend)
    check_edits(final, list(range(workers)), errors)


def test_edits_from_event_loops_of_both_backends_in_threads(tmp_path: Path) -> None:
    """One asyncio loop and one trio loop, each in its own thread, editing one file at
    once through two separate tool sets: the lock is a thread lock, so both count."""
    per_loop = 12
    (tmp_path / "f.txt").write_text(numbered(2 * per_loop))
    failures: list[BaseException] = []

    async def edits(edit_tool: Tool, lines: range) -> None:
        async with anyio.create_task_group() as tg:
            for i in lines:
                args = {"path": "f.txt", "old_string": f"line{i}\n", "new_string": f"E{i}\n"}
                tg.start_soon(invoke_tool, edit_tool, args)

    def run(backend: str, lines: range) -> None:
        [edit_tool] = [t for t in tools_file(tmp_path) if t.name == "edit_file"]
        try:
            anyio.run(edits, edit_tool, lines, backend=backend)
        except BaseException as exc:  # reported below, in the test's thread
            failures.append(exc)

    threads = [
        threading.Thread(target=run, args=("asyncio", range(per_loop))),
        threading.Thread(target=run, args=("trio", range(per_loop, 2 * per_loop))),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert (tmp_path / "f.txt").read_text() == "".join(f"E{i}\n" for i in range(2 * per_loop))
    assert locks_in_use() == 0


@pytest.mark.anyio
async def test_write_and_edit_racing_end_as_one_or_the_other_order(tmp_path: Path) -> None:
    """write_file against edit_file: the result is always one of the two serial orders,
    never a write lost under an edit made from stale content."""
    by = {t.name: t for t in tools_file(tmp_path)}
    written = "A\nW\n"
    for _ in range(20):
        (tmp_path / "f.txt").write_text("A\n")
        answers: dict[str, str] = {}

        async def call(name: str, args: dict[str, Any], answers: dict[str, str]) -> None:
            answers[name] = await invoke_tool(by[name], args)

        async with anyio.create_task_group() as tg:
            tg.start_soon(
                call,
                "edit_file",
                {"path": "f.txt", "old_string": "A\n", "new_string": "B\n"},
                answers,
            )
            tg.start_soon(call, "write_file", {"path": "f.txt", "content": written}, answers)
        # Edit first: the write replaces it (and says "Overwrote"). Write first: the
        # edit applies to the written text. Both calls succeed either way.
        assert (tmp_path / "f.txt").read_text() in (written, "B\nW\n")
        assert answers["write_file"].startswith("Overwrote f.txt")
        assert answers["edit_file"].startswith("Edited f.txt")


def test_lock_keys_fold_case_and_unicode_form() -> None:
    """On a case-insensitive file system these name one file, so they share a lock."""
    assert lock_key("/w/README.md") == lock_key("/w/readme.MD")
    assert lock_key("/w/caf\u00e9") == lock_key("/w/cafe\u0301")
    assert lock_key("/w/a.txt") != lock_key("/w/b.txt")
