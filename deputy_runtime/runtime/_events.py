"""Run events: one msgspec tagged union (tag field ``type``), JSON-encodable.

Every event carries the emitting agent's ``agent_id``, ``agent_name`` and ``run_id``;
events from inside a delegation also carry ``delegation_id``, ``parent_agent_id`` and
``parent_run_id``, so a host reading a lead's stream can tell every subagent apart.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeAlias

import anyio
import msgspec

from ._states import DelegationStatus, StopReason
from ._usage import AgentUsage, UsageLimits

__all__ = [
    "CompactionEnd",
    "CompactionStart",
    "DelegationEnd",
    "DelegationStart",
    "Event",
    "EventLogWriter",
    "EventSink",
    "GuardedSink",
    "McpLogEvent",
    "McpProgressEvent",
    "McpSamplingEvent",
    "McpServerEvent",
    "ModelRequestEvent",
    "ModelResponseEvent",
    "PermissionEvent",
    "QuestionEvent",
    "RunStart",
    "StopEvent",
    "TextDelta",
    "ToolEnd",
    "ToolStart",
    "UsageEvent",
    "WarningEvent",
    "decode_event",
    "encode_event",
]


class _Base(msgspec.Struct, frozen=True, gc=False, kw_only=True, tag_field="type"):
    agent_id: str
    agent_name: str | None = None
    run_id: str
    delegation_id: str | None = None
    parent_agent_id: str | None = None
    parent_run_id: str | None = None


class RunStart(_Base, frozen=True, gc=False, tag="run_start"):
    """A run began with ``task`` under ``limits``."""

    task: str
    limits: UsageLimits


class ModelRequestEvent(_Base, frozen=True, gc=False, tag="model_request"):
    """A model request is about to be sent (``index`` counts from 1 within the run)."""

    index: int
    model: str


class ModelResponseEvent(_Base, frozen=True, gc=False, tag="model_response"):
    """A model response arrived (``cost_usd``: its cost, ``None`` when not reported)."""

    index: int
    finish_reason: str | None
    tool_calls: int
    input_tokens: int
    output_tokens: int
    duration: float | None = None
    cost_usd: float | None = None


class TextDelta(_Base, frozen=True, gc=False, tag="text"):
    """A piece of streamed model text."""

    text: str


class ToolStart(_Base, frozen=True, gc=False, tag="tool_start"):
    """A tool call passed its checks and is about to run.

    For ``delegate_to_agent`` the ``call_delegation_id`` names the delegation it starts.
    """

    tool_call_id: str
    tool_name: str
    arguments: dict[str, Any]
    call_delegation_id: str | None = None


class ToolEnd(_Base, frozen=True, gc=False, tag="tool_end"):
    """A tool call finished; ``error`` is set when it failed or was refused."""

    tool_call_id: str
    tool_name: str
    error: str | None = None
    result_preview: str | None = None
    duration: float = 0.0
    call_delegation_id: str | None = None


class PermissionEvent(_Base, frozen=True, gc=False, tag="permission"):
    """A permission decision on a tool call: every denial, and every allow that a
    ``can_use_tool`` callback or PermissionRequest hook made. (An allow by the static
    rules alone is implied by the ``tool_start`` that follows.)"""

    tool_call_id: str
    tool_name: str
    decision: str
    reason: str | None = None


class UsageEvent(_Base, frozen=True, gc=False, tag="usage"):
    """The run's usage, emitted just before its stop event."""

    usage: AgentUsage
    limits: UsageLimits


class WarningEvent(_Base, frozen=True, gc=False, tag="warning"):
    """Something the host should know about that did not stop the run."""

    message: str


class StopEvent(_Base, frozen=True, gc=False, tag="stop"):
    """The run ended. Always the last event of a run, also when it was cancelled."""

    stop_reason: StopReason
    usage: AgentUsage
    error: str | None = None


class CompactionStart(_Base, frozen=True, gc=False, tag="compaction_start"):
    """The conversation is being compacted before the next request.

    ``tokens`` is the request's estimated size, ``threshold`` the size that triggers a
    compaction and ``window`` the context window (all in tokens); ``turns`` the
    conversation's length.
    """

    strategy: str
    tokens: int
    window: int
    threshold: int
    turns: int


class CompactionEnd(_Base, frozen=True, gc=False, tag="compaction_end"):
    """A compaction finished: the sizes before and after, and the model requests it
    made (counted in the run's usage). ``error`` says why it stopped early."""

    strategy: str
    tokens_before: int
    tokens_after: int
    turns_before: int
    turns_after: int
    requests: int = 0
    error: str | None = None


class DelegationStart(_Base, frozen=True, gc=False, tag="delegation_start"):
    """A delegation was admitted. Carries the subagent's ids (``agent_id``, ``run_id``,
    ``delegation_id``) with the lead as parent; the subagent's own events follow."""

    task: str
    limits: UsageLimits | None = None
    tool_call_id: str | None = None


class DelegationEnd(_Base, frozen=True, gc=False, tag="delegation_end"):
    """A delegation settled: its final status, stop reason and usage."""

    status: DelegationStatus
    stop_reason: StopReason
    usage: AgentUsage
    error: str | None = None
    tool_call_id: str | None = None


class McpServerEvent(_Base, frozen=True, gc=False, tag="mcp_server"):
    """An MCP server attached to the lead started (``action="start"``) or stopped.

    Carries the ids of the delegation that started or used it. ``pid`` is the stdio
    server's process id, ``duration`` the start time or the session's lifetime in
    seconds; a stop says how (``kind``: ``closed``, ``terminated``, ``killed`` or
    ``failed``), with ``exit_code`` and ``error`` when known. The server's standard
    error is never part of an event (it stays in the session's bounded ring buffer).
    Tool calls on MCP servers are ToolStart/ToolEnd events with ``mcp__`` names.
    """

    server: str
    action: str
    transport: str
    pid: int | None = None
    duration: float = 0.0
    tools: int | None = None
    kind: str | None = None
    exit_code: int | None = None
    error: str | None = None


class McpProgressEvent(_Base, frozen=True, gc=False, tag="mcp_progress"):
    """An MCP server reported progress on a running tool call of the delegation.

    ``tool`` is the runtime name (``mcp__<server>__<tool>``), ``title`` the server's
    display name for it; ``progress`` increases with each report, ``total`` is set when
    the server knows it, ``message`` is cut to the server's ``stderr_line_chars``.
    """

    server: str
    tool: str
    progress: float
    total: float | None = None
    message: str | None = None
    title: str | None = None


class McpLogEvent(_Base, frozen=True, gc=False, tag="mcp_log"):
    """A log message an MCP server sent while a tool call of the delegation ran.

    ``level`` is MCP's (``debug`` ... ``emergency``), ``logger`` the server's logger
    name; ``data`` is the message as text (JSON unless it was a string, binary
    summarised), cut to the server's ``stderr_line_chars``.
    """

    server: str
    level: str
    logger: str | None = None
    data: str = ""


class McpSamplingEvent(_Base, frozen=True, gc=False, tag="mcp_sampling"):
    """An MCP server asked the delegation's model for a message (``sampling/createMessage``).

    Emitted once per request the server made while a tool call of the run was in
    flight: answered (``error`` is ``None``; ``model``, the tokens and ``cost_usd`` are
    the response's, charged to the run's budget like its own requests) or refused
    (``error`` says why: the budget is spent, a PreToolUse hook denied it, the provider
    failed; no tokens were used unless the provider failed mid-request).
    """

    server: str
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    duration: float = 0.0
    error: str | None = None


class QuestionEvent(_Base, frozen=True, gc=False, tag="question"):
    """An ``ask_user`` call is waiting for a person's answers (a durable run).

    ``questions`` are ``{"question": str, "options": list[str] | None}`` objects, as an
    ``ask_user`` handler receives them; ``question_id`` names the question in the lead
    workflow's ``answer`` update. The ``tool_end`` of ``tool_call_id`` follows once the
    answers arrived (or the wait ended).
    """

    question_id: str
    tool_call_id: str
    questions: tuple[dict[str, Any], ...]


#: Any event a run emits: the union of the event classes, tagged by ``type`` in JSON.
Event: TypeAlias = (
    RunStart
    | ModelRequestEvent
    | ModelResponseEvent
    | TextDelta
    | ToolStart
    | ToolEnd
    | PermissionEvent
    | UsageEvent
    | WarningEvent
    | StopEvent
    | DelegationStart
    | DelegationEnd
    | McpServerEvent
    | McpProgressEvent
    | McpLogEvent
    | McpSamplingEvent
    | QuestionEvent
    | CompactionStart
    | CompactionEnd
)

EventSink: TypeAlias = Callable[[Event], None]

_encoder = msgspec.json.Encoder()
_decoder: msgspec.json.Decoder[Event] = msgspec.json.Decoder(Event)


def encode_event(event: Event) -> bytes:
    """One event as compact JSON bytes (no trailing newline)."""
    return _encoder.encode(event)


def decode_event(data: bytes | str) -> Event:
    """Parse JSON produced by :func:`encode_event` back into an event."""
    return _decoder.decode(data)


class EventChannel:
    """An unbounded single-consumer queue from a run to ``run_stream``'s consumer.

    ``put`` is synchronous and never blocks the run (a slow consumer costs memory, not
    progress). Cheaper than a memory object stream per event, which matters when a
    fan-out emits ten events per delegation. After ``abandon`` events are dropped.
    """

    __slots__ = ("_closed", "_dropping", "_items", "_waiter")

    def __init__(self) -> None:
        self._items: deque[Event] = deque()
        self._waiter: anyio.Event | None = None
        self._closed = False
        self._dropping = False

    def put(self, event: Event) -> None:
        """Queue one event (an :data:`EventSink`)."""
        if self._dropping:
            return
        self._items.append(event)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            waiter.set()

    def close(self) -> None:
        """No more events will come; the consumer drains what is queued, then stops."""
        self._closed = True
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            waiter.set()

    def abandon(self) -> None:
        """The consumer is gone: drop what is queued and everything that follows."""
        self._dropping = True
        self._items.clear()

    async def wait(self) -> bool:
        """Wait until events are queued (``True``) or the channel is closed and empty."""
        while not self._items:
            if self._closed:
                return False
            waiter = self._waiter = anyio.Event()
            await waiter.wait()
        return True

    def drain(self) -> deque[Event]:
        """Hand over the queued events in order; later ones go to a fresh queue.

        The consumer iterates the returned queue while the run keeps adding to the new
        one (picked up by the next :meth:`wait`), so order is kept without a generator
        step per event.
        """
        items = self._items
        self._items = deque()
        return items


class GuardedSink:
    """Wraps a host's event sink: the first exception stops delivery and is kept.

    A sink runs inside the agent's tool-call tasks; letting its error escape there would
    abort a run half way. The agent raises ``error`` once the run has finished.
    """

    __slots__ = ("error", "sink")

    def __init__(self, sink: EventSink) -> None:
        self.sink = sink
        self.error: Exception | None = None

    def __call__(self, event: Event) -> None:
        if self.error is None:
            try:
                self.sink(event)
            except Exception as exc:
                self.error = exc


class EventLogWriter:
    """Writes events as JSON lines to a file or stream; use as an event sink.

    ``EventLogWriter(path)`` appends to a file it owns (close it, or use it as a context
    manager); ``EventLogWriter(stream=sys.stdout.buffer)`` writes to a stream it does not own.
    """

    def __init__(self, path: str | Path | None = None, *, stream: IO[bytes] | None = None):
        if (path is None) == (stream is None):
            raise ValueError("EventLogWriter needs exactly one of path or stream")
        self._owned = stream is None
        self._stream: IO[bytes] = open(path, "ab") if path is not None else stream  # type: ignore[assignment]  # noqa: SIM115

    def __call__(self, event: Event) -> None:
        self._stream.write(_encoder.encode(event) + b"\n")

    def flush(self) -> None:
        """Flush the underlying stream."""
        self._stream.flush()

    def close(self) -> None:
        """Flush, and close the file if this writer opened it."""
        self._stream.flush()
        if self._owned:
            self._stream.close()

    def __enter__(self) -> EventLogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
