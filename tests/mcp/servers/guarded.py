"""An MCP server over streamable HTTP that needs an OAuth token, with its own token endpoint.

One process is both the resource server (the MCP endpoint ``/mcp``, which answers 401 with
the protected-resource metadata until a valid bearer token comes) and a minimal
authorization server for the ``client_credentials`` grant: its metadata at
``/.well-known/oauth-authorization-server`` and its token endpoint ``/token``, which issues
a token to the client ``CLIENT_ID`` presenting ``CLIENT_SECRET`` (HTTP basic or form
fields) and refuses anyone else. Every token issued is appended to ``TOKENS_FILE``, so a
test can count them. Run as ``python guarded.py PORT``.
"""

from __future__ import annotations

import base64
import os
import secrets
import sys
import time

import uvicorn
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

PORT = int(sys.argv[1])
BASE = f"http://127.0.0.1:{PORT}"
CLIENT_ID = os.environ["CLIENT_ID"]
CLIENT_SECRET = os.environ["CLIENT_SECRET"]
ISSUED: dict[str, float] = {}


class Verifier:
    """Accepts exactly the tokens this process issued, until they expire."""

    async def verify_token(self, token: str) -> AccessToken | None:
        expires = ISSUED.get(token)
        if expires is None or expires < time.time():
            return None
        return AccessToken(
            token=token, client_id=CLIENT_ID, scopes=["notes"], expires_at=int(expires),
            resource=f"{BASE}/mcp",
        )  # fmt: skip


server = MCPServer(
    "guarded",
    token_verifier=Verifier(),
    auth=AuthSettings(
        issuer_url=BASE,  # type: ignore[arg-type]  # pydantic converts the string
        resource_server_url=f"{BASE}/mcp",  # type: ignore[arg-type]
        required_scopes=["notes"],
    ),
)


@server.tool()
def whoami() -> str:
    """Say that the caller got in."""
    return "authorised"


async def metadata(request: Request) -> Response:
    return JSONResponse(
        {
            "issuer": BASE,
            "token_endpoint": f"{BASE}/token",
            "authorization_endpoint": f"{BASE}/authorize",
            "response_types_supported": ["code"],
            "grant_types_supported": ["client_credentials"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        }
    )


def _credentials(request: Request, form: dict[str, str]) -> tuple[str, str]:
    header = request.headers.get("authorization", "")
    if header.lower().startswith("basic "):
        user, _, password = base64.b64decode(header[6:]).decode().partition(":")
        return user, password
    return form.get("client_id", ""), form.get("client_secret", "")


async def token(request: Request) -> Response:
    form = {k: str(v) for k, v in (await request.form()).items()}
    client_id, client_secret = _credentials(request, form)
    if form.get("grant_type") != "client_credentials":
        return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
    if client_id != CLIENT_ID or not secrets.compare_digest(client_secret, CLIENT_SECRET):
        return JSONResponse({"error": "invalid_client"}, status_code=401)
    issued = secrets.token_hex(16)
    ISSUED[issued] = time.time() + 3600
    with open(os.environ["TOKENS_FILE"], "a", encoding="utf-8") as out:
        out.write(issued + "\n")
    return JSONResponse(
        {"access_token": issued, "token_type": "Bearer", "expires_in": 3600, "scope": "notes"}
    )


# Registered by call, not as decorators: the SDK's decorator is untyped.
server.custom_route("/.well-known/oauth-authorization-server", methods=["GET"])(metadata)
server.custom_route("/token", methods=["POST"])(token)

if __name__ == "__main__":
    uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=PORT, log_level="warning")
