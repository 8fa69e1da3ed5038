"""OpenAI Chat Completions providers: ``openai``, ``openai_compatible`` and ``ollama``.

Turns are serialised as Chat Completions expects them (tool results become
``role: "tool"`` messages ahead of the user's text; tool-call arguments travel as JSON
strings), responses and SSE chunks are decoded into typed structs at the boundary, and
streamed tool calls are reassembled leniently: compatible servers omit, repeat or null
the ``index`` of tool-call deltas, or send a whole call in one chunk.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

import httpx
import msgspec

from ..errors import BadRequestError, ProviderError
from ._http import (
    HTTPProvider,
    ResponseLimits,
    RetryPolicy,
    merge_params,
    parse_arguments,
    tool_result_text,
)
from ._redact import Redactor
from ._sse import ServerSentEvent
from ._types import (
    AssistantTurn,
    Content,
    ContentText,
    ContentThinking,
    ContentToolRequest,
    ContentToolResult,
    ModelRequest,
    StreamDelta,
    ToolSpec,
    Usage,
)
from ._wire_usage import wire_usage

__all__ = ["OllamaProvider", "OpenAICompatibleProvider", "OpenAIProvider"]


# -- wire structs (unknown fields are ignored; every field is optional) ---------------------


class _Function(msgspec.Struct):
    name: str | None = None
    arguments: str | dict[str, Any] | None = None


class _ToolCall(msgspec.Struct):
    index: int | None = None
    id: str | None = None
    type: str | None = None
    function: _Function | None = None


class _Message(msgspec.Struct):
    content: str | list[Any] | None = None
    tool_calls: list[_ToolCall] | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    refusal: str | None = None


class _Choice(msgspec.Struct):
    index: int | None = 0
    message: _Message | None = None
    delta: _Message | None = None
    finish_reason: str | None = None


class _PromptDetails(msgspec.Struct):
    cached_tokens: int | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: _PromptDetails | None = None
    cost: float | None = None  # USD, reported by some gateways (OpenRouter)


class _Completion(msgspec.Struct):
    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    error: Any = None


_decode_completion = msgspec.json.Decoder(_Completion).decode


def _usage(provider: str, usage: _Usage | None) -> Usage:
    if usage is None:
        return Usage(requests=1)
    details = usage.prompt_tokens_details
    return wire_usage(
        provider,
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        cached_input_tokens=details.cached_tokens if details is not None else None,
        cost_usd=usage.cost,
    )


def _text_of(content: str | list[Any] | None) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    return "".join(
        text for p in content if isinstance(p, dict) and isinstance(text := p.get("text"), str)
    )


def _stream_error(provider: str, error: Any) -> ProviderError:
    message, kind = None, None
    if isinstance(error, dict):
        message, kind = error.get("message"), error.get("type") or error.get("code")
    elif isinstance(error, str):
        message = error
    text = f"{provider}: the server reported an error: {message if message else repr(error)}"
    if isinstance(kind, str):
        text += f" [{kind}]"
    return ProviderError(text, provider=provider, body=error)


def _strict_ok(schema: Any) -> bool:
    """Whether a JSON Schema already meets OpenAI's strict mode rules.

    Strict mode needs every object to list all its properties as required and to forbid
    additional ones; sending ``strict: true`` with any other schema is a 400, so strict is
    only claimed when it holds everywhere.
    """
    if isinstance(schema, list):
        return all(_strict_ok(s) for s in schema)
    if not isinstance(schema, dict):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        props = schema.get("properties", {})
        if schema.get("additionalProperties") is not False:
            return False
        if not isinstance(props, dict) or set(schema.get("required", ())) != set(props):
            return False
    children: list[Any] = []
    for key in ("properties", "$defs", "definitions"):
        value = schema.get(key)
        if isinstance(value, dict):
            children.extend(value.values())
    children.extend(schema[key] for key in ("items", "anyOf", "oneOf", "allOf") if key in schema)
    return all(_strict_ok(child) for child in children)


def _tool_json(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "strict": _strict_ok(spec.parameters),
            "parameters": spec.parameters,
        },
    }


_JSON_SPECIAL = re.compile(r'[\\"{}\[\]]')


class _CallSlot:
    """One streamed tool call: its id, name and argument fragments.

    Whether the arguments so far form a whole JSON object is tracked as fragments arrive
    (nesting depth outside strings), so asking costs nothing per fragment: re-parsing all
    the arguments on every fragment would let a server make a stream quadratic.
    """

    __slots__ = ("_complete", "_depth", "_escaped", "_in_string", "_opened", "args", "id", "name")

    def __init__(self, call_id: str | None) -> None:
        self.id = call_id
        self.name: str | None = None
        self.args: list[str] = []
        self._depth = 0
        self._opened = False  # an object or array was opened
        self._in_string = False
        self._escaped = False  # the previous fragment ended inside an escape
        self._complete: bool | None = None  # decided once the top-level value closed

    def add(self, fragment: str) -> None:
        self.args.append(fragment)
        if self._complete is not None:
            if fragment.strip():
                self._complete = False  # content after a whole value: never valid JSON
            return
        escaped_at = 0 if self._escaped else -1
        for match in _JSON_SPECIAL.finditer(fragment):
            at = match.start()
            char = fragment[at]
            if at == escaped_at:
                continue
            if self._in_string:
                if char == "\\":
                    escaped_at = at + 1
                elif char == '"':
                    self._in_string = False
            elif char == '"':
                self._in_string = True
            elif char in "{[":
                self._depth += 1
                self._opened = True
            elif char in "}]":
                self._depth -= 1
                if self._depth <= 0:
                    # The top-level value closed (or closed too often): parse it once.
                    self._complete = self._depth == 0 and _parses("".join(self.args))
                    if fragment[at + 1 :].strip():
                        self._complete = False
                    return
        self._escaped = escaped_at == len(fragment)

    def replace(self, text: str) -> None:
        """Arguments sent whole (as an object): they replace what came before."""
        self.args = [text]
        self._complete = _parses(text)

    def is_complete(self) -> bool:
        """Whether the call has a name and its arguments so far are a whole JSON value."""
        return bool(self.name and self.args and self._complete)


def _parses(text: str) -> bool:
    try:
        msgspec.json.decode(text)
    except msgspec.DecodeError:
        return False
    return True


def _starts_new_call(slot: _CallSlot, call: _ToolCall) -> bool:
    """Whether an id-less delta that maps onto ``slot`` is in fact the start of a new call.

    Some compatible servers send several whole calls at one index (or with none) and no
    ids; appending would glue their arguments into ``{...}{...}``. A function name is
    what announces a call, so a name arriving for a slot that already has one starts a
    new call when it names another function or when the slot's arguments are already a
    complete JSON value. A repeated name while the arguments are still incomplete (a
    server echoing the name on every fragment) keeps appending.
    """
    fn = call.function
    if fn is None or not fn.name or not slot.name:
        return False
    return fn.name != slot.name or slot.is_complete()


class _ChatStream:
    """Accumulates Chat Completions chunks into one turn."""

    def __init__(self, provider: str, require_done: bool, redactor: Redactor | None = None) -> None:
        self.done = False
        self._provider = provider
        self._redactor = redactor or Redactor(())
        self._require_done = require_done
        self._text: list[str] = []
        self._thinking: list[str] = []
        self._calls: list[_CallSlot] = []
        self._by_index: dict[int, _CallSlot] = {}
        self._by_id: dict[str, _CallSlot] = {}
        self._finish: str | None = None
        self._usage: _Usage | None = None

    def feed(self, event: ServerSentEvent) -> list[StreamDelta]:
        data = event.data
        if data == "[DONE]":
            self.done = True
            return []
        try:
            chunk = _decode_completion(data)
        except msgspec.DecodeError as exc:
            if event.event == "error":
                raise _stream_error(self._provider, data) from exc
            raise ProviderError(
                f"{self._provider}: malformed stream chunk ({exc}): {self._redactor.excerpt(data)}",
                provider=self._provider,
            ) from exc
        if chunk.error is not None or event.event == "error":
            raise _stream_error(self._provider, chunk.error)
        if chunk.usage is not None:
            self._usage = chunk.usage
        deltas: list[StreamDelta] = []
        for choice in chunk.choices or ():
            if choice.index:
                continue  # only the first choice is used (n > 1 is not supported)
            delta = choice.delta or choice.message
            if delta is not None:
                thinking = delta.reasoning_content or delta.reasoning
                if thinking:
                    self._thinking.append(thinking)
                    deltas.append(StreamDelta(thinking=thinking))
                text = _text_of(delta.content)
                if text:
                    self._text.append(text)
                    deltas.append(StreamDelta(text=text))
                for call in delta.tool_calls or ():
                    self._tool_delta(call)
            if choice.finish_reason:
                self._finish = choice.finish_reason
        return deltas

    def _slot(self, call: _ToolCall) -> _CallSlot:
        # Key by id when it is new or known, else by index, else continue the last call:
        # compatible servers omit, null or repeat indexes (Ollama reports 0 for every call).
        # Without an id, a delta naming a function for a slot that already holds a whole
        # call starts a new one (see _starts_new_call).
        if call.id:
            slot = self._by_id.get(call.id)
            if slot is None:
                slot = _CallSlot(call.id)
                self._by_id[call.id] = slot
                self._calls.append(slot)
                if call.index is not None:
                    self._by_index[call.index] = slot
            return slot
        if call.index is not None:
            slot = self._by_index.get(call.index)
            if slot is None or _starts_new_call(slot, call):
                slot = _CallSlot(None)
                self._by_index[call.index] = slot
                self._calls.append(slot)
            return slot
        if not self._calls or _starts_new_call(self._calls[-1], call):
            self._calls.append(_CallSlot(None))
        return self._calls[-1]

    def _tool_delta(self, call: _ToolCall) -> None:
        slot = self._slot(call)
        fn = call.function
        if fn is None:
            return
        if fn.name and not slot.name:
            slot.name = fn.name
        if isinstance(fn.arguments, dict):
            slot.replace(msgspec.json.encode(fn.arguments).decode())
        elif fn.arguments:
            slot.add(fn.arguments)

    def finish(self, duration: float) -> AssistantTurn:
        if not self.done and (self._require_done or self._finish is None):
            raise ProviderError(
                f"{self._provider}: the stream ended before it was complete "
                "(no [DONE] record); the reply was discarded",
                provider=self._provider,
            )
        contents: list[Content] = []
        if self._thinking:
            contents.append(ContentThinking("".join(self._thinking)))
        if self._text:
            contents.append(ContentText("".join(self._text)))
        for n, slot in enumerate(self._calls):
            call_id = slot.id or f"call_{n}"
            if not slot.name:
                raise ProviderError(
                    f"{self._provider}: streamed tool call {call_id} has no function name",
                    provider=self._provider,
                )
            args = parse_arguments(self._provider, slot.name, call_id, "".join(slot.args))
            contents.append(ContentToolRequest(call_id, slot.name, args))
        usage = _usage(self._provider, self._usage)
        return AssistantTurn(tuple(contents), usage, self._finish, duration)


class OpenAIProvider(HTTPProvider):
    """OpenAI Chat Completions (``POST {base_url}/chat/completions``).

    The key comes from ``api_key`` or ``OPENAI_API_KEY``, the endpoint from ``base_url`` or
    ``OPENAI_BASE_URL`` (``https://host/v1``, as the official SDK reads it, so an
    OpenAI-compatible gateway works wherever the provider is built), else the public API.
    ``params`` holds defaults such as
    ``temperature``, ``seed`` or ``max_tokens`` (sent as ``max_completion_tokens``);
    unknown keys are sent as they are (``reasoning_effort`` among them, ``max`` sent as
    ``xhigh``, OpenAI's name for its highest level). ``preserve_thinking`` echoes
    reasoning text back as ``reasoning_content`` (for compatible servers that want it).
    ``context_window`` (tokens) overrides the ``CONTEXT_WINDOWS`` table for this model
    (a compatible server's model is in no table).
    """

    name = "openai"
    _path = "/chat/completions"
    _api_key_env: ClassVar[str | None] = "OPENAI_API_KEY"
    _base_url_env: ClassVar[str | None] = "OPENAI_BASE_URL"
    _default_base_url: ClassVar[str | None] = "https://api.openai.com/v1"
    _renames: ClassVar[dict[str, str | None]] = {
        "max_tokens": "max_completion_tokens",
        "stop_sequences": "stop",
        "log_probs": "logprobs",
        "top_k": None,
        "reasoning_tokens": None,
    }
    _require_done = True

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: httpx.AsyncClient | None = None,
        timeout: float | httpx.Timeout | None = None,
        connect_timeout: float | None = None,
        max_retries: int | None = None,
        retry_budget: float | None = None,
        retry: RetryPolicy | None = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        preserve_thinking: bool = False,
        limits: ResponseLimits | Mapping[str, Any] | None = None,
        context_window: int | None = None,
    ) -> None:
        super().__init__(
            model,
            api_key=api_key,
            base_url=base_url,
            client=client,
            timeout=timeout,
            connect_timeout=connect_timeout,
            max_retries=max_retries,
            retry_budget=retry_budget,
            retry=retry,
            params=params,
            headers=headers,
            limits=limits,
            context_window=context_window,
        )
        self.preserve_thinking = bool(preserve_thinking)

    def _auth_headers(self, api_key: str | None) -> dict[str, str]:
        return {"authorization": f"Bearer {api_key}"} if api_key else {}

    def _build_body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        body = merge_params(self.params, request.params, self._renames)
        if body.get("reasoning_effort") == "max":
            body["reasoning_effort"] = "xhigh"  # OpenAI's highest level has this name
        body["model"] = self.model
        body["messages"] = self._messages(request)
        if request.tools:
            body["tools"] = [_tool_json(t) for t in request.tools]
        body["stream"] = stream
        if stream:
            body["stream_options"] = {"include_usage": True}
        return body

    def _messages(self, request: ModelRequest) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if request.system_prompt:
            out.append({"role": "system", "content": request.system_prompt})
        for n, turn in enumerate(request.turns):
            if turn.role == "system":
                out.append({"role": "system", "content": turn.text})
                continue
            parts: list[dict[str, Any]] = []
            calls: list[dict[str, Any]] = []
            thinking: list[str] = []
            for c in turn.contents:
                if isinstance(c, ContentText):
                    if c.text:  # servers reject (or later choke on) empty text parts
                        parts.append({"type": "text", "text": c.text})
                elif isinstance(c, ContentToolResult) and turn.role == "user":
                    out.append(
                        {
                            "role": "tool",
                            "content": tool_result_text(c.value, c.error),
                            "tool_call_id": c.request_id,
                        }
                    )
                elif isinstance(c, ContentToolRequest) and turn.role == "assistant":
                    args = msgspec.json.encode(c.arguments).decode()
                    calls.append(
                        {
                            "id": c.id,
                            "function": {"name": c.name, "arguments": args},
                            "type": "function",
                        }
                    )
                elif isinstance(c, ContentThinking):
                    thinking.append(c.thinking)
                else:
                    raise BadRequestError(
                        f"{self.name}: turns[{n}] ({turn.role}) cannot hold {type(c).__name__}",
                        provider=self.name,
                    )
            if turn.role == "user":
                if parts:
                    out.append({"role": "user", "content": parts})
                continue
            message: dict[str, Any] = {"role": "assistant"}
            if parts:
                message["content"] = parts
            if calls:
                message["tool_calls"] = calls
            if self.preserve_thinking and any(thinking):
                message["reasoning_content"] = "".join(thinking)
            if len(message) > 1:
                out.append(message)
        return out

    def _parse(self, raw: bytes, duration: float) -> AssistantTurn:
        try:
            completion = _decode_completion(raw)
        except msgspec.DecodeError as exc:
            raise ProviderError(
                f"{self.name}: malformed response ({exc}): {self._redactor.excerpt(raw)}",
                provider=self.name,
            ) from exc
        if completion.error is not None:
            raise _stream_error(self.name, completion.error)
        if not completion.choices or completion.choices[0].message is None:
            raise ProviderError(f"{self.name}: response has no choices", provider=self.name)
        choice = completion.choices[0]
        message = choice.message
        assert message is not None
        contents: list[Content] = []
        thinking = message.reasoning_content or message.reasoning
        if thinking:
            contents.append(ContentThinking(thinking))
        text = _text_of(message.content) or message.refusal
        if text:
            contents.append(ContentText(text))
        for n, call in enumerate(message.tool_calls or ()):
            fn = call.function or _Function()
            call_id = call.id or f"call_{n}"
            if not fn.name:
                raise ProviderError(
                    f"{self.name}: tool call {call_id} has no function name", provider=self.name
                )
            raw_args = fn.arguments
            if isinstance(raw_args, dict):
                args = raw_args
            else:
                args = parse_arguments(self.name, fn.name, call_id, raw_args)
            contents.append(ContentToolRequest(call_id, fn.name, args))
        return AssistantTurn(
            tuple(contents), _usage(self.name, completion.usage), choice.finish_reason, duration
        )

    def _accumulator(self) -> _ChatStream:
        return _ChatStream(self.name, self._require_done, self._redactor)


class OpenAICompatibleProvider(OpenAIProvider):
    """Chat Completions at any ``base_url`` (vLLM, llama.cpp, LM Studio, proxies...).

    The API key is optional (no environment variable is read); ``max_tokens`` is sent
    under that name. A stream that stops after its finish reason without ``[DONE]`` is
    accepted, as some servers do that.
    """

    name = "openai_compatible"
    _api_key_env: ClassVar[str | None] = None
    _base_url_env: ClassVar[str | None] = None
    _default_base_url: ClassVar[str | None] = None
    _renames: ClassVar[dict[str, str | None]] = {
        "stop_sequences": "stop",
        "log_probs": "logprobs",
        "reasoning_tokens": None,
    }
    _require_done = False


class OllamaProvider(OpenAICompatibleProvider):
    """Ollama through its OpenAI-compatible endpoint (default ``http://localhost:11434/v1``).

    Construction does no network I/O (no model listing or probing). A key is optional
    (``api_key`` or ``OLLAMA_API_KEY``, for proxies that want one).
    """

    name = "ollama"
    _api_key_env: ClassVar[str | None] = "OLLAMA_API_KEY"
    _default_base_url: ClassVar[str | None] = "http://localhost:11434/v1"

    def _requires_key(self) -> bool:
        return False
