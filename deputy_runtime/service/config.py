"""The server's ceilings and a client's run request, validated at the boundary.

A run request may narrow what the server allows, never widen it: its ``max_requests``
and ``max_total_tokens`` must be at most the server's, its ``permission_mode`` must be
reachable from the server's mode (``MODE_TRANSITIONS``), and its ``agents`` must name
definitions the server loaded. Anything else is refused with the field named, before
any lead is built.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from ..errors import DeputyError
from ..runtime import MODE_TRANSITIONS, PermissionMode, UsageLimits

__all__ = ["MAX_TASK_CHARS", "RunRequest", "RunRequestError", "ServiceConfig", "resolve_request"]

MAX_TASK_CHARS = 100_000
Mode = Literal["readonly", "plan", "standard", "full"]


class RunRequestError(DeputyError, ValueError):
    """A run request the server refuses; ``field`` names the offending JSON field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class ServiceConfig(msgspec.Struct, frozen=True, kw_only=True):
    """What ``deputy-runtime serve`` was started with (tokens are kept elsewhere)."""

    max_requests: int = 25  # per run, delegations included: the ceiling for every client
    max_total_tokens: int | None = None
    permission_mode: Mode = "standard"
    max_runs: int = 32  # runs active at once, all clients together
    keep_runs: int = 1000  # finished runs kept for GET (oldest forgotten first)
    rate: float = 20.0  # requests per second per token, after the burst
    burst: int = 60
    max_body_bytes: int = 64 * 1024
    event_log_size: int = 10_000  # events kept per run for SSE resumption
    shutdown_grace: float = 5.0  # seconds runs get to stop at a boundary on SIGTERM


class RunRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The body of ``POST /runs``."""

    task: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_TASK_CHARS)]
    agents: tuple[str, ...] | None = None
    max_requests: Annotated[int, msgspec.Meta(ge=1)] | None = None
    max_total_tokens: Annotated[int, msgspec.Meta(ge=1)] | None = None
    permission_mode: Mode | None = None


class Resolved(msgspec.Struct, frozen=True):
    """A request checked against the server: what the run will actually get."""

    task: str
    agents: tuple[str, ...]
    limits: UsageLimits
    permission_mode: Mode


def resolve_request(
    request: RunRequest, config: ServiceConfig, known_agents: tuple[str, ...]
) -> Resolved:
    """Apply the server's ceilings to a request; raises :class:`RunRequestError`."""
    if not request.task.strip():
        raise RunRequestError("task", "must not be blank")
    max_requests = request.max_requests or config.max_requests
    if max_requests > config.max_requests:
        raise RunRequestError(
            "max_requests", f"{max_requests} is above the server's ceiling {config.max_requests}"
        )
    tokens = request.max_total_tokens or config.max_total_tokens
    if (
        tokens is not None
        and config.max_total_tokens is not None
        and tokens > config.max_total_tokens
    ):
        raise RunRequestError(
            "max_total_tokens",
            f"{tokens} is above the server's ceiling {config.max_total_tokens}",
        )
    mode = request.permission_mode or config.permission_mode
    if mode not in MODE_TRANSITIONS[PermissionMode(config.permission_mode)]:
        allowed = ", ".join(sorted(MODE_TRANSITIONS[PermissionMode(config.permission_mode)]))
        raise RunRequestError(
            "permission_mode",
            f"{mode!r} is wider than the server's {config.permission_mode!r} (allowed: {allowed})",
        )
    agents = known_agents
    if request.agents is not None:
        if not request.agents:
            raise RunRequestError("agents", "must name at least one agent, or be left out")
        for index, name in enumerate(request.agents):
            if name not in known_agents:
                raise RunRequestError(
                    f"agents[{index}]",
                    f"no agent named {name!r} (known: {', '.join(known_agents)})",
                )
        agents = tuple(dict.fromkeys(request.agents))
    limits = UsageLimits(max_requests=max_requests, max_total_tokens=tokens)
    return Resolved(request.task, agents, limits, mode)
