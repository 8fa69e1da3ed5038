"""Chat keeps the results of tools that ran when a later request fails or is cancelled.

Tools may have side effects (a write, a payment), so their results turn is recorded as
soon as they finish. A failed or cancelled next request must not turn them into
"not answered (cancelled)" calls the model might repeat; the next input is merged into
the kept results turn, so every request still has a valid shape. Everything runs over
real ScriptedProvider scripts, real tasks and real cancellation, on both backends.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import aclosing
from itertools import pairwise
from typing import Any

import anyio
import pytest

from deputy_runtime.chat import (
    CANCELLED_TOOL_CALL_ERROR,
    Chat,
    ContentText,
    ContentToolRequest,
    ContentToolResult,
    ModelRequest,
    ScriptedProvider,
    Turn,
    tool_call,
    tool_calls,
)
from deputy_runtime.errors import ProviderError
from deputy_runtime.tools import Tool

pytestmark = pytest.mark.anyio

WRITE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
}
MODES = pytest.mark.parametrize("mode", ["chat_async", "stream_async"])


class Disk:
    """A tool with a visible side effect: every call appends the path it wrote."""

    def __init__(self) -> None:
        self.writes: list[str] = []

    def write(self, path: str) -> str:
        self.writes.append(path)
        return f"wrote {path}"

    def tool(self) -> Tool:
        return Tool("write", "Write a file.", WRITE_SCHEMA, self.write)


async def send(chat: Chat, mode: str, text: str) -> str:
    """One exchange through ``chat_async`` or (collecting the chunks) ``stream_async``."""
    if mode == "chat_async":
        return await chat.chat_async(text)
    async with aclosing(chat.stream_async(text)) as stream:
        return "".join([chunk async for chunk in stream])


def assert_valid_history(turns: Sequence[Turn]) -> None:
    """Roles alternate, and every tool request is answered by the next (user) turn."""
    for before, after in pairwise(turns):
        assert before.role != after.role, f"two {before.role} turns in a row: {turns}"
    for position, turn in enumerate(turns):
        wanted = {r.id for r in turn.tool_requests} if turn.role == "assistant" else set()
        if not wanted:
            continue
        assert position + 1 < len(turns), "the history ends with unanswered tool requests"
        answered = {
            c.request_id for c in turns[position + 1].contents if isinstance(c, ContentToolResult)
        }
        assert wanted <= answered, f"unanswered tool requests {wanted - answered}"


def no_cancelled_results(request: ModelRequest) -> bool:
    return not any(
        isinstance(c, ContentToolResult) and c.error == CANCELLED_TOOL_CALL_ERROR
        for turn in request.turns
        for c in turn.contents
    )


@MODES
async def test_failed_next_request_keeps_the_tool_results(mode: str) -> None:
    disk = Disk()
    provider = ScriptedProvider(
        [
            tool_call("write", {"path": "a.txt"}, id="w1"),
            ProviderError("server error", provider="scripted", status=500),
            "Done: a.txt is written.",
        ]
    )
    chat = Chat(provider, tools=[disk.tool()])
    with anyio.fail_after(10), pytest.raises(ProviderError, match="server error"):
        await send(chat, mode, "Write a.txt")
    assert disk.writes == ["a.txt"]
    kept = Turn("user", (ContentToolResult("w1", value="wrote a.txt"),))
    assert [t.role for t in chat.get_turns()] == ["user", "assistant", "user"]
    assert chat.get_turns()[-1] == kept
    assert len(chat.get_tokens()) == 1  # the failed request is not counted

    with anyio.fail_after(10):
        assert await send(chat, mode, "Did it work?") == "Done: a.txt is written."
    assert disk.writes == ["a.txt"]  # not run again
    sent = provider.requests_for(None)[-1]
    assert no_cancelled_results(sent)
    assert_valid_history(sent.turns)
    # The kept results and the new input travel as one user turn, results first.
    assert sent.turns[-1] == Turn(
        "user", (ContentToolResult("w1", value="wrote a.txt"), ContentText("Did it work?"))
    )
    assert [t.role for t in chat.get_turns()] == ["user", "assistant", "user", "assistant"]
    assert_valid_history(chat.get_turns())
    provider.assert_complete()


@MODES
async def test_cancelled_next_request_keeps_the_tool_results(mode: str) -> None:
    disk = Disk()
    with anyio.move_on_after(30) as scope:  # the sleeping provider moves the deadline up

        async def sleepy(request: ModelRequest) -> str:
            scope.deadline = anyio.current_time()  # expire now, while the request waits
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

        provider = ScriptedProvider(
            [tool_call("write", {"path": "b.txt"}, id="w1"), sleepy, "b.txt is written."]
        )
        chat = Chat(provider, tools=[disk.tool()])
        await send(chat, mode, "Write b.txt")
    assert scope.cancelled_caught
    assert disk.writes == ["b.txt"]
    assert chat.get_turns()[-1] == Turn("user", (ContentToolResult("w1", value="wrote b.txt"),))

    with anyio.fail_after(10):
        assert await send(chat, mode, "Status?") == "b.txt is written."
    assert disk.writes == ["b.txt"]
    sent = provider.requests_for(None)[-1]
    assert no_cancelled_results(sent)
    assert_valid_history(sent.turns)
    assert sent.turns[-1].contents == (
        ContentToolResult("w1", value="wrote b.txt"),
        ContentText("Status?"),
    )
    assert_valid_history(chat.get_turns())


async def test_every_finished_round_is_kept_when_a_later_request_fails() -> None:
    disk = Disk()
    provider = ScriptedProvider(
        [
            tool_call("write", {"path": "one"}, id="w1"),
            tool_call("write", {"path": "two"}, id="w2"),
            ProviderError("overloaded", provider="scripted", status=529),
            "Both written.",
        ]
    )
    chat = Chat(provider, tools=[disk.tool()])
    with anyio.fail_after(10), pytest.raises(ProviderError):
        await chat.chat_async("Write two files")
    assert disk.writes == ["one", "two"]
    turns = chat.get_turns()
    assert [t.role for t in turns] == ["user", "assistant", "user", "assistant", "user"]
    assert turns[2].contents == (ContentToolResult("w1", value="wrote one"),)
    assert turns[4].contents == (ContentToolResult("w2", value="wrote two"),)
    with anyio.fail_after(10):
        assert await chat.chat_async("And?") == "Both written."
    sent = provider.requests_for(None)[-1]
    assert no_cancelled_results(sent)
    assert_valid_history(sent.turns)
    assert disk.writes == ["one", "two"]


async def test_cancelled_round_keeps_the_calls_that_finished() -> None:
    disk = Disk()
    slow_started = anyio.Event()

    async def slow(path: str) -> str:
        slow_started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    slow_tool = Tool("slow_write", "A write that never finishes.", WRITE_SCHEMA, slow)
    provider = ScriptedProvider(
        [
            tool_calls(("write", {"path": "fast"}, "f1"), ("slow_write", {"path": "s"}, "s1")),
            "ok",
        ]
    )
    chat = Chat(provider, tools=[disk.tool(), slow_tool])
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(chat.chat_async, "Write both")
            await slow_started.wait()
            # A sync tool runs inline: once it has written, its result is recorded too.
            while not disk.writes:
                await anyio.sleep(0)
            tg.cancel_scope.cancel()
    assert disk.writes == ["fast"]
    # The finished call keeps its result; only the interrupted one is "not answered".
    assert chat.get_turns()[-1] == Turn(
        "user",
        (
            ContentToolResult("f1", value="wrote fast"),
            ContentToolResult("s1", error=CANCELLED_TOOL_CALL_ERROR),
        ),
    )
    with anyio.fail_after(10):
        assert await chat.chat_async("Status?") == "ok"
    sent = provider.requests_for(None)[-1]
    assert_valid_history(sent.turns)
    assert sent.turns[-1].contents == (
        ContentToolResult("f1", value="wrote fast"),
        ContentToolResult("s1", error=CANCELLED_TOOL_CALL_ERROR),
        ContentText("Status?"),
    )
    assert disk.writes == ["fast"]


async def test_closing_the_stream_after_a_round_keeps_its_results() -> None:
    disk = Disk()
    provider = ScriptedProvider(
        [
            tool_call("write", {"path": "c.txt"}, id="w1", text="Writing. "),
            "Written.",
            "Still written.",
        ]
    )
    chat = Chat(provider, tools=[disk.tool()])
    with anyio.fail_after(10):
        async with aclosing(chat.stream_async("Write c.txt")) as stream:
            async for chunk in stream:
                if chunk == "Written.":
                    break  # the reply to the results is abandoned
    assert disk.writes == ["c.txt"]
    assert chat.get_turns()[-1] == Turn("user", (ContentToolResult("w1", value="wrote c.txt"),))
    with anyio.fail_after(10):
        assert await chat.chat_async("Sure?") == "Still written."
    assert_valid_history(provider.requests_for(None)[-1].turns)


async def test_failed_first_request_still_rolls_the_input_back() -> None:
    provider = ScriptedProvider([ProviderError("boom", provider="scripted", status=500), "hi"])
    chat = Chat(provider)
    with anyio.fail_after(10), pytest.raises(ProviderError):
        await chat.chat_async("lost")
    assert chat.get_turns() == []
    with anyio.fail_after(10):
        assert await chat.chat_async("again") == "hi"
    assert [t.text for t in provider.requests_for(None)[-1].turns] == ["again"]


async def test_calls_without_any_result_are_still_repaired() -> None:
    # A hand-built history whose last assistant turn was never answered.
    history = [
        Turn("user", (ContentText("q"),)),
        Turn("assistant", (ContentToolRequest("x1", "write", {"path": "p"}),)),
    ]
    provider = ScriptedProvider(["fine"])
    chat = Chat(provider, turns=history)
    with anyio.fail_after(10):
        await chat.chat_async("next")
    sent = provider.requests_for(None)[0]
    assert sent.turns[-1].contents == (
        ContentToolResult("x1", error=CANCELLED_TOOL_CALL_ERROR),
        ContentText("next"),
    )
    assert_valid_history(sent.turns)
