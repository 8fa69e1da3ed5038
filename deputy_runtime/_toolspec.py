"""ToolSpec, the provider-facing description of a tool.

It sits below both the chat layer (requests carry tool specs) and the tools package
(every Tool produces one), so neither has to import the other to use it.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["ToolSpec"]


class ToolSpec(msgspec.Struct, frozen=True, gc=False):
    """What a provider needs to offer a tool: name, description and JSON Schema."""

    name: str
    description: str
    parameters: dict[str, Any]
