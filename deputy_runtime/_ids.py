"""Identifier minting: ``agent_<hex>``, ``run_<hex>``, ``delegation_<hex>`` and friends.

An id is 32 hex digits: a random 64-bit process prefix and a 64-bit counter. That is as
unique as a random UUID within and across processes (the prefix is drawn again in a
forked child) and costs no system call per id, which matters on the delegation hot path.
"""

from __future__ import annotations

import itertools
import os

__all__ = ["new_id"]

_prefix = os.urandom(8).hex()
_counter = itertools.count(int.from_bytes(os.urandom(4), "big"))


def _reseed() -> None:
    global _prefix, _counter
    _prefix = os.urandom(8).hex()
    _counter = itertools.count(int.from_bytes(os.urandom(4), "big"))


os.register_at_fork(after_in_child=_reseed)


def new_id(prefix: str) -> str:
    """A fresh id such as ``run_3f2a...`` (32 hex digits)."""
    return f"{prefix}_{_prefix}{next(_counter) & 0xFFFFFFFFFFFFFFFF:016x}"
