"""The chat layer: turns, content, usage, the Provider protocol and ellmer-style Chat."""

from ._aliases import (
    ALIASES_CHECKED,
    CLAUDE_CODE_ALIASES,
    ModelChoice,
    ModelSource,
    is_model_alias,
    model_alias_map,
    resolve_model,
    suggest_model_spec,
)
from ._chat import DEFAULT_MAX_TOOL_ROUNDS, Chat
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
from ._stream import stream_request
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
)

__all__ = [
    "ALIASES_CHECKED",
    "CANCELLED_TOOL_CALL_ERROR",
    "CLAUDE_CODE_ALIASES",
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
    "ModelChoice",
    "ModelRequest",
    "ModelSource",
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
    "agent_name_scope",
    "chat",
    "current_agent_name",
    "example_arguments",
    "is_model_alias",
    "is_provider_name",
    "model_alias_map",
    "parse_model_spec",
    "provider_names",
    "register_provider",
    "repair_turns",
    "reply",
    "reset_current_agent",
    "resolve_model",
    "resolve_provider",
    "run_tool",
    "run_tools",
    "set_current_agent",
    "stream_request",
    "suggest_model_spec",
    "tool_call",
    "tool_calls",
    "tool_error_text",
    "trailing_repairs",
    "unregister_provider",
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
