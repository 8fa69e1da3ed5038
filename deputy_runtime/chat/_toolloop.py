"""Pieces of the tool loop: running tool calls, tool error text, repairing histories.

Kept apart from :class:`~deputy_runtime.chat.Chat` so the Agent runtime, which runs its
own loop, can reuse the same error wording and history repair.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import anyio

from ..tools import Tool, invoke_tool
from ._types import (
    Content,
    ContentToolRequest,
    ContentToolResult,
    Turn,
)

__all__ = [
    "CANCELLED_TOOL_CALL_ERROR",
    "TOOL_ERROR_PREFIX",
    "repair_turns",
    "run_tool",
    "run_tools",
    "tool_error_text",
    "trailing_repairs",
    "user_turn_after",
]

#: Prefix of every tool error the model sees, one wording for every provider.
TOOL_ERROR_PREFIX = "Tool calling failed with error "
#: Error result given to a tool request that never got an answer.
CANCELLED_TOOL_CALL_ERROR = "Tool call was not answered (cancelled)"


def tool_error_text(error: BaseException | str) -> str:
    """The text a model sees for a failed tool call: ``Tool calling failed with error <msg>``."""
    if isinstance(error, BaseException):
        return TOOL_ERROR_PREFIX + (str(error) or type(error).__name__)
    return TOOL_ERROR_PREFIX + error


async def run_tool(tools: Mapping[str, Tool], request: ContentToolRequest) -> ContentToolResult:
    """Run one tool request and return its result; every failure becomes an error result.

    Unknown tools and exceptions raised by the tool (including argument validation
    errors) are returned as ``Tool calling failed with error ...`` so the model can
    recover. Cancellation is not caught.
    """
    tool = tools.get(request.name)
    if tool is None:
        known = ", ".join(sorted(tools)) or "none"
        return ContentToolResult(
            request.id,
            error=tool_error_text(f"Unknown tool {request.name!r}; available tools: {known}"),
        )
    try:
        value = await invoke_tool(tool, request.arguments)
    except Exception as exc:
        return ContentToolResult(request.id, error=tool_error_text(exc))
    return ContentToolResult(request.id, value=value)


async def run_tools(
    tools: Mapping[str, Tool],
    requests: Sequence[ContentToolRequest],
    results: list[ContentToolResult | None] | None = None,
) -> tuple[ContentToolResult, ...]:
    """Run the requests of one assistant turn concurrently; results keep request order.

    ``results``, if given (one ``None`` per request), is filled in place as calls
    finish, so a caller cancelled mid-round still knows which calls completed.
    """
    if results is None:
        results = [None] * len(requests)
    if len(requests) == 1:
        result = results[0] = await run_tool(tools, requests[0])
        return (result,)

    async def one(index: int, request: ContentToolRequest) -> None:
        results[index] = await run_tool(tools, request)

    async with anyio.create_task_group() as tg:
        for index, request in enumerate(requests):
            tg.start_soon(one, index, request)
    return tuple(r for r in results if r is not None)


def repair_turns(turns: Sequence[Turn]) -> list[Turn] | None:
    """Answer every unanswered tool request in ``turns``; ``None`` when nothing is missing.

    A missing result is added, as an error result saying the call was not answered, to
    the user turn that follows the assistant turn (or to a new user turn inserted after
    it). A trailing assistant turn is left alone: its repairs go into the next user turn,
    see :func:`trailing_repairs`.
    """
    out: list[Turn] = []
    changed = False
    pending: tuple[ContentToolRequest, ...] = ()
    for turn in turns:
        if pending:
            answered = (
                {c.request_id for c in turn.contents if isinstance(c, ContentToolResult)}
                if turn.role == "user"
                else set()
            )
            missing = [
                ContentToolResult(req.id, error=CANCELLED_TOOL_CALL_ERROR)
                for req in pending
                if req.id not in answered
            ]
            if missing:
                changed = True
                if turn.role == "user":
                    turn = Turn("user", (*missing, *turn.contents))
                else:
                    out.append(Turn("user", tuple(missing)))
            pending = ()
        out.append(turn)
        if turn.role == "assistant":
            pending = turn.tool_requests
    return out if changed else None


def user_turn_after(turns: Sequence[Turn], contents: Sequence[Content]) -> tuple[list[Turn], Turn]:
    """The history to send before a new user input, and the user turn that carries it.

    Unanswered tool requests get error results (:func:`repair_turns`,
    :func:`trailing_repairs`), and a trailing user turn (tool results kept after a failed
    request, a task the model never answered) is merged with the input: servers whose
    chat templates require alternating roles reject two user turns in a row.
    """
    base = repair_turns(turns) or list(turns)
    merged: tuple[Content, ...] = (*trailing_repairs(base), *contents)
    if base and base[-1].role == "user":
        merged = (*base[-1].contents, *merged)
        base = base[:-1]
    return base, Turn("user", merged)


def trailing_repairs(turns: Sequence[Turn]) -> list[ContentToolResult]:
    """Error results for the tool requests of a trailing assistant turn."""
    if not turns or turns[-1].role != "assistant":
        return []
    return [
        ContentToolResult(req.id, error=CANCELLED_TOOL_CALL_ERROR)
        for req in turns[-1].tool_requests
    ]
