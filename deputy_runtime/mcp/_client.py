"""What an MCP server may ask of the client: sampling, elicitation, roots.

The session answers a server's requests through the run whose tool call is in flight on
it (:class:`McpCaller`, the runtime's ``CallerRun``), captured when the call started: the
SDK hands a server's request to a task of the session's own, where no run is current.

Rules:

* ``sampling/createMessage`` and ``elicitation/create`` are answered only while tool
  calls of exactly one run are in flight on the session. With none (a request outside a
  call, or a call made outside an agent run: a durable run's worker) or with calls of
  several runs (a shared server used by concurrent delegations: the protocol does not
  say which call a request is for), the server gets an MCP error saying so; no model is
  asked and nobody is charged.
* Sampling: the run's own model answers (see ``CallerRun.sample``: limits, usage,
  hooks, events). The messages' text is sent; images and audio are described in one
  line each, never sent; the server's ``modelPreferences`` and ``includeContext`` are
  ignored (the delegation's model answers, with no other context); ``maxTokens``,
  ``temperature`` and ``stopSequences`` are request parameters. A request offering
  tools is refused (the client does not advertise tool use in sampling).
* Elicitation (form): one ``ask_user`` question per property of the requested schema
  (its title or description, and its ``enum`` as options), the message leading each;
  a schema without properties is one question with the options ``accept`` and
  ``decline``. Answers are converted to the property's type; a required property left
  unanswered (missing or empty) declines the request; an answer that cannot be
  converted is an MCP error naming the property. URL mode asks to open the URL (options
  ``done`` and ``decline``).
* Roots: the working directory of each run with calls in flight, then the host's
  ``McpServer(roots=...)``; outside calls, the host's roots only (a resource adds the
  delegation's working directory there, see ``_resource``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import mcp.types as mcp_types

from ..chat import AssistantTurn, ContentText, Turn
from ._bound import binary_line, cut_chars, decoded_size

__all__ = [
    "ElicitAnswerError",
    "McpCaller",
    "elicit_questions",
    "elicit_result",
    "roots_result",
    "sampling_request",
    "sampling_result",
]

#: The most characters of one elicitation message or sampled text shown in hook inputs.
_HOOK_TEXT_CHARS = 2000
_TRUE = frozenset({"true", "yes", "y", "1", "on"})
_FALSE = frozenset({"false", "no", "n", "0", "off"})
_FINISH = {
    "stop": "endTurn",
    "end_turn": "endTurn",
    "length": "maxTokens",
    "max_tokens": "maxTokens",
}


class McpCaller(Protocol):
    """The run a tool call was made by (the runtime's ``CallerRun``)."""

    @property
    def run_id(self) -> str:
        """Tells runs apart: every call of one run has the same."""

    @property
    def working_dir(self) -> Path:
        """The run's working directory: its root."""

    @property
    def model(self) -> str:
        """The model that answers the run's requests."""

    async def sample(
        self,
        *,
        source: str,
        system_prompt: str | None,
        turns: Sequence[Turn],
        params: Mapping[str, Any],
        hook_input: Mapping[str, Any],
    ) -> AssistantTurn:
        """One model request of the run, under its limits and hooks.

        Args:
            source: Who asks: ``mcp__<server>``.
            system_prompt: The server's system prompt, if any.
            turns: The server's messages as turns, ending with a user turn.
            params: ``max_tokens`` and the server's other request parameters.
            hook_input: What the PreToolUse hooks see as ``tool_input``.

        Returns:
            The model's reply.

        Raises:
            SamplingError: The request was refused or failed.
        """

    async def ask_human(self, questions: list[dict[str, Any]]) -> Mapping[str, Any]:
        """Ask the person behind the run, as ``ask_user`` does.

        Args:
            questions: ``{"question": str, "options": list[str] | None}`` dicts.

        Returns:
            Question text -> answer.

        Raises:
            HumanInputUnavailable: The run has nobody to ask.
        """


class ElicitAnswerError(ValueError):
    """An answer cannot be converted to its property's type; the message names it."""


def _block_text(block: Any) -> str:
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
        kind = "image" if isinstance(block, mcp_types.ImageContent) else "audio"
        return binary_line(kind, block.mime_type, decoded_size(block.data))
    return f"[{getattr(block, 'type', 'content')} content, not shown]"


def sampling_request(
    params: mcp_types.CreateMessageRequestParams,
) -> tuple[str | None, tuple[Turn, ...], dict[str, Any], dict[str, Any]] | str:
    """``(system prompt, turns, request params, hook input)``, or why it is refused."""
    if params.tools:
        return "sampling with tools is not supported by this client"
    turns: list[Turn] = []
    for message in params.messages:
        blocks = message.content if isinstance(message.content, list) else [message.content]
        text = "\n".join(_block_text(b) for b in blocks)
        if turns and turns[-1].role == message.role:
            # Providers reject two turns of one role in a row: join them.
            last = turns.pop()
            text = f"{last.text}\n\n{text}"
        turns.append(Turn(message.role, (ContentText(text),)))
    if not turns or turns[-1].role != "user":
        return "sampling needs messages ending with a user message"
    request: dict[str, Any] = {"max_tokens": params.max_tokens}
    if params.temperature is not None:
        request["temperature"] = params.temperature
    if params.stop_sequences:
        request["stop_sequences"] = list(params.stop_sequences)
    hook = {
        "system_prompt": params.system_prompt,
        "messages": [{"role": t.role, "text": cut_chars(t.text, _HOOK_TEXT_CHARS)} for t in turns],
        "max_tokens": params.max_tokens,
    }
    return params.system_prompt, tuple(turns), request, hook


def sampling_result(reply: AssistantTurn, model: str) -> mcp_types.CreateMessageResult:
    """The model's reply as the server receives it."""
    reason = reply.finish_reason
    return mcp_types.CreateMessageResult(
        role="assistant",
        content=mcp_types.TextContent(type="text", text=reply.text),
        model=model,
        stop_reason=_FINISH.get(reason, reason) if reason is not None else "endTurn",
    )


def _label(message: str, name: str, prop: Mapping[str, Any]) -> str:
    about = prop.get("title") or prop.get("description")
    field = f"{name} ({about})" if isinstance(about, str) and about else name
    return f"{message}\n{field}"


def _options(prop: Mapping[str, Any]) -> list[str] | None:
    enum = prop.get("enum")
    if isinstance(enum, list) and enum:
        return [str(v) for v in enum]
    items = prop.get("items")
    if isinstance(items, Mapping):
        return _options(items)
    if prop.get("type") == "boolean":
        return ["true", "false"]
    return None


def elicit_questions(params: mcp_types.ElicitRequestParams) -> list[dict[str, Any]]:
    """The ``ask_user`` questions that ask what the server wants to know."""
    if isinstance(params, mcp_types.ElicitRequestURLParams):
        text = f"{params.message}\nOpen: {params.url}"
        return [{"question": text, "options": ["done", "decline"]}]
    props = _properties(params.requested_schema)
    if not props:
        return [{"question": params.message, "options": ["accept", "decline"]}]
    return [
        {"question": _label(params.message, name, prop), "options": _options(prop)}
        for name, prop in props.items()
    ]


def _properties(schema: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return {}
    return {str(k): v for k, v in props.items() if isinstance(v, Mapping)}


def _convert(name: str, prop: Mapping[str, Any], answer: Any) -> Any:
    kind = prop.get("type")
    if kind == "array":
        parts = answer if isinstance(answer, list) else [p.strip() for p in str(answer).split(",")]
        items = prop.get("items")
        each = items if isinstance(items, Mapping) else {}
        return [_convert(name, each, str(p)) for p in parts if str(p)]
    text = ", ".join(answer) if isinstance(answer, list) else str(answer)
    if kind == "boolean":
        lowered = text.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise ElicitAnswerError(f"the answer to {name!r} is not a yes/no: {cut_chars(text, 80)!r}")
    if kind in ("integer", "number"):
        try:
            return int(text) if kind == "integer" else float(text)
        except ValueError:
            raise ElicitAnswerError(
                f"the answer to {name!r} is not {'an integer' if kind == 'integer' else 'a number'}"
                f": {cut_chars(text, 80)!r}"
            ) from None
    enum = prop.get("enum")
    if isinstance(enum, list) and enum and text not in [str(v) for v in enum]:
        raise ElicitAnswerError(
            f"the answer to {name!r} is not one of {', '.join(map(str, enum))}: "
            f"{cut_chars(text, 80)!r}"
        )
    return text


def elicit_result(
    params: mcp_types.ElicitRequestParams, answers: Mapping[str, Any]
) -> mcp_types.ElicitResult:
    """The person's answers as the server receives them (see the module rules).

    Raises:
        ElicitAnswerError: An answer cannot be converted to its property's type.
    """
    questions = elicit_questions(params)
    props = (
        {}
        if isinstance(params, mcp_types.ElicitRequestURLParams)
        else _properties(params.requested_schema)
    )
    if not props:
        # A confirmation (or a URL to open): the one question's answer decides.
        confirmed = str(answers.get(questions[0]["question"], "")).strip().lower()
        if confirmed in ("", "decline"):
            return mcp_types.ElicitResult(action="decline")
        return mcp_types.ElicitResult(action="accept", content={})
    assert isinstance(params, mcp_types.ElicitRequestFormParams)
    required = params.requested_schema.get("required")
    needed = set(required) if isinstance(required, list) else set()
    content: dict[str, Any] = {}
    for question, (name, prop) in zip(questions, props.items(), strict=True):
        answer: Any = answers.get(question["question"])
        if answer is None or answer == "" or answer == []:
            if name in needed:
                return mcp_types.ElicitResult(action="decline")
            continue
        content[name] = _convert(name, prop, answer)
    return mcp_types.ElicitResult(action="accept", content=content)


def roots_result(dirs: Sequence[Path]) -> mcp_types.ListRootsResult:
    """The roots, in order, each once."""
    seen: dict[Path, None] = dict.fromkeys(dirs)
    return mcp_types.ListRootsResult(
        roots=[mcp_types.Root(uri=d.as_uri(), name=d.name or str(d)) for d in seen]  # type: ignore[arg-type]
    )
