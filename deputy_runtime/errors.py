"""The exception hierarchy.

Everything the runtime raises on purpose derives from :class:`DeputyError`, so a host can
catch the runtime's errors in one place. Errors a model can act on (unknown agent, denied
tool, child failure, limit reached) are returned to the model as tool errors instead of
being raised; the classes below are for what only the host can fix.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "AuthenticationError",
    "BadRequestError",
    "BudgetExceeded",
    "BudgetLedgerError",
    "CheckpointError",
    "CommandHookError",
    "ContextWindowExceeded",
    "CoordinationError",
    "CoordinationUnavailableError",
    "DefinitionError",
    "DefinitionFileError",
    "DelegationBindingError",
    "DeputyError",
    "HumanInputUnavailable",
    "InvalidUsageError",
    "McpCallTimeoutError",
    "McpConfigError",
    "McpError",
    "McpServerGoneError",
    "McpStartError",
    "McpToolError",
    "PermissionCeilingError",
    "PermissionModeWideningError",
    "PermissionsError",
    "ProviderError",
    "ProviderTimeoutError",
    "RateLimitError",
    "RequestLimitExceeded",
    "ResourceBusyError",
    "ResponseTooLargeError",
    "RunActiveError",
    "SamplingError",
    "SandboxUnavailableError",
    "ScriptError",
    "SkillError",
    "ToolArgumentError",
    "ToolDefinitionError",
    "ToolLoopLimitError",
    "UnknownProviderError",
    "UsageLimitExceeded",
    "UsageValueError",
]


class DeputyError(Exception):
    """Base class of every error the runtime raises on purpose."""


class DefinitionError(DeputyError, ValueError):
    """An AgentDefinition field is invalid; the message names the field."""


class DefinitionFileError(DefinitionError):
    """A definition file could not be read, written or discovered.

    ``path`` is the file (or directory) concerned; ``line`` and ``column`` are 1-based and
    set when the YAML parser knows where the problem is.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | Path,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        self.path = Path(path)
        self.line = line
        self.column = column
        self.reason = message
        where = str(self.path) if line is None else f"{self.path}:{line}"
        super().__init__(f"{where}: {message}")


class SkillError(DeputyError, ValueError):
    """A skill directory or SKILL.md is missing or malformed; the message names the path."""


class ToolDefinitionError(DeputyError, ValueError):
    """A Tool could not be built (bad name, schema or function signature)."""


class ToolArgumentError(DeputyError, ValueError):
    """A model's tool call had arguments that do not match the tool's schema.

    Returned to the model as a tool error naming the bad argument; never raised to the host
    by the agent loop.
    """


class SandboxUnavailableError(DeputyError):
    """A tool must run in a sandbox and the sandbox is not installed (for example the
    bash tool without bubblewrap); it never runs unsandboxed instead."""


class CheckpointError(DeputyError, ValueError):
    """A saved run checkpoint cannot be used: missing, damaged, tampered with or foreign.

    The message names what is wrong (the field, the digest, the format version, the run
    id). ``run_id`` is the run asked for; ``field`` the checkpoint field at fault, when
    one is (``None`` for the whole checkpoint, such as a digest mismatch).
    """

    def __init__(self, message: str, *, run_id: str, field: str | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.field = field


class CommandHookError(DeputyError):
    """A command hook (a shell command run as a hook) exited with an unexpected code,
    timed out or could not start; recorded as the hook's error, and a ``PreToolUse`` call
    it guarded is denied."""


class DelegationBindingError(DeputyError):
    """A DelegationPolicy is invalid or could not bind resources for a subagent."""


class ResourceBusyError(DelegationBindingError):
    """An exclusive resource key is held by another delegation (fails at once, no waiting)."""


class CoordinationError(DeputyError):
    """A cross-process coordination backend (the optional Redis leases and budget ledger)
    failed or was misused; the message names the backend and what to do."""


class CoordinationUnavailableError(CoordinationError, ConnectionError):
    """The coordination backend cannot be reached: at setup, or mid-run for a new acquire or
    reserve, or after a release or settle exhausted its bounded retry time."""


class BudgetLedgerError(CoordinationError):
    """A shared budget ledger refused an operation: its stored limits differ from the ones
    configured, it is missing (the server lost its data), or a holder id was already used
    or never reserved."""


class PermissionCeilingError(DeputyError):
    """A subagent asked for a permission mode its lead's current mode does not allow."""


class PermissionModeWideningError(DeputyError, ValueError):
    """``set_permission_mode`` was asked to widen permissions; only narrowing is allowed."""


class PermissionsError(DeputyError, ValueError):
    """``Permissions`` got an invalid mode, tool list, callback or root; names the field."""


class UsageLimitExceeded(DeputyError):
    """A run reached a usage limit with ``on_exceed="error"``.

    ``stop_reason`` is the typed stop reason (for example ``"request_limit"``) and
    ``result`` the run's :class:`~deputy_runtime.AgentResult` when one exists.
    """

    def __init__(self, message: str, *, stop_reason: str, result: object | None = None) -> None:
        super().__init__(message)
        self.stop_reason = stop_reason
        self.result = result


class RequestLimitExceeded(UsageLimitExceeded):
    """The request limit was reached with ``on_exceed="error"``."""


class BudgetExceeded(UsageLimitExceeded):
    """A tool-call, token or cost limit was reached with ``on_exceed="error"``."""


class ContextWindowExceeded(UsageLimitExceeded):
    """The next request would not fit the model's context window, even after compaction,
    with ``on_exceed="error"``; ``stop_reason`` is ``"context_window"``. Such a request
    is never sent."""


class RunActiveError(DeputyError, RuntimeError):
    """An agent already has an active run (one run per agent at a time)."""


class ScriptError(DeputyError, AssertionError):
    """A scripted provider ran out of turns or got a request its script did not expect."""


class ProviderError(DeputyError):
    """A model provider failed. ``status`` is the HTTP status when there was one."""

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        status: int | None = None,
        body: object | None = None,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.status = status
        self.body = body


class RateLimitError(ProviderError):
    """The provider kept answering 429 until the retry budget ran out."""


class AuthenticationError(ProviderError):
    """The provider rejected the credentials (401/403); never retried."""


class ProviderTimeoutError(ProviderError):
    """The provider did not connect or answer within the configured timeouts."""


class BadRequestError(ProviderError):
    """The provider rejected the request as malformed (400/404/422); never retried."""


class UnknownProviderError(DeputyError, ValueError):
    """A model spec named a provider that is not registered; the message lists the known ones."""


class ToolLoopLimitError(DeputyError, RuntimeError):
    """The model kept calling tools for more than ``max_tool_rounds`` rounds.

    ``max_tool_rounds`` is the limit that was reached.
    """

    def __init__(self, message: str, *, max_tool_rounds: int) -> None:
        super().__init__(message)
        self.max_tool_rounds = max_tool_rounds


class ResponseTooLargeError(ProviderError):
    """A response went over a configured size cap and was abandoned.

    ``limit`` is the cap in bytes and ``what`` the thing it bounds (``"max_body_bytes"``,
    ``"max_event_bytes"`` or ``"max_stream_bytes"``), so the message and the attributes
    name the setting to raise.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        status: int | None = None,
        body: object | None = None,
        limit: int | None = None,
        what: str | None = None,
    ) -> None:
        super().__init__(message, provider=provider, status=status, body=body)
        self.limit = limit
        self.what = what


class UsageValueError(DeputyError, ValueError):
    """A usage value (``Usage``, ``AgentUsage``) was built with a count that is not an int
    >= 0 or a cost that is not a finite number >= 0. ``field`` names the offending field.

    Rejected at construction, whoever built it (a host's own provider included): NaN, an
    infinity or a negative count would otherwise silently disable a token or cost limit.
    """

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class InvalidUsageError(ProviderError):
    """A response reported usage that cannot be true (negative, non-finite or absurd counts
    or cost); the response is rejected so a usage limit is never fed a value that would
    disable it."""


class SamplingError(DeputyError):
    """A model request a running tool asked for on behalf of its source (an MCP server's
    ``sampling/createMessage``) was refused or failed; the message says why (the run's
    budget is spent, a hook denied it, the provider failed)."""


class HumanInputUnavailable(DeputyError):
    """A running tool asked for a person's input (an MCP server's ``elicitation/create``)
    and the run has none (no ``DelegationPolicy(human_input=...)``)."""


class McpError(DeputyError):
    """An MCP server could not be configured, started or called; ``server`` names it."""

    def __init__(self, message: str, *, server: str | None = None) -> None:
        super().__init__(message)
        self.server = server


class McpConfigError(McpError, ValueError):
    """An MCP server configuration is invalid; the message names the file, server and field.

    ``path`` is the ``.mcp.json`` file when the configuration came from one.
    """

    def __init__(
        self, message: str, *, server: str | None = None, path: str | Path | None = None
    ) -> None:
        super().__init__(message, server=server)
        self.path = None if path is None else Path(path)


class McpStartError(McpError):
    """An MCP server did not start: spawn failed, it exited, or it missed the start timeout.

    ``stderr`` holds the last lines the server wrote to its standard error.
    """

    def __init__(
        self, message: str, *, server: str | None = None, stderr: tuple[str, ...] = ()
    ) -> None:
        super().__init__(message, server=server)
        self.stderr = stderr


class McpToolError(McpError):
    """An MCP tool call failed; the agent loop returns it to the model as a tool error.

    ``tool`` is the server's own name for the tool.
    """

    def __init__(self, message: str, *, server: str | None = None, tool: str | None = None) -> None:
        super().__init__(message, server=server)
        self.tool = tool


class McpCallTimeoutError(McpToolError):
    """An MCP tool call did not answer within the call timeout."""


class McpServerGoneError(McpToolError):
    """The MCP server's connection ended (it crashed, was closed or broke the protocol)."""
