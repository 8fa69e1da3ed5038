"""The agent runtime: Agent, LeadAgent, permissions, hooks, usage limits and events."""

from ._agent import Agent
from ._delegation import SubagentRecord
from ._events import (
    DelegationEnd,
    DelegationStart,
    Event,
    EventLogWriter,
    ModelRequestEvent,
    ModelResponseEvent,
    PermissionEvent,
    RunStart,
    StopEvent,
    TextDelta,
    ToolEnd,
    ToolStart,
    UsageEvent,
    WarningEvent,
    decode_event,
    encode_event,
)
from ._hooks import HookDecision, HookEvent, HookInput, HookMatcher, Hooks
from ._lead import LeadAgent
from ._parallel import ParallelResult
from ._permissions import (
    DELEGATE_TOOL_NAME,
    MODE_TRANSITIONS,
    PermissionAllow,
    PermissionDeny,
    PermissionMode,
    Permissions,
)
from ._policy import DelegationContext, DelegationPolicy, DelegationResources
from ._runstate import AgentResult
from ._usage import STOP_REASONS, AgentUsage, UsageLimits

__all__ = [
    "DELEGATE_TOOL_NAME",
    "MODE_TRANSITIONS",
    "STOP_REASONS",
    "Agent",
    "AgentResult",
    "AgentUsage",
    "DelegationContext",
    "DelegationEnd",
    "DelegationPolicy",
    "DelegationResources",
    "DelegationStart",
    "Event",
    "EventLogWriter",
    "HookDecision",
    "HookEvent",
    "HookInput",
    "HookMatcher",
    "Hooks",
    "LeadAgent",
    "ModelRequestEvent",
    "ModelResponseEvent",
    "ParallelResult",
    "PermissionAllow",
    "PermissionDeny",
    "PermissionEvent",
    "PermissionMode",
    "Permissions",
    "RunStart",
    "StopEvent",
    "SubagentRecord",
    "TextDelta",
    "ToolEnd",
    "ToolStart",
    "UsageEvent",
    "UsageLimits",
    "WarningEvent",
    "decode_event",
    "encode_event",
]
