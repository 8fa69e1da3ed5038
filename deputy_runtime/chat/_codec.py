"""The conversation as JSON: the chat layer's one encoding of turns.

Turns and their contents are frozen msgspec Structs with a tagged union (tag field
``type``), so they encode without adapters; what is left to decide is a tool result's
``value``, which may be any Python object. A value JSON cannot hold is written as its
``str()``, the text a provider sent the model for it (``tool_result_text``), so a decoded
conversation says to a model exactly what the original said. Decoding validates every
turn and content against the types.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from ._types import Turn

__all__ = ["decode_turns", "encode_turns", "plain_value"]


def plain_value(value: Any) -> Any:
    """What a value JSON cannot hold is written as: its text (an encoder's ``enc_hook``).

    Args:
        value: An object msgspec cannot encode.

    Returns:
        ``str(value)``, the text the model was sent for it.
    """
    return str(value)


_encoder = msgspec.json.Encoder(enc_hook=plain_value)
_decoder: msgspec.json.Decoder[tuple[Turn, ...]] = msgspec.json.Decoder(tuple[Turn, ...])


def encode_turns(turns: Sequence[Turn]) -> bytes:
    """A conversation as JSON (an array of turns).

    Args:
        turns: The conversation.

    Returns:
        Its JSON bytes; tool result values JSON cannot hold are written as text.
    """
    return _encoder.encode(tuple(turns))


def decode_turns(data: bytes | str) -> tuple[Turn, ...]:
    """A conversation from :func:`encode_turns` JSON, validated against the turn types.

    Args:
        data: The JSON.

    Returns:
        The turns.

    Raises:
        msgspec.ValidationError: A turn or content does not match its type (the message
            names the path, such as ``$[2].contents[0].type``).
        msgspec.DecodeError: It is not JSON.
    """
    return _decoder.decode(data)
