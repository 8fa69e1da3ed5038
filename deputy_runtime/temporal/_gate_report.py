"""What the tool activity's gate did, in order, so the workflow can log it as in-process.

In-process, a tool call's events follow the gate: the warnings of hooks that failed and
the permission decision come first, ``tool_start`` only once the call passed every check
(a denied or hook-refused call has no ``tool_start`` and no ``tool_end``), and the
warnings of the PostToolUse hooks before ``tool_end``. On Temporal the gate runs on a
worker, inside the ``deputy_tool_call`` activity, while the event log lives in workflow
code; the activity therefore reports each step it took (:class:`GateReport`) and the
workflow appends the events from it in that order. So that a follower sees a running
call while it runs, the activity also sends the report to the calling workflow as the
``deputy_tool_started`` signal (:class:`GatePassed`) once the call passed its gate and
before the tool runs; the workflow logs the gate's events and ``tool_start`` then, and
the rest (PostToolUse warnings, ``tool_end``) when the activity returns. A call whose
signal did not arrive is logged whole when the activity returns, in the same order.
"""

from __future__ import annotations

import enum

import msgspec

__all__ = ["TOOL_STARTED_SIGNAL", "GateLog", "GatePassed", "GateReport", "GateStep", "GateStepKind"]

#: Signal a tool activity sends its workflow once the call passed its gate.
TOOL_STARTED_SIGNAL = "deputy_tool_started"


class GateStepKind(enum.Enum):
    """One thing the gate did that the event log shows."""

    #: A hook raised: a ``warning`` event (``text`` is ``"EVENT: message"``).
    HOOK_ERROR = "hook_error"
    #: The call was allowed by a decision (a ``can_use_tool`` callback or a
    #: PermissionRequest hook): a ``permission`` event with decision ``allow``.
    ALLOW = "allow"
    #: The call was denied: a ``permission`` event with decision ``deny`` (``text``: why).
    DENY = "deny"


class GateStep(msgspec.Struct, frozen=True, gc=False):
    """One step of the gate, in the order it happened."""

    kind: GateStepKind
    text: str | None = None


class GateReport(msgspec.Struct, frozen=True, gc=False):
    """The gate's steps before the tool ran (or instead of it).

    ``started`` is whether the tool ran (then ``tool_start`` follows ``steps``, and the
    hook errors of the reply not in ``steps`` came after it, from PostToolUse hooks).
    ``interrupt`` is a denial asking to stop the run (``PermissionDeny(interrupt=True)``).
    """

    started: bool
    steps: tuple[GateStep, ...] = ()
    interrupt: bool = False


class GatePassed(msgspec.Struct, frozen=True, gc=False):
    """The ``deputy_tool_started`` signal: call ``tool_call_id`` passed its gate."""

    tool_call_id: str
    report: GateReport


class GateLog:
    """Builds a :class:`GateReport` on the worker while the gate runs."""

    __slots__ = ("_seen", "allowed_by_hook", "steps")

    def __init__(self) -> None:
        self.steps: list[GateStep] = []
        self.allowed_by_hook = False  # a PermissionRequest hook approved the call
        self._seen = 0

    def errors(self, errors: list[str]) -> None:
        """Record the hook errors added to ``errors`` since the last call."""
        for error in errors[self._seen :]:
            self.steps.append(GateStep(GateStepKind.HOOK_ERROR, error))
        self._seen = len(errors)

    def decide(self, kind: GateStepKind, reason: str | None = None) -> None:
        """Record a permission decision."""
        self.steps.append(GateStep(kind, reason))

    def report(self, *, started: bool, interrupt: bool = False) -> GateReport:
        """The report of the steps recorded so far."""
        return GateReport(started, tuple(self.steps), interrupt)
