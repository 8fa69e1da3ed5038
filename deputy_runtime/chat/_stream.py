"""One streamed model request over any provider, streaming or not."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import anyio

from ..errors import ProviderError
from ._types import AssistantTurn, ModelRequest, Provider, StreamDelta

__all__ = ["stream_request"]


async def stream_request(
    provider: Provider, request: ModelRequest
) -> AsyncGenerator[StreamDelta | AssistantTurn, None]:
    """Send ``request`` and yield :class:`StreamDelta` values, then the final turn.

    Uses ``provider.stream`` when the provider has one; a provider that only implements
    ``complete`` (or whose ``stream`` raises ``NotImplementedError`` before yielding)
    yields just its final :class:`AssistantTurn`. The final turn is always the last item,
    and exactly once: a stream that ends without one raises :class:`ProviderError` instead
    of handing the caller a half turn. Close the generator early (``aclosing``) to abandon
    the request; the provider's stream is closed under a shielded scope.
    """
    stream = getattr(provider, "stream", None)
    if stream is None:
        yield await provider.complete(request)
        return
    try:
        agen: AsyncIterator[StreamDelta | AssistantTurn] = stream(request)
    except NotImplementedError:
        agen = None  # type: ignore[assignment]
    if not hasattr(agen, "__anext__"):
        # No usable stream (e.g. the Protocol's own stub was inherited): one final turn.
        yield await provider.complete(request)
        return
    final: AssistantTurn | None = None
    finished = started = False
    try:
        while True:
            try:
                item = await agen.__anext__()
            except StopAsyncIteration:
                finished = True
                break
            except NotImplementedError:
                if started:
                    raise
                finished = True
                final = await provider.complete(request)
                break
            if isinstance(item, AssistantTurn):
                final = item
                break
            started = True
            yield item
        if not finished:
            # Let the provider's stream run to its end (closing its HTTP response) before
            # the caller sees the turn; this is cheaper than closing it from outside.
            try:
                await agen.__anext__()
            except StopAsyncIteration:
                finished = True
    finally:
        if not finished:
            await _aclose(agen)
    if final is None:
        raise ProviderError(
            f"provider {getattr(provider, 'name', '?')!r} ended its stream without a final "
            "assistant turn",
            provider=getattr(provider, "name", None),
        )
    yield final


async def _aclose(agen: Any) -> None:
    # Closing must finish even when the caller is being cancelled, or the provider's HTTP
    # response would stay open until garbage collection.
    aclose = getattr(agen, "aclose", None)
    if aclose is not None:
        with anyio.CancelScope(shield=True):
            await aclose()
