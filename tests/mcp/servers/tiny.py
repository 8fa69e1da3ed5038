"""A minimal MCP server over stdio using only the standard library.

The SDK's import alone costs over a second of CPU, which two hundred servers cannot
afford in the lifecycle stress test; this one starts in a few milliseconds and speaks
just enough MCP (initialize, tools/list, tools/call, ping) for the SDK's client. Its
tools: ``whoami`` (pid and the token from argv), ``crash`` (exit at once, mid-call).
With ``PID_DIR`` set it creates a file named by its pid there when it starts; with
``NOISY`` set it first prints a line that is not JSON-RPC to stdout.
"""

import json
import os
import sys

TOKEN = sys.argv[1] if len(sys.argv) > 1 else ""
if os.environ.get("PID_DIR"):  # record that this server started, for the stress test
    open(os.path.join(os.environ["PID_DIR"], str(os.getpid())), "w").close()
TOOLS = [
    {
        "name": "whoami",
        "description": "This process's id and token.",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "crash",
        "description": "Exit at once.",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"readOnlyHint": True},
    },
]


if os.environ.get("NOISY"):  # a server that logs to stdout, breaking the framing
    print("tiny server says hello on stdout", flush=True)


def reply(msg_id: object, result: object) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": result}) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    if not line.strip():
        continue
    msg = json.loads(line)
    method, msg_id = msg.get("method"), msg.get("id")
    if msg_id is None:
        continue  # a notification
    if method == "initialize":
        reply(
            msg_id,
            {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "tiny", "version": "1"},
            },
        )
    elif method == "tools/list":
        reply(msg_id, {"tools": TOOLS})
    elif method == "tools/call" and msg["params"]["name"] == "crash":
        os._exit(5)
    elif method == "tools/call":
        text = json.dumps({"pid": os.getpid(), "token": TOKEN})
        reply(msg_id, {"content": [{"type": "text", "text": text}], "isError": False})
    elif method == "ping":
        reply(msg_id, {})
    else:
        err = {"code": -32601, "message": f"unknown method {method}"}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg_id, "error": err}) + "\n")
        sys.stdout.flush()
