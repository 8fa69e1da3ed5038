"""A stdio MCP server, standard library only, whose one tool never answers.

``wait`` is read-only and never replies, so a subagent calling it stays mid-call until
it is cancelled. With ``PID_DIR`` set the server creates a file named by its pid there
when it starts, so a test can find it and check it is gone afterwards. It exits at the
end of stdin, as a well-behaved stdio server does.
"""

import json
import os
import sys

if os.environ.get("PID_DIR"):
    open(os.path.join(os.environ["PID_DIR"], str(os.getpid())), "w").close()
TOOLS = [
    {
        "name": "wait",
        "description": "Wait for something that never comes.",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"readOnlyHint": True},
    }
]


def reply(msg_id: object, result: object) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": result}) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    if not line.strip():
        continue
    msg = json.loads(line)
    method, msg_id = msg.get("method"), msg.get("id")
    if msg_id is None or method == "tools/call":
        continue  # a notification, or the call that is never answered
    if method == "initialize":
        reply(
            msg_id,
            {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "hang", "version": "1"},
            },
        )
    elif method == "tools/list":
        reply(msg_id, {"tools": TOOLS})
    else:
        reply(msg_id, {})
