"""stream_request (a generator) and complete_streaming (a coroutine with a delta callback)
keep one contract: the same deltas in order, one final turn or ProviderError, the
fallback to ``complete``, and the provider's stream closed however the request ends."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import anyio
import pytest

from deputy_runtime.chat import (
    AssistantTurn,
    ContentText,
    ContentThinking,
    ModelRequest,
    ScriptedProvider,
    StreamDelta,
    Turn,
    reply,
    stream_request,
)
from deputy_runtime.chat._stream import complete_streaming
from deputy_runtime.errors import ProviderError

pytestmark = pytest.mark.anyio

REQUEST = ModelRequest(None, (Turn("user", (ContentText("q"),)),))


async def via_generator(provider: Any) -> tuple[list[StreamDelta], AssistantTurn]:
    deltas: list[StreamDelta] = []
    final = None
    async for item in stream_request(provider, REQUEST):
        if isinstance(item, AssistantTurn):
            final = item
        else:
            deltas.append(item)
    assert final is not None
    return deltas, final


async def via_callback(provider: Any) -> tuple[list[StreamDelta], AssistantTurn]:
    deltas: list[StreamDelta] = []
    final = await complete_streaming(provider, REQUEST, deltas.append)
    return deltas, final


SHAPES = [via_generator, via_callback]


class Recorded:
    """A provider whose stream is a scripted list of items; records how it ended."""

    name = "recorded"
    model = "m"

    def __init__(self, items: list[Any], *, whole: str = "whole") -> None:
        self.items = items
        self.whole = whole
        self.closed = self.completed = False

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        self.completed = True
        return reply(self.whole)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[Any, None]:
        try:
            for item in self.items:
                if isinstance(item, BaseException):
                    raise item
                if item == "wait":
                    await anyio.sleep_forever()
                yield item
        finally:
            self.closed = True

    def with_model(self, model: str) -> Recorded:
        return self


@pytest.mark.parametrize("shape", SHAPES)
async def test_deltas_in_order_then_the_final_turn(shape: Any) -> None:
    turn = AssistantTurn((ContentThinking("hmm"), ContentText("answer")))
    deltas, final = await shape(ScriptedProvider([turn]))
    assert deltas == [StreamDelta(thinking="hmm"), StreamDelta(text="answer")]
    assert final.contents == turn.contents


@pytest.mark.parametrize("shape", SHAPES)
async def test_a_stream_that_raises_not_implemented_first_falls_back(shape: Any) -> None:
    provider = Recorded([NotImplementedError()])
    deltas, final = await shape(provider)
    assert (deltas, final.text, provider.completed) == ([], "whole", True)


@pytest.mark.parametrize("shape", SHAPES)
async def test_not_implemented_after_a_delta_is_an_error(shape: Any) -> None:
    provider = Recorded([StreamDelta(text="a"), NotImplementedError()])
    with pytest.raises(NotImplementedError):
        await shape(provider)
    assert provider.closed
    assert not provider.completed


@pytest.mark.parametrize("shape", SHAPES)
async def test_a_stream_without_a_final_turn_is_a_provider_error(shape: Any) -> None:
    provider = Recorded([StreamDelta(text="half")])
    with pytest.raises(ProviderError, match="'recorded' ended its stream without a final"):
        await shape(provider)
    assert provider.closed


@pytest.mark.parametrize("shape", SHAPES)
async def test_items_after_the_final_turn_are_dropped_and_the_stream_is_closed(
    shape: Any,
) -> None:
    provider = Recorded([reply("done"), StreamDelta(text="late"), StreamDelta(text="later")])
    deltas, final = await shape(provider)
    assert (deltas, final.text, provider.closed) == ([], "done", True)


@pytest.mark.parametrize("shape", SHAPES)
async def test_cancelled_mid_stream_closes_the_provider_stream(shape: Any) -> None:
    provider = Recorded([StreamDelta(text="a"), "wait"])
    with anyio.move_on_after(0.05) as scope:
        await shape(provider)
    assert scope.cancelled_caught
    assert provider.closed


@pytest.mark.parametrize("shape", SHAPES)
async def test_a_complete_only_provider_gives_one_turn(shape: Any) -> None:
    class CompleteOnly:
        name, model = "c", "m"

        async def complete(self, request: ModelRequest) -> AssistantTurn:
            return reply("only")

    deltas, final = await shape(CompleteOnly())
    assert (deltas, final.text) == ([], "only")
