"""MCP servers as tool sources: configs, sessions with guaranteed cleanup, and a pool.

Needs the ``mcp`` extra (``pip install '.[mcp]'`` from a checkout), the official MCP SDK.
See ``docs/mcp.md``.
"""

from .._extras import install_hint

try:
    import mcp as _sdk  # noqa: F401  (checked here so the error says what to install)
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("deputy_runtime.mcp needs the MCP SDK: " + install_hint("mcp")) from exc

from ._config import McpConfig, McpHttp, McpLimits, McpOAuth, McpStdio
from ._events import (
    McpEvent,
    McpEventSink,
    McpLogLevel,
    McpLogMessage,
    McpProgress,
    McpServerStarted,
    McpServerStopped,
    McpStderrLine,
    McpStopKind,
    McpToolCall,
    McpToolsChanged,
    McpToolUnavailable,
)
from ._mcpjson import load_mcp_config, parse_mcp_config
from ._names import expand_mcp_names, mcp_tool_names
from ._pool import McpServerPool
from ._prompts import McpPrompt, McpPromptArgument
from ._resource import MCP_MODES, McpResource
from ._server import McpServer
from ._session import McpSession, SessionState

__all__ = [
    "MCP_MODES",
    "McpConfig",
    "McpEvent",
    "McpEventSink",
    "McpHttp",
    "McpLimits",
    "McpLogLevel",
    "McpLogMessage",
    "McpOAuth",
    "McpProgress",
    "McpPrompt",
    "McpPromptArgument",
    "McpResource",
    "McpServer",
    "McpServerPool",
    "McpServerStarted",
    "McpServerStopped",
    "McpSession",
    "McpStderrLine",
    "McpStdio",
    "McpStopKind",
    "McpToolCall",
    "McpToolUnavailable",
    "McpToolsChanged",
    "SessionState",
    "expand_mcp_names",
    "load_mcp_config",
    "mcp_tool_names",
    "parse_mcp_config",
]
