"""An MCP server using the spec's features beyond plain tools, written with the MCP SDK.

Tools with titles and output schemas (one whose result breaks its schema), images and a
PNG inside structured content, progress and log notifications, a tool that requires
task-augmented execution and one for which tasks are optional, a resource link, text
larger than the runtime's result cap; resources (text, binary, a template) and prompts;
tools that ask the client: one sampling in a loop until refused, one eliciting a form,
one listing the client's roots.
Run as ``python probe.py``; it speaks stdio (``python probe.py http PORT``: streamable
HTTP on 127.0.0.1).
"""

from __future__ import annotations

import base64
import random
import struct
import sys
import warnings
import zlib
from typing import Any, TypedDict

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import (
    METHOD_NOT_FOUND,
    CallToolResult,
    ImageContent,
    ResourceLink,
    SamplingMessage,
    TextContent,
    ToolAnnotations,
    ToolExecution,
)
from mcp.types import Tool as MCPTool
from pydantic import BaseModel

# Logging is deprecated in the newest protocol revision; the probe still speaks it.
warnings.simplefilter("ignore")

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
BOOKS = {"dune": 1965, "emma": 1815}
#: Characters of text ``big_text`` returns: more than the runtime's 256 KiB result cap.
BIG_TEXT_CHARS = 300 * 1024


def png(width: int, height: int, seed: int = 0) -> bytes:
    """A valid RGB PNG of random pixels (incompressible, so its size is predictable)."""
    rng = random.Random(seed)
    rows = b"".join(b"\x00" + rng.randbytes(width * 3) for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 9))
        + chunk(b"IEND", b"")
    )


class Book(TypedDict):
    title: str
    year: int


class Probe(MCPServer):
    """Adds what MCPServer's decorators cannot say: execution hints and a lying schema."""

    async def list_tools(self) -> list[MCPTool]:
        tools = await super().list_tools()
        book_schema = next(t.output_schema for t in tools if t.name == "lookup")
        out = []
        for listed in tools:
            if listed.name == "longjob":
                listed = listed.model_copy(
                    update={"execution": ToolExecution(task_support="required")}
                )
            elif listed.name == "maybe_task":
                listed = listed.model_copy(
                    update={"execution": ToolExecution(task_support="optional")}
                )
            elif listed.name == "bad_lookup":
                listed = listed.model_copy(update={"output_schema": book_schema})
            elif listed.name == "broken_schema":
                broken = {"type": "object", "properties": {"a": {"type": 5}}}
                listed = listed.model_copy(update={"output_schema": broken})
            out.append(listed)
        return out


server = Probe("probe")


@server.tool(title="Book lookup", annotations=READ_ONLY)
def lookup(title: str) -> Book:
    """The year a book was first published."""
    return {"title": title, "year": BOOKS[title]}


@server.tool(annotations=READ_ONLY)
def bad_lookup(title: str) -> CallToolResult:
    """Claims the lookup schema, returns a year that is a string."""
    return CallToolResult(
        content=[TextContent(text="bad")], structured_content={"title": title, "year": "unknown"}
    )


@server.tool(title="Screenshot", annotations=READ_ONLY)
def snapshot() -> dict[str, Any]:
    """A screenshot as base64 inside structured content, as browser servers send it."""
    data = base64.b64encode(png(300, 300)).decode()
    return {"screenshot": {"data": data, "mimeType": "image/png"}, "width": 300, "height": 300}


@server.tool(annotations=READ_ONLY)
def broken_schema() -> str:
    """Its output schema is not a valid JSON Schema."""
    return "unreachable through the runtime"


@server.tool(annotations=READ_ONLY)
def picture() -> CallToolResult:
    """An image content block and a caption."""
    image = ImageContent(data=base64.b64encode(png(16, 16)).decode(), mime_type="image/png")
    return CallToolResult(content=[image, TextContent(text="a 16x16 picture")])


@server.tool(annotations=READ_ONLY)
async def count(steps: int, ctx: Context) -> str:
    """Count to ``steps``, reporting progress and logging each step."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i}")
        await ctx.log("info", {"step": i}, logger_name="counter")
    await ctx.log("warning", "x" * 10_000, logger_name="counter")
    return f"counted to {steps}"


@server.tool(annotations=READ_ONLY)
def longjob() -> str:
    """Requires task-augmented execution: a plain call is refused, as task servers do."""
    raise MCPError(METHOD_NOT_FOUND, "longjob must be called as a task")


@server.tool(annotations=READ_ONLY)
def maybe_task() -> str:
    """Tasks are optional for it: a plain call works."""
    return "ran without a task"


@server.tool(annotations=READ_ONLY)
def linked() -> CallToolResult:
    """A link to a resource instead of its contents."""
    link = ResourceLink(
        uri="probe://notes/readme", name="readme", mime_type="text/markdown", size=27
    )
    return CallToolResult(content=[TextContent(text="see the readme"), link])


@server.tool(annotations=READ_ONLY)
def big_text() -> str:
    """Text larger than the runtime's result cap."""
    return "y" * BIG_TEXT_CHARS


@server.tool(annotations=READ_ONLY)
async def sample_loop(most: int, ctx: Context) -> dict[str, Any]:
    """Ask the client's model for a message up to ``most`` times, until it refuses."""
    answers: list[str] = []
    refusal: str | None = None
    for i in range(most):
        try:
            result = await ctx.session.create_message(
                [SamplingMessage(role="user", content=TextContent(text=f"question {i + 1}"))],
                max_tokens=50,
                system_prompt="Answer briefly.",
                related_request_id=ctx.request_id,
            )
        except MCPError as exc:
            refusal = exc.error.message
            break
        content = result.content
        answers.append(content.text if isinstance(content, TextContent) else "?")
    return {"answers": answers, "refusal": refusal}


async def _meet(folder: str, phase: str, peers: int) -> None:
    """Mark ``phase`` in ``folder`` and wait until ``peers`` calls have marked it."""
    import os
    import tempfile

    import anyio

    tempfile.NamedTemporaryFile(dir=folder, prefix=phase, delete=False).close()
    while sum(n.startswith(phase) for n in os.listdir(folder)) < peers:
        await anyio.sleep(0.01)  # polling the condition: the peers' calls got this far


@server.tool(annotations=READ_ONLY)
async def sample_together(peers: int, folder: str, ctx: Context) -> dict[str, Any]:
    """Sample once while ``peers`` calls of this tool are in flight (they meet in ``folder``)."""
    await _meet(folder, "started-", peers)
    answers: list[str] = []
    refusal: str | None = None
    try:
        result = await ctx.session.create_message(
            [SamplingMessage(role="user", content=TextContent(text="question 1"))],
            max_tokens=50,
            related_request_id=ctx.request_id,
        )
    except MCPError as exc:
        refusal = exc.error.message
    else:
        content = result.content
        answers.append(content.text if isinstance(content, TextContent) else "?")
    # No call ends before every peer's request was answered.
    await _meet(folder, "sampled-", peers)
    return {"answers": answers, "refusal": refusal}


class Contact(BaseModel):
    name: str
    age: int
    subscribe: bool = False


@server.tool(annotations=READ_ONLY)
async def ask_contact(ctx: Context) -> str:
    """Elicit a contact form from the client's person."""
    try:
        result = await ctx.elicit("Who should we contact?", Contact)
    except MCPError as exc:
        return f"refused: {exc.error.message}"
    if result.action != "accept":
        return result.action
    data = result.data
    return f"accept: {data.name}, {data.age}, {data.subscribe}"


@server.tool(annotations=READ_ONLY)
async def list_roots(ctx: Context) -> list[str]:
    """The client's roots, as uris."""
    listing = await ctx.session.list_roots()
    return [str(root.uri) for root in listing.roots]


@server.resource("probe://notes/readme", name="readme", title="Read me", mime_type="text/markdown")
def readme() -> str:
    return "# Probe\n\nRead me, I am text."


@server.resource("probe://images/logo", name="logo", mime_type="image/png")
def logo() -> bytes:
    return png(32, 32)


@server.resource("probe://notes/big", name="big", mime_type="text/plain")
def big_note() -> str:
    return "z" * BIG_TEXT_CHARS


@server.resource("probe://books/{title}", name="book", mime_type="application/json")
def book(title: str) -> str:
    return f'{{"title": "{title}", "year": {BOOKS.get(title, 0)}}}'


@server.prompt(title="Summarise a topic")
def summarize(topic: str, style: str = "plain") -> str:
    """Ask for a summary."""
    return f"Summarise {topic} in a {style} style."


if __name__ == "__main__":
    print("probe server starting", file=sys.stderr, flush=True)
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
