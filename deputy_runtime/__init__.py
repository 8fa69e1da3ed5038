"""deputy_runtime: a strict, fast async runtime for lead agents that delegate to subagents.

Everything a host application needs is importable from here: the agents
(:class:`LeadAgent`, :class:`Agent`), definitions, permissions, hooks, usage limits,
every event class, every error class, the chat layer's entry points and the providers.
The subpackages :mod:`deputy_runtime.chat`, :mod:`deputy_runtime.tools`,
:mod:`deputy_runtime.definitions` and :mod:`deputy_runtime.runtime` hold the rest of the
public API (for example the conversation types a custom provider works with).

The HTTP provider classes and :class:`RetryPolicy` are loaded on first access, so
``import deputy_runtime`` does not import httpx.
"""

from typing import TYPE_CHECKING

from .chat import Chat, Provider, ScriptedProvider, TestProvider, chat, register_provider
from .definitions import (
    AgentDefinition,
    agent_definition,
    agent_definition_from_markdown,
    agent_definition_read,
    agent_definition_to_markdown,
    agent_definition_write,
    agent_definitions,
    claude_agent_definitions,
)
from .errors import (
    AuthenticationError,
    BadRequestError,
    BudgetExceeded,
    BudgetLedgerError,
    CommandHookError,
    CoordinationError,
    CoordinationUnavailableError,
    DefinitionError,
    DefinitionFileError,
    DelegationBindingError,
    DeputyError,
    InvalidUsageError,
    McpCallTimeoutError,
    McpConfigError,
    McpError,
    McpServerGoneError,
    McpStartError,
    McpToolError,
    PermissionCeilingError,
    PermissionModeWideningError,
    PermissionsError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    RequestLimitExceeded,
    ResourceBusyError,
    ResponseTooLargeError,
    RunActiveError,
    SandboxUnavailableError,
    ScriptError,
    SkillError,
    ToolArgumentError,
    ToolDefinitionError,
    ToolLoopLimitError,
    UnknownProviderError,
    UsageLimitExceeded,
    UsageValueError,
)
from .runtime import (
    DELEGATE_TOOL_NAME,
    MODE_TRANSITIONS,
    STOP_REASONS,
    Agent,
    AgentResult,
    AgentUsage,
    BudgetLedger,
    DelegationContext,
    DelegationEnd,
    DelegationPolicy,
    DelegationResources,
    DelegationStart,
    DelegationStatus,
    Event,
    EventLogWriter,
    ExclusiveResource,
    HookDecision,
    HookEvent,
    HookInput,
    HookMatcher,
    Hooks,
    InProcessLeases,
    LeadAgent,
    Lease,
    LeaseBackend,
    McpServerEvent,
    ModelRequestEvent,
    ModelResponseEvent,
    OwnedResources,
    ParallelResult,
    PermissionAllow,
    PermissionDeny,
    PermissionEvent,
    PermissionMode,
    Permissions,
    QuestionEvent,
    ResourceMode,
    RunStart,
    SharedResources,
    StopEvent,
    StopReason,
    SubagentRecord,
    TextDelta,
    ToolEnd,
    ToolStart,
    UsageEvent,
    UsageLimits,
    UsageNode,
    WarningEvent,
    decode_event,
    delegation_status,
    encode_event,
    usage_tree,
)
from .skills import Skill, skill_load
from .tools import FileToolLimits, Tool, ask_user, ask_user_tool, tool, tools_file

if TYPE_CHECKING:  # loaded lazily by __getattr__ below; these lines only inform type checkers
    from .chat import (
        AnthropicProvider,
        HTTPProvider,
        OllamaProvider,
        OpenAICompatibleProvider,
        OpenAIProvider,
        ResponseLimits,
        RetryPolicy,
    )

#: The installed version of deputy_runtime.
__version__ = "0.1.0"

__all__ = [
    "DELEGATE_TOOL_NAME",
    "MODE_TRANSITIONS",
    "STOP_REASONS",
    "Agent",
    "AgentDefinition",
    "AgentResult",
    "AgentUsage",
    "AnthropicProvider",
    "AuthenticationError",
    "BadRequestError",
    "BudgetExceeded",
    "BudgetLedger",
    "BudgetLedgerError",
    "Chat",
    "CommandHookError",
    "CoordinationError",
    "CoordinationUnavailableError",
    "DefinitionError",
    "DefinitionFileError",
    "DelegationBindingError",
    "DelegationContext",
    "DelegationEnd",
    "DelegationPolicy",
    "DelegationResources",
    "DelegationStart",
    "DelegationStatus",
    "DeputyError",
    "Event",
    "EventLogWriter",
    "ExclusiveResource",
    "FileToolLimits",
    "HTTPProvider",
    "HookDecision",
    "HookEvent",
    "HookInput",
    "HookMatcher",
    "Hooks",
    "InProcessLeases",
    "InvalidUsageError",
    "LeadAgent",
    "Lease",
    "LeaseBackend",
    "McpCallTimeoutError",
    "McpConfigError",
    "McpError",
    "McpServerEvent",
    "McpServerGoneError",
    "McpStartError",
    "McpToolError",
    "ModelRequestEvent",
    "ModelResponseEvent",
    "OllamaProvider",
    "OpenAICompatibleProvider",
    "OpenAIProvider",
    "OwnedResources",
    "ParallelResult",
    "PermissionAllow",
    "PermissionCeilingError",
    "PermissionDeny",
    "PermissionEvent",
    "PermissionMode",
    "PermissionModeWideningError",
    "Permissions",
    "PermissionsError",
    "Provider",
    "ProviderError",
    "ProviderTimeoutError",
    "QuestionEvent",
    "RateLimitError",
    "RequestLimitExceeded",
    "ResourceBusyError",
    "ResourceMode",
    "ResponseLimits",
    "ResponseTooLargeError",
    "RetryPolicy",
    "RunActiveError",
    "RunStart",
    "SandboxUnavailableError",
    "ScriptError",
    "ScriptedProvider",
    "SharedResources",
    "Skill",
    "SkillError",
    "StopEvent",
    "StopReason",
    "SubagentRecord",
    "TestProvider",
    "TextDelta",
    "Tool",
    "ToolArgumentError",
    "ToolDefinitionError",
    "ToolEnd",
    "ToolLoopLimitError",
    "ToolStart",
    "UnknownProviderError",
    "UsageEvent",
    "UsageLimitExceeded",
    "UsageLimits",
    "UsageNode",
    "UsageValueError",
    "WarningEvent",
    "agent_definition",
    "agent_definition_from_markdown",
    "agent_definition_read",
    "agent_definition_to_markdown",
    "agent_definition_write",
    "agent_definitions",
    "ask_user",
    "ask_user_tool",
    "chat",
    "claude_agent_definitions",
    "decode_event",
    "delegation_status",
    "encode_event",
    "register_provider",
    "skill_load",
    "tool",
    "tools_file",
    "usage_tree",
]

#: The provider classes (and RetryPolicy) this module loads from deputy_runtime.chat on
#: first access, because they import httpx.
_LAZY = frozenset(
    {
        "AnthropicProvider",
        "HTTPProvider",
        "OllamaProvider",
        "OpenAICompatibleProvider",
        "OpenAIProvider",
        "ResponseLimits",
        "RetryPolicy",
    }
)


# Hidden from type checkers: they see the TYPE_CHECKING imports above instead, so an
# attribute that does not exist is still a type error.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        """Load an HTTP provider class (or RetryPolicy) the first time it is asked for."""
        if name not in _LAZY:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        import importlib

        value = getattr(importlib.import_module(".chat", __name__), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
