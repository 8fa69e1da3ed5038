"""ScriptedProvider: replies taken from a script, for tests and benchmarks.

A script is a sequence of entries shared by every agent, or a mapping from agent name
(see :func:`~deputy_runtime.chat.agent_name_scope`) to that agent's own sequence or to a
responder callable used for every one of its requests. It fails loudly: an exhausted
script, an unknown agent or a request a callable rejects raises :class:`ScriptError`
naming the agent and the position in the script.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeAlias

import msgspec

from ..errors import ScriptError
from ._context import current_agent_name
from ._types import (
    AssistantTurn,
    Content,
    ContentText,
    ContentThinking,
    ContentToolRequest,
    ModelRequest,
    StreamDelta,
    Usage,
)
from ._window import window_value

__all__ = [
    "DEFAULT_SCRIPTED_USAGE",
    "Responder",
    "Script",
    "ScriptEntry",
    "ScriptedProvider",
    "reply",
    "tool_call",
    "tool_calls",
]

#: What a scripted callable may return.
ScriptReply: TypeAlias = AssistantTurn | str
#: A callable that answers a request (may be async); raise ScriptError to reject it.
Responder: TypeAlias = Callable[[ModelRequest], ScriptReply | Awaitable[ScriptReply]]
#: One scripted reply: a turn, a text, a responder, or an exception to raise.
ScriptEntry: TypeAlias = AssistantTurn | str | Responder | BaseException
#: A whole script: one shared sequence, or per agent name a sequence or a responder.
Script: TypeAlias = Sequence[ScriptEntry] | Mapping[str | None, Sequence[ScriptEntry] | Responder]

#: Usage reported by every scripted reply that does not carry its own.
DEFAULT_SCRIPTED_USAGE = Usage(requests=1, input_tokens=10, output_tokens=5)

_call_ids = itertools.count(1)


def reply(text: str, *, usage: Usage | None = None) -> AssistantTurn:
    """A scripted assistant text reply.

    Args:
        text: What the model says.
        usage: The usage the turn reports (the scripted provider's default when omitted).

    Returns:
        An assistant turn holding ``text``.
    """
    return AssistantTurn((ContentText(text),), usage or Usage(), finish_reason="stop")


def tool_call(
    name: str,
    arguments: Mapping[str, Any] | None = None,
    *,
    id: str | None = None,
    text: str | None = None,
    usage: Usage | None = None,
) -> AssistantTurn:
    """A scripted assistant turn requesting one tool call.

    Args:
        name: The tool to call.
        arguments: Its arguments (none when omitted).
        id: The call id; a unique one is generated when omitted.
        text: Text the model says alongside the call.
        usage: The usage the turn reports (the scripted provider's default when omitted).

    Returns:
        An assistant turn holding one tool request.
    """
    return tool_calls((name, arguments or {}, id), text=text, usage=usage)


def tool_calls(
    *calls: tuple[str, Mapping[str, Any]]
    | tuple[str, Mapping[str, Any], str | None]
    | ContentToolRequest,
    text: str | None = None,
    usage: Usage | None = None,
) -> AssistantTurn:
    """A scripted assistant turn requesting several tool calls at once (parallel calls).

    Args:
        *calls: Each ``(name, arguments)``, ``(name, arguments, id)`` or a ready
            :class:`~deputy_runtime.chat.ContentToolRequest`.
        text: Text the model says alongside the calls.
        usage: The usage the turn reports (the scripted provider's default when omitted).

    Returns:
        An assistant turn holding the tool requests, in order.

    Raises:
        TypeError: A call is neither a tuple of that shape nor a ContentToolRequest.
    """
    contents: list[Content] = [ContentText(text)] if text else []
    for call in calls:
        if isinstance(call, ContentToolRequest):
            contents.append(call)
            continue
        name, arguments, *rest = call
        call_id = rest[0] if rest and rest[0] is not None else f"call_{next(_call_ids)}"
        contents.append(ContentToolRequest(call_id, name, dict(arguments)))
    return AssistantTurn(tuple(contents), usage or Usage(), finish_reason="tool_use")


class _Track:
    """The script of one agent (or the shared one) and how far it has been played."""

    __slots__ = ("entries", "key", "position", "responder")

    def __init__(self, key: str | None, entries: tuple[Any, ...], responder: Any) -> None:
        self.key = key
        self.entries = entries
        self.responder = responder
        self.position = 0


class _State:
    """Shared by a provider and its ``with_model`` copies, so one script is played once."""

    __slots__ = ("count", "log", "record", "shared", "tracks")

    def __init__(self, shared: _Track | None, tracks: dict[str | None, _Track], record: bool):
        self.shared = shared
        self.tracks = tracks
        self.record = record
        self.log: list[tuple[str | None, ModelRequest]] = []
        self.count = 0


class ScriptedProvider:
    """A provider whose replies come from a script; the offline backbone of the tests.

    ``usage`` is reported by every reply that does not carry its own (a turn whose usage
    has ``requests == 0``), so budgets can be tested. ``context_window`` is the window the
    runtime assumes for the scripted model (``None``: unknown, so it never compacts), so
    compaction can be tested. ``record=False`` turns the request log off for long
    benchmarks. Each request costs a few attribute reads: replies given
    as text are turned into :class:`AssistantTurn` values once, at construction.
    """

    __slots__ = ("_state", "context_window", "model", "name", "usage")

    def __init__(
        self,
        script: Script,
        *,
        usage: Usage = DEFAULT_SCRIPTED_USAGE,
        name: str = "scripted",
        model: str = "scripted",
        record: bool = True,
        context_window: int | None = None,
    ) -> None:
        self.name = name
        self.model = model
        self.usage = usage
        self.context_window = window_value("ScriptedProvider.context_window", context_window)
        if isinstance(script, Mapping):
            tracks = {key: self._track(key, value) for key, value in script.items()}
            self._state = _State(None, tracks, record)
        elif isinstance(script, Sequence) and not isinstance(script, str):
            self._state = _State(self._track(None, script), {}, record)
        else:
            raise TypeError(
                "script must be a sequence of entries or a mapping of agent name to entries "
                f"or a responder; got {type(script).__name__}"
            )

    def _track(self, key: str | None, value: Any) -> _Track:
        where = "script" if key is None else f"script[{key!r}]"
        if callable(value):
            return _Track(key, (), value)
        if isinstance(value, str) or not isinstance(value, Sequence):
            raise TypeError(
                f"{where} must be a sequence of entries or a responder callable, "
                f"got {type(value).__name__}"
            )
        entries = tuple(self._entry(f"{where}[{i}]", entry) for i, entry in enumerate(value))
        return _Track(key, entries, None)

    def _entry(self, where: str, entry: Any) -> Any:
        if isinstance(entry, str):
            return AssistantTurn((ContentText(entry),), self.usage, finish_reason="stop")
        if isinstance(entry, AssistantTurn):
            return self._with_usage(entry)
        if isinstance(entry, BaseException) or callable(entry):
            return entry
        raise TypeError(
            f"{where} must be an AssistantTurn, a str, a callable or an exception, "
            f"got {type(entry).__name__}"
        )

    def _with_usage(self, turn: AssistantTurn) -> AssistantTurn:
        if turn.usage.requests == 0:
            return msgspec.structs.replace(turn, usage=self.usage)
        return turn

    def __repr__(self) -> str:
        return f"ScriptedProvider(name={self.name!r}, model={self.model!r})"

    # -- Provider protocol ---------------------------------------------------------------

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        """The next scripted reply for the current agent.

        Args:
            request: The request; a callable script entry gets it.

        Returns:
            The scripted assistant turn.

        Raises:
            ScriptError: The script ran out, has no entry for the agent, or rejected the request.
        """
        state = self._state
        agent = current_agent_name()
        track = state.shared
        if track is None:
            track = state.tracks.get(agent)
            if track is None:
                raise ScriptError(
                    f"{self.name}: no script for agent {agent!r}; scripted agents: "
                    f"{', '.join(repr(k) for k in state.tracks) or 'none'}"
                )
        state.count += 1
        if state.record:
            state.log.append((agent, request))
        if track.responder is not None:
            return await self._call(track.responder, request, agent, track, None)
        position = track.position
        if position >= len(track.entries):
            raise ScriptError(
                f"{self.name}: script {self._track_label(track)} is exhausted: request "
                f"{position + 1} from agent {agent!r} but only {len(track.entries)} "
                f"replies were scripted; last input: {_preview(request)}"
            )
        track.position = position + 1
        entry = track.entries[position]
        if type(entry) is AssistantTurn:
            return entry
        if isinstance(entry, BaseException):
            raise entry
        return await self._call(entry, request, agent, track, position)

    async def stream(
        self, request: ModelRequest
    ) -> AsyncGenerator[StreamDelta | AssistantTurn, None]:
        """The scripted reply as one thinking delta, one text delta, then the turn.

        Args:
            request: The request.

        Returns:
            An async generator of deltas followed by the turn.

        Raises:
            ScriptError: As for :meth:`complete`.
        """
        turn = await self.complete(request)
        thinking = "".join(c.thinking for c in turn.contents if isinstance(c, ContentThinking))
        if thinking:
            yield StreamDelta(thinking=thinking)
        text = turn.text
        if text:
            yield StreamDelta(text=text)
        yield turn

    def with_model(self, model: str) -> ScriptedProvider:
        """The same script (and position, and log) under another model name.

        Args:
            model: The model name.

        Returns:
            A provider sharing this one's script.
        """
        new = ScriptedProvider.__new__(ScriptedProvider)
        new.name = self.name
        new.model = model
        new.usage = self.usage
        new.context_window = self.context_window
        new._state = self._state
        return new

    # -- inspection ----------------------------------------------------------------------

    @property
    def requests(self) -> int:
        """How many requests this script has received (all agents, all model names)."""
        return self._state.count

    @property
    def request_log(self) -> list[tuple[str | None, ModelRequest]]:
        """``(agent name, request)`` for every request received, in arrival order.

        Empty when the provider was built with ``record=False``.
        """
        return list(self._state.log)

    def requests_for(self, agent: str | None) -> list[ModelRequest]:
        """The requests made while ``agent`` was the current agent name.

        Args:
            agent: The agent name (``None`` for requests made outside any agent).

        Returns:
            The requests, oldest first.
        """
        return [request for name, request in self._state.log if name == agent]

    def remaining(self, agent: str | None = None) -> int:
        """Unplayed entries of a script.

        Args:
            agent: The agent whose script to count; ``None`` for the shared script.

        Returns:
            How many entries are left.
        """
        state = self._state
        track = state.shared if state.shared is not None else state.tracks.get(agent)
        if track is None:
            raise KeyError(f"no script for agent {agent!r}")
        return len(track.entries) - track.position

    def assert_complete(self) -> None:
        """Raise :class:`ScriptError` if any scripted entry was never played."""
        state = self._state
        tracks = [state.shared] if state.shared is not None else list(state.tracks.values())
        left = [
            f"{self._track_label(t)}: {len(t.entries) - t.position} of {len(t.entries)} "
            "replies unused"
            for t in tracks
            if t.position < len(t.entries)
        ]
        if left:
            raise ScriptError(f"{self.name}: script not complete: " + "; ".join(left))

    # -- internals -----------------------------------------------------------------------

    def _track_label(self, track: _Track) -> str:
        return "(shared)" if track is self._state.shared else f"for agent {track.key!r}"

    async def _call(
        self,
        entry: Responder,
        request: ModelRequest,
        agent: str | None,
        track: _Track,
        position: int | None,
    ) -> AssistantTurn:
        where = (
            f"{self.name}: responder for agent {agent!r}"
            if position is None
            else f"{self.name}: script {self._track_label(track)} entry {position + 1} "
            f"(agent {agent!r})"
        )
        try:
            result = entry(request)
            if inspect.isawaitable(result):
                result = await result
        except AssertionError as exc:  # ScriptError included
            raise ScriptError(f"{where} rejected the request: {exc}") from exc
        if isinstance(result, str):
            return AssistantTurn((ContentText(result),), self.usage, finish_reason="stop")
        if isinstance(result, AssistantTurn):
            return self._with_usage(result)
        raise ScriptError(
            f"{where} returned {type(result).__name__}; expected an AssistantTurn or a str"
        )


def _preview(request: ModelRequest) -> str:
    if not request.turns:
        return "(no turns)"
    last = request.turns[-1]
    text = last.text or ", ".join(type(c).__name__ for c in last.contents)
    return repr(text[:120])
