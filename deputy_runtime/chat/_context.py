"""Which agent is talking to the model right now.

The Agent runtime wraps every provider call in :func:`agent_name_scope`, so code that
sees only a :class:`~deputy_runtime.chat.ModelRequest` (the scripted provider picking the
script of the agent, logging, host providers) can still tell which agent asked. A
ContextVar is used because anyio copies the context into child tasks: concurrent
delegations each see their own name without any locking.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from types import MappingProxyType

__all__ = [
    "agent_name_scope",
    "current_agent_name",
    "current_request_headers",
    "request_headers_scope",
    "reset_current_agent",
    "set_current_agent",
]

_current_agent: ContextVar[str | None] = ContextVar("deputy_runtime_current_agent", default=None)


def current_agent_name() -> str | None:
    """The name of the agent whose model request is in progress.

    Returns:
        The agent's name, or ``None`` outside a model request made by an agent.
    """
    return _current_agent.get()


def set_current_agent(name: str | None) -> Token[str | None]:
    """Set the current agent name; pass the returned token to :func:`reset_current_agent`."""
    return _current_agent.set(name)


def reset_current_agent(token: Token[str | None]) -> None:
    """Restore the agent name that was current before :func:`set_current_agent`."""
    _current_agent.reset(token)


@contextmanager
def agent_name_scope(name: str | None) -> Iterator[None]:
    """Make ``name`` the current agent name for the duration of the ``with`` block.

    Args:
        name: The agent name :func:`current_agent_name` returns inside the block.

    Returns:
        A context manager; the previous name is restored when the block exits.
    """
    token = _current_agent.set(name)
    try:
        yield
    finally:
        _current_agent.reset(token)


_NO_HEADERS: Mapping[str, str] = MappingProxyType({})
_request_headers: ContextVar[Mapping[str, str]] = ContextVar(
    "deputy_runtime_request_headers", default=_NO_HEADERS
)


def current_request_headers() -> Mapping[str, str]:
    """The extra HTTP headers the providers send with requests made in this context.

    Returns:
        The headers set by the innermost :func:`request_headers_scope` (empty outside one).
    """
    return _request_headers.get()


@contextmanager
def request_headers_scope(headers: Mapping[str, str]) -> Iterator[None]:
    """Send ``headers`` with every HTTP provider request made inside the ``with`` block.

    The HTTP providers (OpenAI, OpenAI-compatible, Ollama, Anthropic) add them to each
    request of the block, over their own headers; one provider serves many concurrent
    callers, so per-call headers (an ``Idempotency-Key``) cannot be constructor options.
    Scopes nest: an inner scope adds to and overrides the outer one.

    Args:
        headers: Header names and values (strings).

    Returns:
        A context manager; the previous headers are restored when the block exits.

    Raises:
        TypeError: A name or value is not a string.
    """
    for name, value in headers.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise TypeError(
                f"request_headers_scope: header names and values must be strings, "
                f"got {name!r}: {value!r}"
            )
    token = _request_headers.set(MappingProxyType({**_request_headers.get(), **headers}))
    try:
        yield
    finally:
        _request_headers.reset(token)
