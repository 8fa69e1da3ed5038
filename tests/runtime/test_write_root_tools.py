"""The write-root check resolves a write's path the way the tool itself will.

A file tool made for another directory (``tools_file(other)``) resolves relative paths
against that directory, not the agent's working directory; the check must follow it, or
a write it allowed as ``working_dir/x`` would land in ``other/x``, outside the root.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deputy_runtime import Agent, Chat, PermissionMode, Permissions, tools_file
from deputy_runtime.chat import ScriptedProvider, reply, tool_call
from deputy_runtime.chat._types import ContentToolResult

pytestmark = pytest.mark.anyio


def dirs(tmp_path: Path) -> tuple[Path, Path]:
    home, other = tmp_path / "home", tmp_path / "other"
    home.mkdir()
    other.mkdir()
    return home, other


async def write_once(agent: Agent) -> ContentToolResult:
    result = await agent.run("write")
    [answer] = [c for c in result.turns[2].contents if isinstance(c, ContentToolResult)]
    return answer


def agent_for(tools_dir: Path, working_dir: Path, **permissions: object) -> Agent:
    script = [tool_call("write_file", {"path": "x.txt", "content": "hi"}), reply("done")]
    return Agent(
        Chat(ScriptedProvider(script)),
        tools=tools_file(tools_dir),
        working_dir=working_dir,
        permissions=Permissions(mode=PermissionMode.STANDARD, **permissions),  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("path", ["x.txt", "./sub/../x.txt"])
async def test_a_tool_for_another_directory_cannot_write_outside_the_root(
    tmp_path: Path, path: str
) -> None:
    home, other = dirs(tmp_path)
    agent = agent_for(other, home)
    agent.chat.provider = ScriptedProvider(
        [tool_call("write_file", {"path": path, "content": "hi"}), reply("done")]
    )
    answer = await write_once(agent)
    assert "Permission denied" in (answer.error or "")
    assert "outside" in (answer.error or "")
    assert not (other / "x.txt").exists()
    assert not (home / "x.txt").exists()


async def test_the_same_directory_writes_as_before(tmp_path: Path) -> None:
    home, _ = dirs(tmp_path)
    answer = await write_once(agent_for(home, home))
    assert answer.error is None
    assert (home / "x.txt").read_text() == "hi"


async def test_a_write_root_naming_the_tools_directory_allows_it(tmp_path: Path) -> None:
    home, other = dirs(tmp_path)
    answer = await write_once(agent_for(other, home, write_root=other))
    assert answer.error is None
    assert (other / "x.txt").read_text() == "hi"
    assert not (home / "x.txt").exists()


def test_tools_file_records_its_directory(tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(tmp_path, target_is_directory=True)
    assert {t.path_base for t in tools_file(link)} == {str(tmp_path.resolve())}
