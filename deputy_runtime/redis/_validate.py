"""Argument checks shared by the Redis leases, ledger and connection."""

from __future__ import annotations

import math
from urllib.parse import urlsplit

__all__ = ["check_name", "check_seconds", "check_url", "redacted"]

_MAX_NAME = 512


def check_name(what: str, value: object, *, colon: bool = True) -> str:
    """A key, holder, name or namespace: a non-empty str without control characters.

    Namespaces and budget names pass ``colon=False``: a colon in them could make the Redis
    keys of one namespace or budget equal to those of another (``ns:budget:N:holds``).
    """
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string, got {value!r}")
    if not colon and ":" in value:
        raise ValueError(f"{what} must not contain ':', got {value!r}")
    if len(value) > _MAX_NAME or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError(
            f"{what} must be at most {_MAX_NAME} characters without control characters, "
            f"got {value!r}"
        )
    return value


def check_seconds(what: str, value: object, *, zero: bool = False) -> float:
    """A finite number of seconds, greater than zero (or at least zero with ``zero``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what} must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        bound = ">= 0" if zero else "> 0"
        raise ValueError(f"{what} must be finite and {bound}, got {value!r}")
    return float(value)


def check_url(url: object) -> str:
    if not isinstance(url, str) or urlsplit(url).scheme not in ("redis", "rediss", "unix"):
        raise ValueError(f"url must be a Redis URL such as 'redis://127.0.0.1:6379/0', got {url!r}")
    return url


def redacted(url: str) -> str:
    """The URL without its password, for error messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    return parts._replace(netloc=f"***@{netloc}").geturl()
