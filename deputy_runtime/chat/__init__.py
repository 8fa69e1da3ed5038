"""The chat layer: turns, content, usage, the Provider protocol and ellmer-style Chat."""

from ._chat import DEFAULT_MAX_TOOL_ROUNDS, Chat, running_async_library
from ._context import (
    agent_name_scope,
    current_agent_name,
    reset_current_agent,
    set_current_agent,
)
from ._registry import (
    ProviderFactory,
    UnknownProviderError,
    chat,
    is_provider_name,
    parse_model_spec,
    provider_names,
    register_provider,
    resolve_provider,
    unregister_provider,
)
from ._scripted import (
    DEFAULT_SCRIPTED_USAGE,
    ScriptedProvider,
    reply,
    tool_call,
    tool_calls,
)
from ._stream import complete_streaming, stream_request
from ._testprovider import DEFAULT_TEST_USAGE, TestProvider, example_arguments
from ._toolloop import (
    CANCELLED_TOOL_CALL_ERROR,
    TOOL_ERROR_PREFIX,
    ToolLoopLimitError,
    repair_turns,
    run_tool,
    run_tools,
    tool_error_text,
    trailing_repairs,
    user_turn_after,
)
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
    UsageCounts,
    add_costs,
)

__all__ = [
    "CANCELLED_TOOL_CALL_ERROR",
    "DEFAULT_MAX_TOOL_ROUNDS",
    "DEFAULT_SCRIPTED_USAGE",
    "DEFAULT_TEST_USAGE",
    "TOOL_ERROR_PREFIX",
    "AssistantTurn",
    "Chat",
    "Content",
    "ContentText",
    "ContentThinking",
    "ContentToolRequest",
    "ContentToolResult",
    "ModelRequest",
    "Provider",
    "ProviderFactory",
    "Role",
    "ScriptedProvider",
    "StreamDelta",
    "TestProvider",
    "ToolLoopLimitError",
    "ToolSpec",
    "Turn",
    "UnknownProviderError",
    "Usage",
    "UsageCounts",
    "add_costs",
    "agent_name_scope",
    "chat",
    "complete_streaming",
    "current_agent_name",
    "example_arguments",
    "is_provider_name",
    "parse_model_spec",
    "provider_names",
    "register_provider",
    "repair_turns",
    "reply",
    "reset_current_agent",
    "resolve_provider",
    "run_tool",
    "run_tools",
    "running_async_library",
    "set_current_agent",
    "stream_request",
    "tool_call",
    "tool_calls",
    "tool_error_text",
    "trailing_repairs",
    "unregister_provider",
    "user_turn_after",
]

# The HTTP providers import httpx; load them only when asked for, like the registry does.
_LAZY = {
    "OpenAIProvider": "._openai",
    "OpenAICompatibleProvider": "._openai",
    "OllamaProvider": "._openai",
    "AnthropicProvider": "._anthropic",
    "RetryPolicy": "._http",
    "HTTPProvider": "._http",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module, __name__), name)
