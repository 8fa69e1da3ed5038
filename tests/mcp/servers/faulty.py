"""An MCP server that can be told to crash, hang or misbehave, written with the MCP SDK.

``FAULT`` in the environment chooses a start-up fault: ``exit`` (exit before the
handshake), ``hang`` (never answer the handshake), ``stubborn`` (ignore SIGTERM and the
end of stdin, so only SIGKILL ends it; SIGTERM is noted on stderr).
"""

from __future__ import annotations

import os
import signal
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

FAULT = os.environ.get("FAULT", "")
server = MCPServer("faulty")
SAFE = ToolAnnotations(read_only_hint=True)


@server.tool(annotations=SAFE)
def crash(code: int = 3) -> str:
    """Exit the whole process at once, mid-call."""
    print(f"crashing with {code}", file=sys.stderr, flush=True)
    os._exit(code)


@server.tool(annotations=SAFE)
def hang() -> str:
    """Never return (blocks the server's event loop)."""
    while True:
        time.sleep(3600)


@server.tool(annotations=SAFE)
def big(size: int) -> str:
    """A text result of ``size`` characters."""
    return "x" * size


@server.tool(annotations=SAFE)
def fail(message: str) -> str:
    """Raise, so the result is an MCP error result (isError)."""
    raise RuntimeError(message)


@server.tool(annotations=SAFE)
def ok() -> str:
    """Answer at once."""
    return "ok"


def _stubborn() -> None:
    def noted(signum: int, frame: object) -> None:
        print("got SIGTERM, ignoring it", file=sys.stderr, flush=True)

    signal.signal(signal.SIGTERM, noted)


if __name__ == "__main__":
    print(f"faulty server starting (fault={FAULT or 'none'})", file=sys.stderr, flush=True)
    if FAULT == "exit":
        print("exiting before the handshake", file=sys.stderr, flush=True)
        sys.exit(7)
    if FAULT == "hang":
        while True:
            time.sleep(3600)
    if FAULT == "stubborn":
        _stubborn()
        server.run()
        while True:  # stdin closed: a well-behaved server would exit here
            time.sleep(3600)
    server.run()
