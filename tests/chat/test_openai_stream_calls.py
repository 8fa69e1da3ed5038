"""Chat Completions streaming: whole tool calls sharing one index (or none) and no ids.

Some compatible servers send every tool call complete, at ``index`` 0 or with no index,
and without ids. Each named call must become its own request instead of being glued into
one call with ``{...}{...}`` arguments; incremental deltas (name first, argument
fragments after, possibly with the name echoed) must still append to one call. Parser
tests feed ``_ChatStream`` directly; the loopback tests send the same shapes over a real
socket in one-byte chunks.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from deputy_runtime.chat import (
    AssistantTurn,
    ContentText,
    ContentToolRequest,
    ModelRequest,
    OpenAICompatibleProvider,
    Turn,
)
from deputy_runtime.chat._openai import _ChatStream
from deputy_runtime.chat._sse import ServerSentEvent
from deputy_runtime.errors import ProviderError
from tests.chat.loopback import LoopbackServer, Reply, sse_record

REQUEST = ModelRequest(None, (Turn("user", (ContentText("Set x and y."),)),))


def delta(
    index: int | None, name: str | None = None, args: str | None = None, id: str | None = None
) -> dict[str, Any]:
    """One tool-call delta; absent fields are left out of the JSON entirely."""
    tc: dict[str, Any] = {} if index is None else {"index": index}
    if id is not None:
        tc |= {"id": id, "type": "function"}
    fn = {k: v for k, v in (("name", name), ("arguments", args)) if v is not None}
    if fn:
        tc["function"] = fn
    return tc


def chunk(*calls: dict[str, Any], finish: str | None = None) -> str:
    """One ``chat.completion.chunk`` data payload carrying ``calls``."""
    choice_delta: dict[str, Any] = {"tool_calls": list(calls)} if calls else {}
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": choice_delta, "finish_reason": finish}],
        }
    )


def parse(*payloads: str) -> AssistantTurn:
    """Feed payloads (then a finish chunk and ``[DONE]``) to the stream accumulator."""
    stream = _ChatStream("openai_compatible", require_done=True)
    for payload in (*payloads, chunk(finish="tool_calls"), "[DONE]"):
        stream.feed(ServerSentEvent(payload))
    return stream.finish(0.0)


def calls_of(turn: AssistantTurn) -> list[tuple[str, dict[str, Any]]]:
    return [(c.name, dict(c.arguments)) for c in turn.tool_requests]


# -- parser level -------------------------------------------------------------------------


def test_two_whole_calls_at_the_same_index_without_ids() -> None:
    turn = parse(chunk(delta(0, "set", '{"x":1}')), chunk(delta(0, "set", '{"y":2}')))
    assert calls_of(turn) == [("set", {"x": 1}), ("set", {"y": 2})]
    ids = [c.id for c in turn.tool_requests]
    assert len(set(ids)) == 2  # generated ids stay distinct


def test_two_whole_calls_in_one_chunk_at_the_same_index() -> None:
    turn = parse(chunk(delta(0, "set", '{"x":1}'), delta(0, "set", '{"y":2}')))
    assert calls_of(turn) == [("set", {"x": 1}), ("set", {"y": 2})]


def test_two_whole_calls_without_index_or_ids() -> None:
    turn = parse(chunk(delta(None, "set", '{"x":1}')), chunk(delta(None, "set", '{"y":2}')))
    assert calls_of(turn) == [("set", {"x": 1}), ("set", {"y": 2})]


def test_another_function_name_starts_a_new_call_even_with_empty_arguments() -> None:
    turn = parse(chunk(delta(0, "now", "")), chunk(delta(0, "today", "")))
    assert calls_of(turn) == [("now", {}), ("today", {})]


def test_object_arguments_count_as_a_whole_call() -> None:
    whole = {"index": 0, "function": {"name": "set", "arguments": {"x": 1}}}
    turn = parse(chunk(whole), chunk(delta(0, "set", '{"y":2}')))
    assert calls_of(turn) == [("set", {"x": 1}), ("set", {"y": 2})]


def test_named_call_after_an_identified_one_at_the_same_index() -> None:
    turn = parse(chunk(delta(0, "set", '{"x":1}', id="a")), chunk(delta(0, "set", '{"y":2}')))
    assert [(c.id, c.name, dict(c.arguments)) for c in turn.tool_requests] == [
        ("a", "set", {"x": 1}),
        ("call_1", "set", {"y": 2}),
    ]


def test_incremental_call_without_ids_still_appends() -> None:
    turn = parse(
        chunk(delta(0, "set", "")),
        chunk(delta(0, args='{"x"')),
        chunk(delta(0, args=":1}")),
    )
    assert calls_of(turn) == [("set", {"x": 1})]


def test_name_echoed_on_every_fragment_still_appends() -> None:
    # A repeated name while the arguments are still incomplete is the same call.
    turn = parse(
        chunk(delta(None, "set", '{"x"')),
        chunk(delta(None, "set", ':1,"y"')),
        chunk(delta(None, "set", ":2}")),
    )
    assert calls_of(turn) == [("set", {"x": 1, "y": 2})]


def test_incremental_then_whole_call_at_the_same_index() -> None:
    turn = parse(
        chunk(delta(0, "set", "")),
        chunk(delta(0, args='{"x":1}')),
        chunk(delta(0, "set", '{"y":2}')),
    )
    assert calls_of(turn) == [("set", {"x": 1}), ("set", {"y": 2})]


def test_repeated_index_with_the_same_id_is_one_call() -> None:
    turn = parse(
        chunk(delta(0, "set", '{"x"', id="a")),
        chunk(delta(0, "set", ":1}", id="a")),
    )
    assert [(c.id, dict(c.arguments)) for c in turn.tool_requests] == [("a", {"x": 1})]


def test_invalid_arguments_still_fail_clearly() -> None:
    with pytest.raises(ProviderError, match=r"'set'.*not valid JSON"):
        parse(chunk(delta(0, "set", '{"x":')), chunk(delta(0, args="}")))


# -- over a real socket -------------------------------------------------------------------


async def stream_over_loopback(*payloads: str) -> AssistantTurn:
    body = "".join(sse_record(p) for p in (*payloads, chunk(finish="tool_calls"), "[DONE]"))
    with LoopbackServer([Reply.sse(body, sizes=1)]) as server:
        provider = OpenAICompatibleProvider("m", base_url=server.url + "/v1", max_retries=0)
        try:
            items = [item async for item in provider.stream(REQUEST)]
        finally:
            await provider.aclose()
    turn = items[-1]
    assert isinstance(turn, AssistantTurn)
    return turn


@pytest.mark.anyio
@pytest.mark.parametrize("index", [0, None], ids=["same-index", "no-index"])
async def test_whole_calls_without_ids_over_loopback(index: int | None) -> None:
    turn = await stream_over_loopback(
        chunk(delta(index, "set", '{"x":1}')), chunk(delta(index, "set", '{"y":2}'))
    )
    assert calls_of(turn) == [("set", {"x": 1}), ("set", {"y": 2})]
    assert all(isinstance(c, ContentToolRequest) for c in turn.contents)


@pytest.mark.anyio
async def test_incremental_call_over_loopback() -> None:
    turn = await stream_over_loopback(
        chunk(delta(0, "set", "")), chunk(delta(0, args='{"x":')), chunk(delta(0, args="1}"))
    )
    assert calls_of(turn) == [("set", {"x": 1})]
