"""HTTP plumbing shared by the HTTP providers: client ownership, retries, error mapping.

One :class:`HttpSession` per provider instance owns (or borrows, when injected) one
``httpx.AsyncClient``; ``with_model`` copies share it. Requests are retried with exponential
backoff and jitter on 408, 409, 429, 5xx and connection errors, honouring ``retry-after``,
within a retry budget. Streams are retried only until their headers arrive: once events may
have been seen, an error is raised instead. Failures become typed errors that carry the
HTTP status and the provider's own error message.
"""

from __future__ import annotations

import copy
import dataclasses
import email.utils
import functools
import os
import random
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, Self

import anyio
import anyio.lowlevel
import httpx
import msgspec

from ..errors import (
    AuthenticationError,
    BadRequestError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
)
from ._sse import ServerSentEvent, SSEDecoder
from ._types import AssistantTurn, ModelRequest, StreamDelta

__all__ = [
    "HTTPProvider",
    "HttpSession",
    "RetryPolicy",
    "StreamAccumulator",
    "error_from_response",
    "merge_params",
    "parse_arguments",
    "tool_result_text",
]

_RETRY_STATUSES = frozenset({408, 409, 429})
_DEFAULT_TIMEOUT = 600.0  # seconds per read/write/pool wait; long generations are slow
_DEFAULT_CONNECT_TIMEOUT = 5.0


@dataclass(frozen=True)
class RetryPolicy:
    """When and how long to wait before retrying a failed request.

    ``max_retries`` extra attempts are made at most; the waits between attempts are
    ``min(initial_delay * 2**n, max_delay)`` reduced by up to 25% of jitter, or what the
    server's ``retry-after``/``retry-after-ms`` header asks for. ``budget`` caps the total
    seconds spent waiting for one request: a retry whose wait would exceed it is not made,
    and the last error is raised. ``sleep`` is injectable so tests need not wait.
    """

    max_retries: int = 2
    initial_delay: float = 0.5
    max_delay: float = 8.0
    budget: float = 60.0
    sleep: Callable[[float], Awaitable[None]] = field(default=anyio.sleep, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int):
            raise ValueError(f"max_retries must be an int >= 0, got {self.max_retries!r}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be an int >= 0, got {self.max_retries!r}")
        for name in ("initial_delay", "max_delay", "budget"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"{name} must be a number >= 0 seconds, got {value!r}")

    def backoff(self, retry_number: int) -> float:
        """The jittered exponential wait before a retry.

        Args:
            retry_number: Which retry, 0-based.

        Returns:
            Seconds to wait.
        """
        base = min(self.initial_delay * (2.0**retry_number), self.max_delay)
        return base * (1.0 - 0.25 * random.random())


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms``, then ``retry-after``)."""
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return max(float(value) / 1000.0, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:  # the HTTP-date form
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None  # unparseable: fall back to our own backoff
    return max(parsed.timestamp() - time.time(), 0.0)


def _error_details(body: bytes) -> tuple[str | None, str | None, object]:
    """(message, type) from the error body shapes real servers use, plus the parsed body."""
    try:
        parsed: object = msgspec.json.decode(body)
    except msgspec.DecodeError:
        text = body.decode("utf-8", errors="replace").strip()
        return (text[:500] or None), None, text
    message = kind = None
    if isinstance(parsed, dict):
        err = parsed.get("error", parsed)
        if isinstance(err, str):
            message = err
        elif isinstance(err, dict):
            raw_msg = err.get("message", err.get("detail"))
            message = raw_msg if isinstance(raw_msg, str) else None
            raw_kind = err.get("type") or err.get("code")
            kind = raw_kind if isinstance(raw_kind, str) else None
            if message is None and raw_msg is not None:
                message = msgspec.json.encode(raw_msg).decode()
    return message, kind, parsed


def error_from_response(provider: str, status: int, body: bytes) -> ProviderError:
    """Map an HTTP error status and body to the typed error, with the server's message."""
    message, kind, parsed = _error_details(body)
    text = f"{provider} API error (HTTP {status}): {message or 'no error message'}"
    if kind:
        text += f" [{kind}]"
    cls: type[ProviderError]
    if status == 429:
        cls = RateLimitError
    elif status in (401, 403):
        cls = AuthenticationError
    elif status in (400, 404, 413, 422):
        cls = BadRequestError
    elif status in (408, 504):
        cls = ProviderTimeoutError
    else:
        cls = ProviderError
    return cls(text, provider=provider, status=status, body=parsed)


def _should_retry(response: httpx.Response, error: ProviderError) -> bool:
    forced = response.headers.get("x-should-retry")
    if forced == "true":
        return True
    if forced == "false":
        return False
    status = response.status_code
    if status == 429 and "insufficient_quota" in str(error):
        return False  # an empty quota does not refill by waiting
    return status in _RETRY_STATUSES or status >= 500


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    # Building a verifying SSL context (loading the CA bundle) costs tens of milliseconds;
    # every client the providers create shares one.
    return httpx.create_ssl_context()


class HttpSession:
    """The HTTP client, headers, timeouts and retry policy one provider (family) uses.

    The client is created lazily on first use (so constructing a provider does no I/O)
    and re-created if the previous one belongs to an event loop that has since ended,
    as happens when a sync wrapper runs each call in a fresh loop. An injected client is
    used as is and never closed here.
    """

    def __init__(
        self,
        *,
        provider: str,
        base_url: str,
        headers: Mapping[str, str],
        timeout: float | httpx.Timeout | None,
        connect_timeout: float | None,
        retry: RetryPolicy,
        client: httpx.AsyncClient | None,
    ) -> None:
        self.provider = provider
        self.base_url = base_url.rstrip("/")
        self._headers = dict(headers)  # holds the API key: never logged, never in repr
        # Explicit timeouts apply to every request, even on an injected client; without
        # them an injected client keeps its own and an owned one gets the defaults.
        self._explicit_timeout = timeout is not None or connect_timeout is not None
        if isinstance(timeout, httpx.Timeout):
            self.timeout = timeout
        else:
            self.timeout = httpx.Timeout(
                _DEFAULT_TIMEOUT if timeout is None else timeout,
                connect=_DEFAULT_CONNECT_TIMEOUT if connect_timeout is None else connect_timeout,
            )
        self.retry = retry
        self._client = client
        self._owned = client is None
        self._token: object = None

    def __repr__(self) -> str:
        return f"HttpSession(provider={self.provider!r}, base_url={self.base_url!r})"

    def client(self) -> httpx.AsyncClient:
        """The client to use now (created on first use when not injected)."""
        if not self._owned:
            assert self._client is not None
            return self._client
        token = anyio.lowlevel.current_token()
        if self._client is None or self._token is not token or self._client.is_closed:
            # A client from an ended event loop holds dead connections: start afresh.
            self._client = httpx.AsyncClient(timeout=self.timeout, verify=_ssl_context())
            self._token = token
        return self._client

    async def aclose(self) -> None:
        """Close the client if this session created it."""
        if self._owned and self._client is not None:
            client, self._client = self._client, None
            if self._token is anyio.lowlevel.current_token():
                await client.aclose()
            # else: its connections belong to an event loop that has ended and cannot be
            # closed from this one; they went away with that loop.

    def _request(self, client: httpx.AsyncClient, path: str, body: bytes) -> httpx.Request:
        url = self.base_url + path
        if self._explicit_timeout:
            return client.build_request(
                "POST", url, content=body, headers=self._headers, timeout=self.timeout
            )
        return client.build_request("POST", url, content=body, headers=self._headers)

    async def post(self, path: str, body: bytes) -> bytes:
        """POST ``body``; return the 2xx response body, retrying as the policy allows."""
        return await self._attempts(path, body, stream=False)  # type: ignore[no-any-return]

    async def open_stream(self, path: str, body: bytes) -> httpx.Response:
        """POST ``body`` and return the 2xx streaming response with its body unread.

        The caller must ``aclose()`` the response (in a ``finally``).
        """
        return await self._attempts(path, body, stream=True)  # type: ignore[no-any-return]

    async def _attempts(self, path: str, body: bytes, *, stream: bool) -> Any:
        policy = self.retry
        waited = 0.0
        retry_number = 0
        while True:
            retry_after: float | None = None
            try:
                result = await self._attempt(path, body, stream=stream)
            except _Retryable as exc:
                error, retry_after = exc.error, exc.retry_after
            else:
                return result
            delay = policy.backoff(retry_number) if retry_after is None else retry_after
            attempts = retry_number + 1
            if retry_number >= policy.max_retries:
                raise _with_note(error, f"gave up after {attempts} attempt(s)")
            if waited + delay > policy.budget:
                raise _with_note(
                    error,
                    f"gave up after {attempts} attempt(s): waiting {delay:.3g}s more "
                    f"would exceed the retry budget of {policy.budget:g}s",
                )
            await policy.sleep(delay)
            waited += delay
            retry_number += 1

    async def _attempt(self, path: str, body: bytes, *, stream: bool) -> Any:
        client = self.client()
        request = self._request(client, path, body)
        try:
            # Without stream=True httpx reads the whole body (and closes the response,
            # shielded by httpcore, even when cancelled) before returning.
            response = await client.send(request, stream=stream)
            if response.is_success:
                return response if stream else response.content
            if stream:
                try:
                    await response.aread()
                finally:
                    with anyio.CancelScope(shield=True):
                        await response.aclose()
        except httpx.TimeoutException as exc:
            raise _Retryable(self._timeout_error(exc)) from exc
        except httpx.TransportError as exc:
            raise _Retryable(self._connection_error(exc)) from exc
        error = error_from_response(self.provider, response.status_code, response.content)
        if _should_retry(response, error):
            raise _Retryable(error, _retry_after(response.headers))
        raise error

    def _timeout_error(self, exc: httpx.TimeoutException) -> ProviderError:
        error = ProviderTimeoutError(
            f"{self.provider}: request timed out ({type(exc).__name__}: {exc or 'no detail'})",
            provider=self.provider,
        )
        error.__cause__ = exc
        return error

    def _connection_error(self, exc: httpx.TransportError) -> ProviderError:
        error = ProviderError(
            f"{self.provider}: connection failed ({type(exc).__name__}: {exc or 'no detail'})",
            provider=self.provider,
        )
        error.__cause__ = exc
        return error


class _Retryable(Exception):
    def __init__(self, error: ProviderError, retry_after: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


def _with_note(error: ProviderError, note: str) -> ProviderError:
    """The same error, its message extended with why retrying stopped."""
    final = type(error)(
        f"{error} ({note})", provider=error.provider, status=error.status, body=error.body
    )
    final.__cause__ = error.__cause__
    return final


class StreamAccumulator(Protocol):
    """Turns one provider's SSE records into deltas and, at the end, the whole turn."""

    done: bool

    def feed(self, event: ServerSentEvent) -> list[StreamDelta]:
        """Consume one record; return the text/thinking deltas it carries."""
        ...

    def finish(self, duration: float) -> AssistantTurn:
        """The assembled turn; raises ProviderError when the stream was incomplete."""
        ...


class HTTPProvider:
    """Base of the HTTP providers: construction, ``complete`` and ``stream`` over a session.

    Subclasses set ``name`` and the endpoint, and implement ``_build_body`` (request to
    wire JSON), ``_parse`` (response body to turn) and ``_accumulator`` (SSE to turn).
    """

    name: str = ""
    _path: ClassVar[str] = ""
    _api_key_env: ClassVar[str | None] = None
    _default_base_url: ClassVar[str | None] = None

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
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ValueError(f"{type(self).__name__}: model must be a non-empty string")
        base_url = base_url or self._default_base_url
        if not base_url or not isinstance(base_url, str):
            raise ValueError(f"{type(self).__name__}: base_url is required (e.g. http://host/v1)")
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"{type(self).__name__}: base_url must start with http(s)://")
        if client is not None and not isinstance(client, httpx.AsyncClient):
            raise TypeError(f"{type(self).__name__}: client must be an httpx.AsyncClient")
        if params is not None and not isinstance(params, Mapping):
            raise TypeError(f"{type(self).__name__}: params must be a mapping")
        policy = retry or RetryPolicy()
        if max_retries is not None:
            policy = dataclasses.replace(policy, max_retries=max_retries)
        if retry_budget is not None:
            policy = dataclasses.replace(policy, budget=retry_budget)
        if api_key is None and self._api_key_env:
            api_key = os.environ.get(self._api_key_env) or None
        self._missing_key = api_key is None and self._requires_key()
        all_headers = {"content-type": "application/json", "accept": "application/json"}
        all_headers.update(self._auth_headers(api_key))
        all_headers.update(headers or {})
        self.model = model
        self.params: dict[str, Any] = dict(params or {})
        self._session = HttpSession(
            provider=self.name,
            base_url=base_url,
            headers=all_headers,
            timeout=timeout,
            connect_timeout=connect_timeout,
            retry=policy,
            client=client,
        )

    # -- subclass hooks -------------------------------------------------------------------

    def _requires_key(self) -> bool:
        return self._api_key_env is not None

    def _auth_headers(self, api_key: str | None) -> dict[str, str]:
        raise NotImplementedError

    def _build_body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        raise NotImplementedError

    def _parse(self, raw: bytes, duration: float) -> AssistantTurn:
        raise NotImplementedError

    def _accumulator(self) -> StreamAccumulator:
        raise NotImplementedError

    # -- public surface -------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The API base URL requests go to."""
        return self._session.base_url

    @property
    def retry(self) -> RetryPolicy:
        """The retry policy in force."""
        return self._session.retry

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    def with_model(self, model: str) -> Self:
        """A provider for another model sharing this one's client and settings.

        Args:
            model: The model name.

        Returns:
            The new provider.
        """
        if not isinstance(model, str) or not model.strip():
            raise ValueError(f"{type(self).__name__}.with_model: model must be a non-empty string")
        other = copy.copy(self)
        other.model = model
        other.params = dict(self.params)
        return other

    async def aclose(self) -> None:
        """Close the HTTP client if the provider created it (shared with ``with_model``)."""
        await self._session.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _encode(self, request: ModelRequest, *, stream: bool) -> bytes:
        if self._missing_key:
            raise AuthenticationError(
                f"{self.name}: no API key: pass api_key= or set {self._api_key_env}",
                provider=self.name,
            )
        if not isinstance(request, ModelRequest):
            raise TypeError(f"{self.name}: expected a ModelRequest, got {type(request).__name__}")
        try:
            return _encoder.encode(self._build_body(request, stream=stream))
        except TypeError as exc:
            raise BadRequestError(
                f"{self.name}: request is not JSON-encodable: {exc}", provider=self.name
            ) from exc

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        """Send one request and return the model's whole turn (``usage.requests == 1``).

        Args:
            request: The request.

        Returns:
            The model's turn.

        Raises:
            ProviderError: The request failed after the retries the policy allows (a subclass
                says why: ``AuthenticationError``, ``RateLimitError``, ``BadRequestError``,
                ``ProviderTimeoutError``).
        """
        body = self._encode(request, stream=False)
        start = time.perf_counter()
        raw = await self._session.post(self._path, body)
        return self._parse(raw, time.perf_counter() - start)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta | AssistantTurn]:
        """Send one streaming request; yield text/thinking deltas, then the whole turn.

        Closing or cancelling the iteration closes the HTTP response.

        Args:
            request: The request.

        Returns:
            An async iterator of deltas followed by the turn.

        Raises:
            ProviderError: The stream broke, reported an error or ended without its final
                event; no partial turn is yielded.
        """
        body = self._encode(request, stream=True)
        start = time.perf_counter()
        response = await self._session.open_stream(self._path, body)
        try:
            if response.headers.get("content-type", "").startswith("application/json"):
                # Some compatible servers ignore "stream": true and answer in one piece.
                whole = self._parse(await response.aread(), time.perf_counter() - start)
                text = whole.text
                if text:
                    yield StreamDelta(text=text)
                yield whole
                return
            accumulator = self._accumulator()
            decoder = SSEDecoder()
            try:
                async for chunk in response.aiter_bytes():
                    for event in decoder.feed(chunk):
                        for delta in accumulator.feed(event):
                            yield delta
                        if accumulator.done:
                            break
                    if accumulator.done:
                        break
            except httpx.TimeoutException as exc:
                raise ProviderTimeoutError(
                    f"{self.name}: stream stalled (read timeout) before it was complete",
                    provider=self.name,
                ) from exc
            except httpx.TransportError as exc:
                raise ProviderError(
                    f"{self.name}: stream interrupted ({type(exc).__name__}: {exc or 'no detail'})",
                    provider=self.name,
                ) from exc
            turn = accumulator.finish(time.perf_counter() - start)
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()
        yield turn


_encoder = msgspec.json.Encoder()


def tool_result_text(value: Any, error: str | None) -> str:
    """What the model sees for a tool result.

    Errors become ``Tool calling failed with error <message>``; strings go as they are;
    anything else is sent as JSON.
    """
    if error is not None:
        if error.startswith("Tool calling failed with error"):
            return error
        return f"Tool calling failed with error {error}"
    if isinstance(value, str):
        return value
    try:
        return _encoder.encode(value).decode()
    except TypeError:
        return str(value)


def parse_arguments(provider: str, name: str, call_id: str, raw: str | None) -> dict[str, Any]:
    """A tool call's JSON argument string as a dict (empty or ``null`` means ``{}``)."""
    if raw is None or not raw.strip():
        return {}
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise ProviderError(
            f"{provider}: tool call {name!r} ({call_id}) has arguments that are not valid "
            f"JSON ({exc}): {raw[:200]!r}",
            provider=provider,
        ) from exc
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ProviderError(
            f"{provider}: tool call {name!r} ({call_id}) has arguments that are not a JSON "
            f"object: {raw[:200]!r}",
            provider=provider,
        )
    return value


def merge_params(
    defaults: Mapping[str, Any],
    params: Mapping[str, Any],
    renames: Mapping[str, str | None],
) -> dict[str, Any]:
    """Provider defaults overlaid with request params, renamed to wire names.

    ``renames`` maps a provider-neutral name to the wire name, or to ``None`` when the
    provider has no such setting (dropped). Other keys pass through unchanged; ``None``
    values are dropped.
    """
    out: dict[str, Any] = {}
    for source in (defaults, params):
        for key, value in source.items():
            wire = renames.get(key, key)
            if wire is None:
                continue
            if value is None:
                out.pop(wire, None)
            else:
                out[wire] = value
    return out
