"""Keeping credentials out of everything a provider shows: reprs, error messages, bodies.

A provider knows its secrets: the API key, the ``user:password`` part and the query values
of its base URL, and the values of credential-looking headers it was given. A
:class:`Redactor` replaces each of them (and their percent-encoded and JSON-escaped
spellings) with ``***`` wherever they appear, before any truncation, so a server that
echoes the key back in an error body cannot leak it, not even in part.
"""

from __future__ import annotations

import base64
import json
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["MASK", "Redactor", "display_url"]

MASK = "***"
# Shorter values are not treated as secrets: masking every "a" in a message hides nothing
# worth hiding and makes the message unreadable.
_MIN_SECRET = 4
_SECRET_HEADER_WORDS = ("auth", "key", "token", "secret", "cookie", "password", "signature")


def display_url(url: str) -> str:
    """``url`` with its user info and every query value replaced by ``***``.

    All query values are masked, not just well-known names (``api-key``, ``key``, ``sig``):
    a gateway can call its credential anything, and a query value in a repr is never needed.
    """
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return MASK  # unparseable: show nothing rather than a credential
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rpartition('@')[2]}"
    query = parts.query
    if query:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
        query = "&".join(f"{urllib.parse.quote(k, safe='-_.')}={MASK}" for k, _ in pairs)
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def url_secrets(url: str) -> list[str]:
    """The credentials a URL carries: user info (also as Basic auth) and every query value."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return [url]
    found: list[str] = []
    if "@" in parts.netloc:
        userinfo = parts.netloc.rpartition("@")[0]
        user, _, password = userinfo.partition(":")
        for raw in (userinfo, user, password):
            found += [raw, urllib.parse.unquote(raw)]
        # HTTP clients send URL user info as a Basic authorization header.
        plain = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
        found.append(base64.b64encode(plain.encode()).decode())
    for _, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
        found.append(value)
        found.append(urllib.parse.quote(value, safe=""))
    return found


def header_secrets(headers: Mapping[str, str]) -> list[str]:
    """Values of headers whose names look like credentials (and their bare tokens)."""
    found: list[str] = []
    for name, value in headers.items():
        if any(word in name.lower() for word in _SECRET_HEADER_WORDS):
            found.append(value)
            scheme, _, token = value.partition(" ")
            if token and scheme.isalpha():
                found.append(token.strip())
    return found


class Redactor:
    """Replaces known secrets with ``***`` in text and in parsed JSON values."""

    __slots__ = ("_secrets",)

    def __init__(self, secrets: Iterable[str | None]) -> None:
        spellings: set[str] = set()
        for secret in secrets:
            if not secret or len(secret) < _MIN_SECRET:
                continue
            spellings.add(secret)
            spellings.add(urllib.parse.quote(secret, safe=""))
            spellings.add(urllib.parse.quote_plus(secret, safe=""))
            spellings.add(json.dumps(secret)[1:-1])  # as it appears inside a JSON string
            spellings.add(json.dumps(secret, ensure_ascii=False)[1:-1])
        # Longest first, so a secret that contains another is masked whole.
        self._secrets = tuple(
            sorted((s for s in spellings if len(s) >= _MIN_SECRET), key=len, reverse=True)
        )

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def text(self, text: str) -> str:
        """``text`` with every secret masked."""
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    def value(self, value: Any) -> Any:
        """A parsed JSON value with secrets masked in its strings (lists and dicts in place).

        Iterative, so a body nested as deeply as the JSON parser allows cannot exhaust
        the stack while being masked.
        """
        if not self._secrets:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, bytes | bytearray):
            return self.text(bytes(value).decode("utf-8", errors="replace"))
        if isinstance(value, tuple):
            value = list(value)
        stack = [value] if isinstance(value, list | dict) else []
        while stack:
            node = stack.pop()
            if isinstance(node, list):
                for index, item in enumerate(node):
                    if isinstance(item, str):
                        node[index] = self.text(item)
                    elif isinstance(item, list | dict):
                        stack.append(item)
                continue
            for key in list(node):
                item = node[key]
                if isinstance(item, str):
                    item = self.text(item)
                elif isinstance(item, list | dict):
                    stack.append(item)
                masked = self.text(key) if isinstance(key, str) else key
                if masked != key:
                    del node[key]
                node[masked] = item
        return value

    def excerpt(self, data: bytes | str, limit: int = 200) -> str:
        """The start of a response for an error message: masked first, then cut, quoted."""
        text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
        return repr(self.text(text)[:limit])

    def scrub(self, error: BaseException) -> None:
        """Mask secrets in an error's message, its ``body`` and its notes, in place."""
        if not self._secrets:
            return
        error.args = tuple(self.value(a) if isinstance(a, str) else a for a in error.args)
        if hasattr(error, "body"):
            error.body = self.value(error.body)
        notes = getattr(error, "__notes__", None)
        if notes:
            error.__notes__ = [self.text(n) for n in notes]
