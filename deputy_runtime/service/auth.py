"""Bearer tokens: parsing the header and comparing in constant time.

Every presented token is compared with every configured one (no early exit), each with
:func:`hmac.compare_digest` over UTF-8 bytes, so the time taken says nothing about how
much of a token matched or which one did.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence

__all__ = ["MIN_TOKEN_CHARS", "bearer_token", "check_token_text", "match_token"]

#: Shorter tokens are refused at start-up: they could be guessed within the rate limit.
MIN_TOKEN_CHARS = 16


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer TOKEN`` header, or ``None``."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    token = token.strip()
    return token or None


def match_token(presented: str | None, tokens: Sequence[str]) -> int | None:
    """The index of the configured token ``presented`` equals, or ``None``."""
    if presented is None:
        return None
    given = presented.encode("utf-8", "surrogatepass")
    found: int | None = None
    for index, token in enumerate(tokens):
        if hmac.compare_digest(given, token.encode("utf-8")) and found is None:
            found = index
    return found


def check_token_text(token: str, source: str) -> str:
    """A configured token, stripped; refuses blank, short or non-printable ones."""
    token = token.strip()
    if len(token) < MIN_TOKEN_CHARS:
        raise ValueError(
            f"{source}: a token must be at least {MIN_TOKEN_CHARS} characters "
            f"(got {len(token)}); generate one with: python3 -c "
            "'import secrets; print(secrets.token_urlsafe(32))'"
        )
    if not token.isascii() or not token.isprintable() or " " in token:
        raise ValueError(f"{source}: a token must be printable ASCII without spaces")
    return token
