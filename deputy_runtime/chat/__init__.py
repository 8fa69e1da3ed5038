"""The chat layer: conversation value types, the Provider protocol, providers and Chat.

A :class:`Provider` turns one :class:`ModelRequest` into one :class:`AssistantTurn`; it
keeps no conversation. :class:`Chat` keeps the conversation and runs the tool loop.
:func:`chat` builds a Chat from a ``"provider/model"`` spec through the provider registry
(:func:`register_provider` adds your own).

The HTTP providers (:class:`OpenAIProvider`, :class:`AnthropicProvider`, ...) and
:class:`RetryPolicy` import httpx, so they are loaded on first access: importing this
package, or a command that never talks to a model, does not pay for the HTTP stack.
"""

from typing import TYPE_CHECKING

from ..errors import ToolLoopLimitError, UnknownProviderError
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
from ._codec import decode_turns, encode_turns
from ._context import (
    agent_name_scope,
    current_agent_name,
    current_request_headers,
    request_headers_scope,
)
from ._registry import (
    ProviderFactory,
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
from ._toolloop import CANCELLED_TOOL_CALL_ERROR
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
from ._window import (
    CONTEXT_WINDOWS,
    CONTEXT_WINDOWS_CHECKED,
    context_window,
    estimate_tokens,
)

# isort: split
# Building blocks of the agent runtime (deputy_runtime.runtime). They are importable from
# here so that the runtime never reaches into this package's private modules, but they
# are not in __all__: they are not public API and may change.
from ._chat import running_async_library as running_async_library
from ._codec import plain_value as plain_value
from ._context import reset_current_agent as reset_current_agent
from ._context import set_current_agent as set_current_agent
from ._stream import complete_streaming as complete_streaming
from ._toolloop import tool_error_text as tool_error_text
from ._toolloop import user_turn_after as user_turn_after
from ._types import UsageCounts as UsageCounts
from ._types import add_costs as add_costs
from ._window import WindowMeter as WindowMeter
from ._window import turns_tokens as turns_tokens
from ._window import window_value as window_value

if TYPE_CHECKING:  # loaded lazily by __getattr__ below; these lines only inform type checkers
    from ._anthropic import AnthropicProvider
    from ._http import HTTPProvider, RetryPolicy
    from ._limits import ResponseLimits
    from ._openai import OllamaProvider, OpenAICompatibleProvider, OpenAIProvider

__all__ = [
    "ALIASES_CHECKED",
    "CANCELLED_TOOL_CALL_ERROR",
    "CLAUDE_CODE_ALIASES",
    "CONTEXT_WINDOWS",
    "CONTEXT_WINDOWS_CHECKED",
    "DEFAULT_MAX_TOOL_ROUNDS",
    "DEFAULT_SCRIPTED_USAGE",
    "DEFAULT_TEST_USAGE",
    "AnthropicProvider",
    "AssistantTurn",
    "Chat",
    "Content",
    "ContentText",
    "ContentThinking",
    "ContentToolRequest",
    "ContentToolResult",
    "HTTPProvider",
    "ModelChoice",
    "ModelRequest",
    "ModelSource",
    "OllamaProvider",
    "OpenAICompatibleProvider",
    "OpenAIProvider",
    "Provider",
    "ProviderFactory",
    "ResponseLimits",
    "RetryPolicy",
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
    "context_window",
    "current_agent_name",
    "current_request_headers",
    "decode_turns",
    "encode_turns",
    "estimate_tokens",
    "example_arguments",
    "is_model_alias",
    "is_provider_name",
    "model_alias_map",
    "parse_model_spec",
    "provider_names",
    "register_provider",
    "reply",
    "request_headers_scope",
    "resolve_model",
    "resolve_provider",
    "stream_request",
    "suggest_model_spec",
    "tool_call",
    "tool_calls",
    "unregister_provider",
]

#: Attribute -> the module that defines it, imported on first access.
_LAZY = {
    "AnthropicProvider": "._anthropic",
    "ResponseLimits": "._limits",
    "HTTPProvider": "._http",
    "OllamaProvider": "._openai",
    "OpenAICompatibleProvider": "._openai",
    "OpenAIProvider": "._openai",
    "RetryPolicy": "._http",
}


# Hidden from type checkers: they see the TYPE_CHECKING imports above instead, so an
# attribute that does not exist is still a type error.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        """Load an HTTP provider class (or RetryPolicy) the first time it is asked for."""
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        import importlib

        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value  # later lookups find it directly, without this hook
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
