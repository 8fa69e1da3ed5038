"""HTTP plumbing shared by the HTTP providers: client ownership, retries, error mapping.

One :class:`HttpSession` per provider instance owns (or borrows, when injected) one
``httpx.AsyncClient``; ``with_model`` copies share it. Requests are retried with exponential
backoff and jitter on 408, 409, 429, 5xx and connection errors, honouring ``retry-after``,
within a retry budget. Streams are retried only until their headers arrive: once events may
have been seen, an error is raised instead. Failures become typed errors that carry the
HTTP status and the provider's own error message.

Nothing a server sends is trusted to be finite or well formed: bodies are decoded in
bounded pieces under the size caps of :class:`ResponseLimits`, every call runs under a
total deadline and streams under an idle deadline, retry hints that are not finite
non-negative numbers are ignored, reported usage is validated, and every error leaving a
provider has its credentials masked.
"""

from __future__ import annotations

import copy
import dataclasses
import email.utils
import functools
import math
import os
import random
import ssl
import time
import urllib.parse
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
from ._bounded import ResponseReader
from ._context import current_request_headers
from ._limits import ACCEPT_ENCODING, ResponseLimits
from ._redact import Redactor, display_url, header_secrets, url_secrets
from ._sse import EventTooLarge, ServerSentEvent, SSEDecoder
from ._toolloop import TOOL_ERROR_PREFIX, tool_error_text
from ._types import AssistantTurn, ModelRequest, StreamDelta
from ._window import window_value

__all__ = [
    "HTTPProvider",
    "HttpSession",
    "ResponseLimits",
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
_ERROR_BODY_BYTES = 64 * 1024  # an error body is read this far for its message, no further
# Malformed data in a response makes the parsers raise these; they become ProviderError.
_PARSE_ERRORS = (
    TypeError,
    ValueError,
    KeyError,
    IndexError,
    AttributeError,
    RecursionError,
    OverflowError,
    msgspec.MsgspecError,
)


@dataclass(frozen=True)
class RetryPolicy:
    """When and how long to wait before retrying a failed request.

    ``max_retries`` extra attempts are made at most; the waits between attempts are
    ``min(initial_delay * 2**n, max_delay)`` reduced by up to 25% of jitter, or what the
    server's ``retry-after``/``retry-after-ms`` header asks for (when that is a finite number
    >= 0; other hints are ignored). ``budget`` caps the total seconds spent waiting for one
    request: a retry whose wait would exceed it (or pass the call's total deadline, see
    :class:`ResponseLimits`) is not made, and the last error is raised. ``sleep`` is
    injectable so tests need not wait.
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


def _seconds(value: str, scale: float = 1.0) -> float | None:
    """A hint in (milli)seconds as seconds; ``None`` unless a finite number >= 0."""
    try:
        seconds = float(value.strip()) / scale
    except (ValueError, OverflowError):
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms``, then ``retry-after``).

    A hint that is not a finite non-negative number (``nan``, ``inf``, ``-1``, garbage) is
    ignored, and our own backoff applies; a hint longer than the retry budget or the total
    deadline ends the retries instead of being waited for.
    """
    value = headers.get("retry-after-ms")
    if value is not None:
        seconds = _seconds(value, 1000.0)
        if seconds is not None:
            return seconds
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _seconds(value)
    if seconds is not None:
        return seconds
    try:  # the HTTP-date form
        parsed = email.utils.parsedate_to_datetime(value)
        wait = parsed.timestamp() - time.time()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None  # unparseable: fall back to our own backoff
    return max(wait, 0.0) if math.isfinite(wait) else None


def _error_details(
    body: bytes, redact: Callable[[str], str]
) -> tuple[str | None, str | None, object]:
    """(message, type) from the error body shapes real servers use, plus the parsed body."""
    try:
        parsed: object = msgspec.json.decode(body)
    except (msgspec.DecodeError, RecursionError):  # nested past the parser's depth limit
        # Masked before it is cut, so a truncation cannot leave part of a secret behind.
        text = redact(body.decode("utf-8", errors="replace")).strip()
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
                try:
                    message = msgspec.json.encode(raw_msg).decode()
                except RecursionError:
                    message = "(an error message nested too deeply to show)"
    return message, kind, parsed


def error_from_response(
    provider: str, status: int, body: bytes, redactor: Redactor | None = None
) -> ProviderError:
    """Map an HTTP error status and body to the typed error, with the server's message.

    With a ``redactor``, secrets the server echoed are masked in the message and the body.
    """
    redact = redactor.text if redactor is not None else _same
    message, kind, parsed = _error_details(body, redact)
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
    error = cls(text, provider=provider, status=status, body=parsed)
    if redactor is not None:
        redactor.scrub(error)
    return error


def _same(text: str) -> str:
    return text


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
    """The HTTP client, headers, timeouts, limits and retry policy one provider (family) uses.

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
        limits: ResponseLimits | None = None,
        secrets: tuple[str | None, ...] = (),
    ) -> None:
        self.provider = provider
        self.base_url = base_url.rstrip("/")
        try:
            parts = urllib.parse.urlsplit(base_url)
            parts.port  # noqa: B018 -- parsing the port validates it
        except ValueError as exc:
            raise ValueError(f"{provider}: base_url is not a valid URL ({exc})") from None
        # Request paths go after the base path and before its query (``?api-version=``).
        self._prefix = urllib.parse.urlunsplit(
            (parts.scheme, parts.netloc, parts.path.rstrip("/"), "", "")
        )
        self._query = f"?{parts.query}" if parts.query else ""
        # Bounded decoding handles exactly these; a client default (br, zstd) is not used.
        self._headers = {"accept-encoding": ACCEPT_ENCODING, **headers}  # holds the API key
        self.redactor = Redactor((*secrets, *url_secrets(base_url), *header_secrets(self._headers)))
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
        self.limits = limits or ResponseLimits()
        self.reader = ResponseReader(provider, self.limits)
        self._client = client
        self._owned = client is None
        self._token: object = None

    def __repr__(self) -> str:
        return f"HttpSession(provider={self.provider!r}, base_url={display_url(self.base_url)!r})"

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

    def deadline(self) -> float:
        """The total deadline (event-loop clock) of a call that starts now."""
        return anyio.current_time() + self.limits.total_timeout

    def _request(self, client: httpx.AsyncClient, path: str, body: bytes) -> httpx.Request:
        url = self._prefix + path + self._query
        extra = current_request_headers()
        headers = {**self._headers, **extra} if extra else self._headers
        if self._explicit_timeout:
            return client.build_request(
                "POST", url, content=body, headers=headers, timeout=self.timeout
            )
        return client.build_request("POST", url, content=body, headers=headers)

    async def post(self, path: str, body: bytes, deadline: float | None = None) -> bytes:
        """POST ``body``; return the 2xx response body, retrying as the policy allows.

        The whole call, retries and their waits included, ends by ``deadline`` (the
        event-loop clock; a fresh total deadline when omitted).
        """
        when = self.deadline() if deadline is None else deadline
        return await self._attempts(path, body, stream=False, deadline=when)  # type: ignore[no-any-return]

    async def open_stream(
        self, path: str, body: bytes, deadline: float | None = None
    ) -> httpx.Response:
        """POST ``body`` and return the 2xx streaming response with its body unread.

        The caller must ``aclose()`` the response (in a ``finally``).
        """
        when = self.deadline() if deadline is None else deadline
        return await self._attempts(path, body, stream=True, deadline=when)  # type: ignore[no-any-return]

    async def _attempts(self, path: str, body: bytes, *, stream: bool, deadline: float) -> Any:
        policy = self.retry
        waited = 0.0
        retry_number = 0
        while True:
            retry_after: float | None = None
            remaining = deadline - anyio.current_time()
            if remaining <= 0:
                raise self.reader.total_timeout_error()
            with anyio.move_on_after(remaining) as scope:
                try:
                    return await self._attempt(path, body, stream=stream)
                except _Retryable as exc:
                    error, retry_after = exc.error, exc.retry_after
            if scope.cancelled_caught:
                raise self.reader.total_timeout_error()
            delay = policy.backoff(retry_number) if retry_after is None else retry_after
            if not math.isfinite(delay) or delay < 0:  # a policy subclass's odd backoff
                delay = policy.initial_delay
            attempts = retry_number + 1
            if retry_number >= policy.max_retries:
                raise _with_note(error, f"gave up after {attempts} attempt(s)")
            if waited + delay > policy.budget:
                raise _with_note(
                    error,
                    f"gave up after {attempts} attempt(s): waiting {delay:.3g}s more "
                    f"would exceed the retry budget of {policy.budget:g}s",
                )
            if anyio.current_time() + delay >= deadline:
                raise _with_note(
                    error,
                    f"gave up after {attempts} attempt(s): waiting {delay:.3g}s more would "
                    f"pass the total deadline of {self.limits.total_timeout:g}s",
                )
            await policy.sleep(delay)
            waited += delay
            retry_number += 1

    async def _attempt(self, path: str, body: bytes, *, stream: bool) -> Any:
        client = self.client()
        try:
            request = self._request(client, path, body)
        except httpx.InvalidURL as exc:
            raise ProviderError(
                f"{self.provider}: invalid request URL ({exc})", provider=self.provider
            ) from None
        response: httpx.Response | None = None
        try:
            try:
                response = await client.send(request, stream=True)
                if response.is_success:
                    if stream:
                        opened, response = response, None  # the caller closes it
                        return opened
                    return await self.reader.read_body(response)
                error_body = await self.reader.read_body(response, _ERROR_BODY_BYTES, truncate=True)
            except httpx.TimeoutException as exc:
                raise _Retryable(self._timeout_error(exc)) from exc
            except httpx.RequestError as exc:
                raise _Retryable(self._connection_error(exc)) from exc
        finally:
            if response is not None:
                with anyio.CancelScope(shield=True):
                    await response.aclose()
        error = error_from_response(self.provider, response.status_code, error_body, self.redactor)
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

    def _connection_error(self, exc: httpx.RequestError) -> ProviderError:
        # A protocol error is the server speaking broken HTTP, not a network failure.
        what = (
            "malformed HTTP response"
            if isinstance(exc, httpx.ProtocolError)
            else "connection failed"
        )
        error = ProviderError(
            f"{self.provider}: {what} ({type(exc).__name__}: {exc or 'no detail'})",
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
    """The same error (type and attributes), its message extended with why retrying stopped."""
    final = copy.copy(error)
    final.args = (f"{error} ({note})",)
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
    ``context_window`` (tokens) overrides the ``CONTEXT_WINDOWS`` table for this model; a
    :meth:`with_model` copy leaves it to the table again.
    """

    name: str = ""
    _path: ClassVar[str] = ""
    _api_key_env: ClassVar[str | None] = None
    #: The environment variable naming the endpoint when ``base_url`` is not given, read
    #: where the provider is built (a CLI run, a worker, a host) so all of them agree.
    _base_url_env: ClassVar[str | None] = None
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
        limits: ResponseLimits | Mapping[str, Any] | None = None,
        context_window: int | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ValueError(f"{type(self).__name__}: model must be a non-empty string")
        source = "base_url"
        if not base_url and self._base_url_env:
            base_url = os.environ.get(self._base_url_env, "").strip() or None
            source = f"base_url (from {self._base_url_env})" if base_url else source
        base_url = base_url or self._default_base_url
        if not base_url or not isinstance(base_url, str):
            raise ValueError(f"{type(self).__name__}: base_url is required (e.g. http://host/v1)")
        if not base_url.startswith(("http://", "https://")):
            shown = display_url(base_url)
            raise ValueError(
                f"{type(self).__name__}: {source} must start with http(s)://, got {shown!r}"
            )
        if client is not None and not isinstance(client, httpx.AsyncClient):
            raise TypeError(f"{type(self).__name__}: client must be an httpx.AsyncClient")
        if params is not None and not isinstance(params, Mapping):
            raise TypeError(f"{type(self).__name__}: params must be a mapping")
        if isinstance(limits, Mapping):  # e.g. from a definition file's model_args
            unknown = sorted(set(limits) - {f.name for f in dataclasses.fields(ResponseLimits)})
            if unknown:
                raise ValueError(
                    f"{type(self).__name__}: unknown limits {unknown}; expected fields of "
                    "ResponseLimits"
                )
            limits = ResponseLimits(**limits)
        if limits is not None and not isinstance(limits, ResponseLimits):
            raise TypeError(
                f"{type(self).__name__}: limits must be a ResponseLimits or a mapping of its fields"
            )
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
        # This model's window when the table (chat.CONTEXT_WINDOWS) does not know it or
        # is wrong for this endpoint; None: the table's entry, if any.
        self.context_window = window_value(f"{type(self).__name__}.context_window", context_window)
        self._session = HttpSession(
            provider=self.name,
            base_url=base_url,
            headers=all_headers,
            timeout=timeout,
            connect_timeout=connect_timeout,
            retry=policy,
            client=client,
            limits=limits,
            secrets=(api_key,),
        )

    @property
    def api_key_variable(self) -> str | None:
        """The environment variable the key is read from when none is passed, if any."""
        return self._api_key_env

    @property
    def missing_api_key(self) -> str | None:
        """Why every request would fail for want of a key (none given, none in the
        provider's environment variable), or ``None`` when a key is set or not needed.

        Lets a caller refuse a run before it starts instead of after its first request.
        """
        if not self._missing_key:
            return None
        return f"{self.name}: no API key: pass api_key= or set {self._api_key_env}"

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

    @property
    def limits(self) -> ResponseLimits:
        """The size caps and deadlines in force."""
        return self._session.limits

    def __repr__(self) -> str:
        shown = display_url(self.base_url)  # without user info or query values
        return f"{type(self).__name__}(model={self.model!r}, base_url={shown!r})"

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
        other.context_window = None  # set for this model, not another: the table decides
        return other

    async def aclose(self) -> None:
        """Close the HTTP client if the provider created it (shared with ``with_model``)."""
        await self._session.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _encode(self, request: ModelRequest, *, stream: bool) -> bytes:
        missing = self.missing_api_key
        if missing is not None:
            raise AuthenticationError(missing, provider=self.name)
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
        session = self._session
        start = time.perf_counter()
        try:
            raw = await session.post(self._path, body, session.deadline())
            return self._checked_parse(raw, start)
        except ProviderError as exc:
            session.redactor.scrub(exc)
            raise

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta | AssistantTurn]:
        """Send one streaming request; yield text/thinking deltas, then the whole turn.

        A stream that breaks, reports an error, ends without its final event, goes over
        a size cap or past a deadline raises :class:`ProviderError`; no partial turn is
        yielded. Closing or cancelling the iteration closes the HTTP response.

        Args:
            request: The request.

        Returns:
            An async iterator of deltas followed by the turn.

        Raises:
            ProviderError: The stream broke, reported an error, ended without its final
                event, went over a size cap or past a deadline; no partial turn is yielded.
        """
        body = self._encode(request, stream=True)
        session = self._session
        start = time.perf_counter()
        deadline = session.deadline()
        try:
            response = await session.open_stream(self._path, body, deadline)
        except ProviderError as exc:
            session.redactor.scrub(exc)
            raise
        try:
            if response.headers.get("content-type", "").startswith("application/json"):
                # Some compatible servers ignore "stream": true and answer in one piece.
                whole = await self._whole_body(response, start, deadline)
                text = whole.text
                if text:
                    yield StreamDelta(text=text)
                yield whole
                return
            accumulator = self._accumulator()
            decoder = SSEDecoder(session.limits.max_event_bytes)
            reader = session.reader.stream(response, deadline)
            while not accumulator.done:
                chunk = await reader.next()
                if chunk is None:
                    break
                for event in self._events(decoder, chunk):
                    if event.event != "ping":
                        reader.progress()
                    for delta in self._feed(accumulator, event):
                        yield delta
                    if accumulator.done:
                        break
            turn = self._finish(accumulator, start)
        except ProviderError as exc:
            session.redactor.scrub(exc)
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()
        yield turn

    async def _whole_body(
        self, response: httpx.Response, start: float, deadline: float
    ) -> AssistantTurn:
        with anyio.move_on_after(deadline - anyio.current_time()):
            try:
                raw = await self._session.reader.read_body(response)
            except httpx.TimeoutException as exc:
                raise self._session._timeout_error(exc) from exc
            except httpx.RequestError as exc:
                raise self._session._connection_error(exc) from exc
            return self._checked_parse(raw, start)
        raise self._session.reader.total_timeout_error()

    def _checked_parse(self, raw: bytes, start: float) -> AssistantTurn:
        try:
            return self._parse(raw, time.perf_counter() - start)
        except _PARSE_ERRORS as exc:
            raise self._malformed(exc) from exc

    def _events(self, decoder: SSEDecoder, chunk: bytes) -> list[ServerSentEvent]:
        try:
            return decoder.feed(chunk)
        except EventTooLarge as exc:
            raise self._session.reader.too_large("max_event_bytes", exc.limit) from exc

    def _feed(self, accumulator: StreamAccumulator, event: ServerSentEvent) -> list[StreamDelta]:
        try:
            return accumulator.feed(event)
        except _PARSE_ERRORS as exc:
            raise self._malformed(exc) from exc

    def _finish(self, accumulator: StreamAccumulator, start: float) -> AssistantTurn:
        try:
            return accumulator.finish(time.perf_counter() - start)
        except _PARSE_ERRORS as exc:
            raise self._malformed(exc) from exc

    def _malformed(self, exc: BaseException) -> ProviderError:
        # The parsers reject what they expect to be wrong; anything else that breaks them
        # on a server's data is still the server's malformed response, not a crash.
        return ProviderError(
            f"{self.name}: malformed response ({type(exc).__name__}: "
            f"{self._session.redactor.text(str(exc))[:200]})",
            provider=self.name,
        )

    @property
    def _redactor(self) -> Redactor:
        return self._session.redactor


_encoder = msgspec.json.Encoder()


def tool_result_text(value: Any, error: str | None) -> str:
    """What the model sees for a tool result.

    Errors become ``Tool calling failed with error <message>``; strings go as they are;
    anything else is sent as JSON.
    """
    if error is not None:
        if error.startswith(TOOL_ERROR_PREFIX):
            return error
        return tool_error_text(error)
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
