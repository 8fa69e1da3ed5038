"""The web view's files (``/``, ``/app.js``, ``/app.css``, ``/favicon.ico``), read once.

They are static and hold no secret, so they are served without a token: the page asks
for the token, keeps it in ``sessionStorage`` (gone when the tab closes, never sent to
another origin) and sends it as ``Authorization: Bearer`` on every API call, the event
stream included (read with ``fetch`` streaming, since ``EventSource`` cannot set
headers). No external assets and no build step: it works offline. The headers forbid
every source but the server itself, inline scripts included, and framing.
"""

from __future__ import annotations

from importlib.resources import files

__all__ = ["PAGE_FILES", "PAGE_HEADERS"]

_STATIC = files(__package__).joinpath("static")

#: path -> (body, media type)
PAGE_FILES: dict[str, tuple[bytes, str]] = {
    "/": (_STATIC.joinpath("index.html").read_bytes(), "text/html; charset=utf-8"),
    "/app.js": (_STATIC.joinpath("app.js").read_bytes(), "text/javascript; charset=utf-8"),
    "/app.css": (_STATIC.joinpath("app.css").read_bytes(), "text/css; charset=utf-8"),
    # A 32x32 PNG: browsers ask for /favicon.ico and accept a PNG under that name.
    "/favicon.ico": (_STATIC.joinpath("favicon.png").read_bytes(), "image/png"),
}

PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
