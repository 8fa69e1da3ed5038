"""Anthropic Messages provider (``POST {base_url}/messages``).

Tool requests travel as ``tool_use`` blocks and results as ``tool_result`` blocks at the
front of the next user message; ``thinking`` and ``redacted_thinking`` blocks are kept with
their signatures so they can be replayed, as Anthropic requires when thinking precedes tool
use. The system prompt and the last block of the final user message are marked cacheable
(``cache="5m"`` by default), so a growing conversation re-reads its cached prefix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

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
    Usage,
)
from ._wire_usage import wire_usage

__all__ = ["AnthropicProvider"]

_API_VERSION = "2023-06-01"


class _Block(msgspec.Struct):
    type: str
    text: str | None = None
    thinking: str | None = None
    signature: str | None = None
    data: str | None = None
    id: str | None = None
    name: str | None = None
    input: Any = None


class _Usage(msgspec.Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None


class _Message(msgspec.Struct):
    type: str | None = None
    content: list[_Block] = msgspec.field(default_factory=list)
    stop_reason: str | None = None
    usage: _Usage | None = None
    error: Any = None


class _Delta(msgspec.Struct):
    type: str | None = None
    text: str | None = None
    thinking: str | None = None
    signature: str | None = None
    partial_json: str | None = None
    stop_reason: str | None = None


class _Event(msgspec.Struct):
    type: str
    index: int | None = None
    message: _Message | None = None
    content_block: _Block | None = None
    delta: _Delta | None = None
    usage: _Usage | None = None
    error: Any = None


_decode_message = msgspec.json.Decoder(_Message).decode
_decode_event = msgspec.json.Decoder(_Event).decode


def _usage(provider: str, usage: _Usage | None) -> Usage:
    """Input counts every prompt token (uncached + cache writes + cache reads)."""
    if usage is None:
        return Usage(requests=1)
    cached = usage.cache_read_input_tokens
    return wire_usage(
        provider,
        input_tokens=usage.input_tokens,
        extra_input_tokens={
            "cache_creation_input_tokens": usage.cache_creation_input_tokens,
            "cache_read_input_tokens": cached,
        },
        output_tokens=usage.output_tokens,
        cached_input_tokens=cached,
    )


def _error(provider: str, error: Any) -> ProviderError:
    message = kind = None
    if isinstance(error, dict):
        message, kind = error.get("message"), error.get("type")
    text = f"{provider}: the server reported an error: {message if message else repr(error)}"
    if isinstance(kind, str):
        text += f" [{kind}]"
    return ProviderError(text, provider=provider, body=error)


def _content(provider: str, block: _Block, json_args: str | None = None) -> Content | None:
    """One response block as content; server-tool and unknown blocks are skipped."""
    kind = block.type
    if kind == "text":
        return ContentText(block.text) if block.text else None
    if kind == "thinking":
        return ContentThinking(block.thinking or "", signature=block.signature)
    if kind == "redacted_thinking":
        return ContentThinking("", redacted=block.data)
    if kind == "tool_use":
        call_id, name = block.id or "", block.name or ""
        if not call_id or not name:
            raise ProviderError(f"{provider}: tool_use block without id or name", provider=provider)
        if json_args is not None and json_args.strip():
            args = parse_arguments(provider, name, call_id, json_args)
        elif isinstance(block.input, dict):
            args = block.input
        else:
            args = parse_arguments(provider, name, call_id, None)
        return ContentToolRequest(call_id, name, args)
    return None


class _BlockState:
    __slots__ = ("block", "json", "signature", "text", "thinking")

    def __init__(self, block: _Block) -> None:
        self.block = block
        self.text: list[str] = [block.text] if block.text else []
        self.thinking: list[str] = [block.thinking] if block.thinking else []
        self.signature = block.signature
        self.json: list[str] = []


class _MessageStream:
    """Accumulates Messages stream events into one turn."""

    def __init__(self, provider: str, redactor: Redactor | None = None) -> None:
        self.done = False
        self._provider = provider
        self._redactor = redactor or Redactor(())
        self._blocks: dict[int, _BlockState] = {}
        self._usage = _Usage()
        self._stop: str | None = None
        self._started = False

    def _merge_usage(self, usage: _Usage | None) -> None:
        if usage is None:
            return
        for field in _Usage.__struct_fields__:
            value = getattr(usage, field)
            if value is not None:
                setattr(self._usage, field, value)

    def feed(self, event: ServerSentEvent) -> list[StreamDelta]:
        try:
            ev = _decode_event(event.data)
        except msgspec.DecodeError as exc:
            raise ProviderError(
                f"{self._provider}: malformed stream event {event.event!r} ({exc}): "
                f"{self._redactor.excerpt(event.data)}",
                provider=self._provider,
            ) from exc
        kind = ev.type
        if kind == "content_block_delta" and ev.delta is not None and ev.index is not None:
            return self._delta(ev.index, ev.delta)
        if kind == "content_block_start" and ev.content_block is not None:
            self._blocks[ev.index or 0] = _BlockState(ev.content_block)
        elif kind == "message_start" and ev.message is not None:
            self._started = True
            self._merge_usage(ev.message.usage)
        elif kind == "message_delta":
            if ev.delta is not None and ev.delta.stop_reason:
                self._stop = ev.delta.stop_reason
            self._merge_usage(ev.usage)
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            raise _error(self._provider, ev.error)
        return []

    def _delta(self, index: int, delta: _Delta) -> list[StreamDelta]:
        state = self._blocks.get(index)
        if state is None:
            raise ProviderError(
                f"{self._provider}: stream delta for block {index} before its start",
                provider=self._provider,
            )
        if delta.type == "text_delta" and delta.text:
            state.text.append(delta.text)
            return [StreamDelta(text=delta.text)]
        if delta.type == "thinking_delta" and delta.thinking:
            state.thinking.append(delta.thinking)
            return [StreamDelta(thinking=delta.thinking)]
        if delta.type == "input_json_delta" and delta.partial_json:
            state.json.append(delta.partial_json)
        elif delta.type == "signature_delta" and delta.signature:
            state.signature = (state.signature or "") + delta.signature
        return []

    def finish(self, duration: float) -> AssistantTurn:
        if not self.done or not self._started:
            raise ProviderError(
                f"{self._provider}: the stream ended before it was complete (no "
                "message_stop event); the reply was discarded",
                provider=self._provider,
            )
        contents: list[Content] = []
        for index in sorted(self._blocks):
            state = self._blocks[index]
            block = msgspec.structs.replace(
                state.block,
                text="".join(state.text),
                thinking="".join(state.thinking),
                signature=state.signature,
            )
            item = _content(self._provider, block, "".join(state.json))
            if item is not None:
                contents.append(item)
        usage = _usage(self._provider, self._usage)
        return AssistantTurn(tuple(contents), usage, self._stop, duration)


class AnthropicProvider(HTTPProvider):
    """Anthropic Messages API.

    The key comes from ``api_key`` or ``ANTHROPIC_API_KEY``. ``max_tokens`` (required by
    the API) defaults to 4096; ``params`` may set it and ``temperature``, ``top_p``,
    ``top_k``, ``stop_sequences``, ``reasoning_tokens`` (sent as a thinking budget) or
    ``reasoning_effort`` (sent as ``output_config.effort``: ``low`` to ``max``); other keys
    are sent as they are. ``cache`` is the prompt-cache TTL (``"none"`` to
    disable), ``beta_headers`` fills ``anthropic-beta``. ``context_window`` (tokens)
    overrides the ``CONTEXT_WINDOWS`` table for this model (a 1M-token beta window).
    """

    name = "anthropic"
    _path = "/messages"
    _api_key_env: ClassVar[str | None] = "ANTHROPIC_API_KEY"
    _default_base_url: ClassVar[str | None] = "https://api.anthropic.com/v1"
    _renames: ClassVar[dict[str, str | None]] = {
        "seed": None,
        "frequency_penalty": None,
        "presence_penalty": None,
        "log_probs": None,
    }

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
        max_tokens: int = 4096,
        cache: Literal["5m", "1h", "none"] = "5m",
        beta_headers: tuple[str, ...] | list[str] = (),
        limits: ResponseLimits | Mapping[str, Any] | None = None,
        context_window: int | None = None,
    ) -> None:
        if cache not in ("5m", "1h", "none"):
            raise ValueError(
                f"AnthropicProvider: cache must be '5m', '1h' or 'none', not {cache!r}"
            )
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(
                f"AnthropicProvider: max_tokens must be an int >= 1, not {max_tokens!r}"
            )
        extra = dict(headers or {})
        if beta_headers:
            extra["anthropic-beta"] = ",".join(beta_headers)
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
            headers=extra,
            limits=limits,
            context_window=context_window,
        )
        self.max_tokens = max_tokens
        self.cache = cache

    def _auth_headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": _API_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    def _cache_control(self) -> dict[str, str] | None:
        return None if self.cache == "none" else {"type": "ephemeral", "ttl": self.cache}

    def _build_body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"max_tokens": self.max_tokens}
        body.update(merge_params(self.params, request.params, self._renames))
        effort = body.pop("reasoning_effort", None)
        if effort is not None:
            config = body.get("output_config")
            config = dict(config) if isinstance(config, dict) else {}
            config.setdefault("effort", effort)  # an explicit output_config wins
            body["output_config"] = config
        budget = body.pop("reasoning_tokens", None)
        if budget is not None and "thinking" not in body:
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        body["model"] = self.model
        system = [request.system_prompt] if request.system_prompt else []
        system += [t.text for t in request.turns if t.role == "system" and t.text]
        if system:
            block: dict[str, Any] = {"type": "text", "text": "\n\n".join(system)}
            cache = self._cache_control()
            if cache is not None:
                block["cache_control"] = cache
            body["system"] = [block]
        body["messages"] = self._messages(request)
        if request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
        body["stream"] = stream
        return body

    def _messages(self, request: ModelRequest) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for n, turn in enumerate(request.turns):
            if turn.role == "system":
                continue
            results: list[dict[str, Any]] = []
            blocks: list[dict[str, Any]] = []
            for c in turn.contents:
                block = self._block(n, turn.role, c)
                if block is None:
                    continue
                (results if block["type"] == "tool_result" else blocks).append(block)
            blocks = results + blocks  # tool results must lead the user message
            if not blocks:
                continue  # the API rejects empty messages
            if out and out[-1]["role"] == turn.role:
                out[-1]["content"].extend(blocks)  # roles must alternate
            else:
                out.append({"role": turn.role, "content": blocks})
        cache = self._cache_control()
        if cache is not None and out and out[-1]["role"] == "user":
            last = out[-1]["content"]
            last[-1] = {**last[-1], "cache_control": cache}
        return out

    def _block(self, n: int, role: str, c: Content) -> dict[str, Any] | None:
        if isinstance(c, ContentText):
            if not c.text:
                return None
            # The API rejects whitespace-only text blocks, so they are sent as a placeholder.
            return {"type": "text", "text": c.text if c.text.strip() else "[empty string]"}
        if isinstance(c, ContentToolResult) and role == "user":
            return {
                "type": "tool_result",
                "tool_use_id": c.request_id,
                "content": tool_result_text(c.value, c.error),
                "is_error": c.error is not None,
            }
        if isinstance(c, ContentToolRequest) and role == "assistant":
            return {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
        if isinstance(c, ContentThinking) and role == "assistant":
            if c.redacted is not None:
                return {"type": "redacted_thinking", "data": c.redacted}
            if c.signature is None:
                return None  # unsigned thinking (another provider's) cannot be replayed
            return {"type": "thinking", "thinking": c.thinking, "signature": c.signature}
        raise BadRequestError(
            f"{self.name}: turns[{n}] ({role}) cannot hold {type(c).__name__}",
            provider=self.name,
        )

    def _parse(self, raw: bytes, duration: float) -> AssistantTurn:
        try:
            message = _decode_message(raw)
        except msgspec.DecodeError as exc:
            raise ProviderError(
                f"{self.name}: malformed response ({exc}): {self._redactor.excerpt(raw)}",
                provider=self.name,
            ) from exc
        if message.type == "error" or message.error is not None:
            raise _error(self.name, message.error)
        contents = [c for b in message.content if (c := _content(self.name, b)) is not None]
        usage = _usage(self.name, message.usage)
        return AssistantTurn(tuple(contents), usage, message.stop_reason, duration)

    def _accumulator(self) -> _MessageStream:
        return _MessageStream(self.name, self._redactor)
