"""The texts the model reads about its tool calls and delegations, each worded once.

A model learns what happened to a call from these texts alone, so an in-process run and
a durable run must show the very same words: both engines take them from here. (The
failure prefix of a tool that raised, ``Tool calling failed with error ...``, belongs to
the chat layer, which every provider shares: ``deputy_runtime.chat.tool_error_text``.)
The warnings both engines give the host about a run are worded here for the same reason.
"""

from __future__ import annotations

__all__ = [
    "BLANK_TASK_TEXT",
    "CUT_OFF_TEXT",
    "INTERRUPTED_TEXT",
    "NOT_RUN_TEXT",
    "TOOL_CALL_LIMIT_TEXT",
    "cost_unknown_text",
    "delegation_cap_text",
    "invalid_arguments_text",
    "permission_denied_text",
    "run_limit_text",
    "unknown_agent_text",
]

#: A call past the run's tool-call limit (or with no slot on its shared budget).
TOOL_CALL_LIMIT_TEXT = "Tool call limit reached; the call did not run."
#: A call of a turn whose run was interrupted before the call's turn came.
INTERRUPTED_TEXT = "The run was interrupted; the call did not run."
#: A call that passed its gate and was running when the run ended: it may have acted.
CUT_OFF_TEXT = (
    "The run was cancelled while this tool call was running; it may have had effects, "
    "but its result is unknown."
)
#: A call of the last reply that never started because the run stopped first.
NOT_RUN_TEXT = "The run stopped before this tool call ran."
#: A ``delegate_to_agent`` call whose task is empty or only whitespace.
BLANK_TASK_TEXT = "delegate_to_agent: 'task' must not be blank."


def unknown_agent_text(requested: str, available: str) -> str:
    """A delegation to a name that is not routed (``available``: the names, joined)."""
    return f"Unknown agent: {requested}. Available agents: {available}"


def run_limit_text(limit: str) -> str:
    """A delegation refused because the lead's run has no room left for ``limit``."""
    return f"Run limit reached for {limit}: no new delegation can start."


def delegation_cap_text(agent_name: str, cap: int) -> str:
    """A delegation refused because its agent's ``max_delegations`` cap is used up."""
    return (
        f"The delegation budget for agent '{agent_name}' is spent: {cap} of {cap} "
        "delegations in this run have started. Do the rest without it."
    )


def invalid_arguments_text(error: object) -> str:
    """A call whose arguments do not match the tool's schema."""
    return f"Invalid arguments: {error}"


def permission_denied_text(reason: str) -> str:
    """A call the permission rules, a hook or ``can_use_tool`` refused."""
    return f"Permission denied: {reason}"


def cost_unknown_text(provider: str, model: str) -> str:
    """The run's one warning that ``max_cost_usd`` cannot see a response without a cost."""
    return (
        f"max_cost_usd is set, but provider {provider!r} (model {model!r}) reported no "
        "cost for a response: the cost limit counts only reported costs"
    )
