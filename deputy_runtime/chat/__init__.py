"""The chat layer: turns, content, usage, the Provider protocol and ellmer-style Chat."""

from ._types import (
    AssistantTurn,
    Content,
    ContentText,
    ContentThinking,
    ContentToolRequest,
    ContentToolResult,
    ModelRequest,
    Provider,
    Role,
    StreamDelta,
    ToolSpec,
    Turn,
    Usage,
)

__all__ = [
    "AssistantTurn",
    "Content",
    "ContentText",
    "ContentThinking",
    "ContentToolRequest",
    "ContentToolResult",
    "ModelRequest",
    "Provider",
    "Role",
    "StreamDelta",
    "ToolSpec",
    "Turn",
    "Usage",
]
