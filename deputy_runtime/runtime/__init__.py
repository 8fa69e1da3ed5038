"""The agent runtime: Agent, LeadAgent, permissions, hooks, usage limits and events."""

from ._agent import Agent
from ._caller import CallerRun, current_caller
from ._checkpoint import CHECKPOINT_VERSION, Checkpoint, decode_checkpoint, encode_checkpoint
from ._compaction import (
    Compaction,
    CompactionJob,
    CompactionStrategy,
    DropToolResults,
    SummarizeOldest,
)
from ._coordinator import DelegationCoordinator
from ._events import (
    CompactionEnd,
    CompactionStart,
    DelegationEnd,
    DelegationStart,
    Event,
    EventLogWriter,
    McpLogEvent,
    McpProgressEvent,
    McpSamplingEvent,
    McpServerEvent,
    ModelRequestEvent,
    ModelResponseEvent,
    PermissionEvent,
    QuestionEvent,
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
from ._leases import IN_PROCESS_LEASES, InProcessLeases, Lease, LeaseBackend
from ._ledger import BudgetLedger, LeaseLedger
from ._localledger import InProcessLedger
from ._parallel import ParallelResult
from ._permissions import (
    DELEGATE_TOOL_NAME,
    MODE_TRANSITIONS,
    PERMISSION_MODES,
    PermissionAllow,
    PermissionDeny,
    PermissionMode,
    Permissions,
)
from ._policy import DelegationPolicy
from ._records import DelegationContext, DelegationResources, SubagentRecord
from ._resources import (
    BindRequest,
    ExclusiveResource,
    OwnedResources,
    ResourceMode,
    SharedResources,
)
from ._result import AgentResult
from ._states import STOP_REASONS, DelegationStatus, StopReason, delegation_status
from ._stores import CheckpointStore, FileCheckpointStore
from ._usage import AgentUsage, UsageLimits
from ._usagetree import UsageNode, usage_tree

__all__ = [
    "CHECKPOINT_VERSION",
    "DELEGATE_TOOL_NAME",
    "IN_PROCESS_LEASES",
    "MODE_TRANSITIONS",
    "PERMISSION_MODES",
    "STOP_REASONS",
    "Agent",
    "AgentResult",
    "AgentUsage",
    "BindRequest",
    "BudgetLedger",
    "CallerRun",
    "Checkpoint",
    "CheckpointStore",
    "Compaction",
    "CompactionEnd",
    "CompactionJob",
    "CompactionStart",
    "CompactionStrategy",
    "DelegationContext",
    "DelegationCoordinator",
    "DelegationEnd",
    "DelegationPolicy",
    "DelegationResources",
    "DelegationStart",
    "DelegationStatus",
    "DropToolResults",
    "Event",
    "EventLogWriter",
    "ExclusiveResource",
    "FileCheckpointStore",
    "HookDecision",
    "HookEvent",
    "HookInput",
    "HookMatcher",
    "Hooks",
    "InProcessLeases",
    "InProcessLedger",
    "LeadAgent",
    "Lease",
    "LeaseBackend",
    "LeaseLedger",
    "McpLogEvent",
    "McpProgressEvent",
    "McpSamplingEvent",
    "McpServerEvent",
    "ModelRequestEvent",
    "ModelResponseEvent",
    "OwnedResources",
    "ParallelResult",
    "PermissionAllow",
    "PermissionDeny",
    "PermissionEvent",
    "PermissionMode",
    "Permissions",
    "QuestionEvent",
    "ResourceMode",
    "RunStart",
    "SharedResources",
    "StopEvent",
    "StopReason",
    "SubagentRecord",
    "SummarizeOldest",
    "TextDelta",
    "ToolEnd",
    "ToolStart",
    "UsageEvent",
    "UsageLimits",
    "UsageNode",
    "WarningEvent",
    "current_caller",
    "decode_checkpoint",
    "decode_event",
    "delegation_status",
    "encode_checkpoint",
    "encode_event",
    "usage_tree",
]

# isort: split
# The run id rule every checkpoint store applies (the Redis store's too); not public API.
from ._stores import check_run_id as check_run_id

# isort: split
# Building blocks of the durable (Temporal) lead, importable from here so that it shows its
# model the same routing section and delegate tool, and records the same spans, as the
# in-process lead; not public API.
from ._routing import DELEGATE_DESCRIPTION as DELEGATE_DESCRIPTION
from ._routing import delegate_parameters as delegate_parameters
from ._routing import routing_section as routing_section
from ._trace import chat_reply as chat_reply
from ._trace import chat_span as chat_span
from ._trace import tool_span as tool_span

# isort: split
# Building blocks of the durable ``parallel_delegate``: the same validation, share rule and
# outcomes as the in-process fan-out; not public API.
from ._parallel import batch_limits as batch_limits
from ._parallel import batch_reason as batch_reason
from ._parallel import check_batch as check_batch
from ._parallel import fanout_blocker as fanout_blocker
from ._parallel import reserve_share as reserve_share
from ._parallel import responder_requests as responder_requests
from ._records import Brief as Brief
from ._records import first_message as first_message
from ._records import record_outcome as record_outcome
from ._usage import LIMIT_STOP_REASONS as LIMIT_STOP_REASONS
from ._usage import Meter as Meter
from ._usage import Reservation as Reservation
from ._usage import exhausted as exhausted
from ._usage import fair_share as fair_share
from ._usage import refill_field as refill_field
from ._usage import shortfall_text as shortfall_text

# isort: split
# The hook rules the durable lead's workers apply around a tool call, as the gate does.
from ._context import hook_warning as hook_warning
from ._gate import hook_refusal as hook_refusal
from ._hooks import ALWAYS_FORWARDED as ALWAYS_FORWARDED
from ._permissions import delegate_placeholder as delegate_placeholder

# isort: split
# Building blocks of the durable ``ask_user``: the same name matching as the permission
# rules; not public API.
from ._permissions import ASK_USER_TOOL_NAME as ASK_USER_TOOL_NAME
from ._permissions import normalize_tool_name as normalize_tool_name

# isort: split
# The texts the model reads about its calls and delegations, worded once for both engines;
# not public API.
from ._texts import BLANK_TASK_TEXT as BLANK_TASK_TEXT
from ._texts import CUT_OFF_TEXT as CUT_OFF_TEXT
from ._texts import INTERRUPTED_TEXT as INTERRUPTED_TEXT
from ._texts import NOT_RUN_TEXT as NOT_RUN_TEXT
from ._texts import TOOL_CALL_LIMIT_TEXT as TOOL_CALL_LIMIT_TEXT
from ._texts import cost_unknown_text as cost_unknown_text
from ._texts import delegation_cap_text as delegation_cap_text
from ._texts import invalid_arguments_text as invalid_arguments_text
from ._texts import permission_denied_text as permission_denied_text
from ._texts import run_limit_text as run_limit_text
from ._texts import unknown_agent_text as unknown_agent_text

# isort: split
# The output contract of structured results, judged the same way by both engines; not
# public API.
from ._output import OutputContract as OutputContract
from ._output import judge as judge
from ._output import with_output_section as with_output_section

# isort: split
# Building blocks of the durable time limits and ``on_exceed="error"``: the same errors and
# the same limit rule as in-process; not public API.
from ._result import raise_for_limit as raise_for_limit
