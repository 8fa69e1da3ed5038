"""deputy_runtime: a strict, fast async runtime for lead agents that delegate to subagents.

The public API is re-exported here; everything else lives in private modules.
"""

from .errors import (
    AuthenticationError,
    BadRequestError,
    BudgetExceeded,
    DefinitionError,
    DefinitionFileError,
    DelegationBindingError,
    DeputyError,
    PermissionCeilingError,
    PermissionModeWideningError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    RequestLimitExceeded,
    ResourceBusyError,
    RunActiveError,
    ScriptError,
    SkillError,
    ToolArgumentError,
    ToolDefinitionError,
    UsageLimitExceeded,
)
from .skills import Skill
from .tools import Tool

__version__ = "0.1.0"

__all__ = [
    "AuthenticationError",
    "BadRequestError",
    "BudgetExceeded",
    "DefinitionError",
    "DefinitionFileError",
    "DelegationBindingError",
    "DeputyError",
    "PermissionCeilingError",
    "PermissionModeWideningError",
    "ProviderError",
    "ProviderTimeoutError",
    "RateLimitError",
    "RequestLimitExceeded",
    "ResourceBusyError",
    "RunActiveError",
    "ScriptError",
    "Skill",
    "SkillError",
    "Tool",
    "ToolArgumentError",
    "ToolDefinitionError",
    "UsageLimitExceeded",
]
