"""MCP servers attached to a lead: an owned files server per researcher, a shared notes one.

The lead delegates to two ``researcher`` subagents and one ``scribe`` in parallel:

* ``files`` (``examples/mcp_files_server.py``, read-only file tools over a directory) is
  attached in **owned** mode: every researcher delegation starts its own server before
  its first request and stops it when it settles, so the two researchers talk to two
  different processes.
* ``notes`` (``examples/mcp_notes_server.py``) is attached in **shared** mode: one server
  for every delegation of the lead, started on first use and stopped when the lead closes
  (``async with lead:``).

A definition names the MCP tools it gets (``mcp__files`` is every tool of ``files``);
they pass the lead's permission ceiling and hooks like built-in tools. Server starts and
stops appear in the run's event stream as ``McpServerEvent``.

    python examples/mcp_delegation.py [asyncio|trio]

Needs the ``mcp`` extra. Offline: the models are ``scripted`` responders.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

from deputy_runtime import DelegationPolicy, LeadAgent, Permissions, agent_definition, chat
from deputy_runtime.chat import ContentToolResult, ModelRequest, reply, tool_call, tool_calls
from deputy_runtime.mcp import McpEvent, McpResource, McpServer, McpServerStopped, McpStdio
from deputy_runtime.runtime import Event, McpServerEvent, ToolEnd

HERE = Path(__file__).resolve().parent


def results(request: ModelRequest) -> list[ContentToolResult]:
    return [c for c in request.turns[-1].contents if isinstance(c, ContentToolResult)]


def lead_model(request: ModelRequest) -> Any:
    if not results(request):
        return tool_calls(
            ("delegate_to_agent", {"agent_name": "researcher", "task": "Read plan.md"}),
            ("delegate_to_agent", {"agent_name": "researcher", "task": "Read ideas.txt"}),
            ("delegate_to_agent", {"agent_name": "scribe", "task": "Note the milk"}),
        )
    return reply("Both files read; the note is taken.")


def researcher_model(request: ModelRequest) -> Any:
    if not results(request):
        task = request.turns[0].text
        path = "plan.md" if "plan.md" in task else "ideas.txt"
        return tool_calls(("mcp__files__whoami", {}), ("mcp__files__read_file", {"path": path}))
    return reply("read")


def scribe_model(request: ModelRequest) -> Any:
    if not results(request):
        return tool_call("mcp__notes__add_note", {"text": "buy oat milk"})
    return reply("noted")


def show(event: Event) -> None:
    who = event.agent_name or "?"
    if isinstance(event, McpServerEvent):
        print(f"  {who}: mcp server {event.server} {event.action} (pid {event.pid})")
    elif isinstance(event, ToolEnd) and event.tool_name.startswith("mcp__"):
        print(f"  {who}: {event.tool_name} -> {event.error or event.result_preview}")


def show_notes(event: McpEvent) -> None:
    """The notes server's own sink: it sees its stop even after the run ended."""
    if isinstance(event, McpServerStopped):
        print(f"  notes server stopped ({event.kind.value}, pid {event.pid})")


async def main() -> None:
    with tempfile.TemporaryDirectory() as served:
        (Path(served) / "plan.md").write_text("# Plan\nShip it.\n", encoding="utf-8")
        (Path(served) / "ideas.txt").write_text("oat milk\n", encoding="utf-8")
        python = sys.executable
        files = McpServer(
            "files",
            McpStdio(command=python, args=(str(HERE / "mcp_files_server.py"),), cwd=served),
        )
        notes = McpServer(
            "notes",
            McpStdio(command=python, args=(str(HERE / "mcp_notes_server.py"),)),
            on_event=show_notes,
        )
        lead = LeadAgent(
            chat(
                "scripted",
                script={"lead": lead_model, "researcher": researcher_model, "scribe": scribe_model},
            ),
            [
                agent_definition(
                    "researcher",
                    "Reads files.",
                    "Read what you are asked to.",
                    mcp_tools=("mcp__files",),
                    permission_mode="readonly",
                    max_requests=3,
                ),
                agent_definition(
                    "scribe",
                    "Takes notes.",
                    "Take the note.",
                    mcp_tools=("mcp__notes__add_note",),
                    max_requests=3,
                ),
            ],
            permissions=Permissions(mode="standard"),
            delegation_policy=DelegationPolicy(
                resource_modes=(McpResource(files, mode="owned"), McpResource(notes))
            ),
        )
        async with lead:
            result = await lead.run("Read the files and take a note", on_event=show)
            print(f"  answer: {result.response}")
            for r in lead.list_subagents():
                print(f"  {r.agent_name}: {r.status} {r.error or ''}")
        print("  lead closed")


if __name__ == "__main__":
    for backend in sys.argv[1:] or ["asyncio", "trio"]:
        print(f"[{backend}]")
        anyio.run(main, backend=backend)
