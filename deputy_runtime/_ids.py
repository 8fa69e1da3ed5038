"""Identifier minting: ``agent_<hex>``, ``run_<hex>``, ``delegation_<hex>`` and friends.

An id is 32 hex digits: a 64-bit counter scrambled by an odd multiplier (a bijection, so
ids never repeat within a process, and consecutive ids look unrelated even in their
first digits, which is what people and log views read), then a random 64-bit process
prefix drawn again in a forked child. No system call per id: this is on the delegation
hot path.
"""

from __future__ import annotations

import itertools
import os

__all__ = ["new_id"]

_MASK = 0xFFFFFFFFFFFFFFFF
_SCRAMBLE = 0x9E3779B97F4A7C15  # odd: multiplication modulo 2**64 is a bijection

_process = os.urandom(8).hex()
_counter = itertools.count(int.from_bytes(os.urandom(8), "big"))


def _reseed() -> None:
    global _process, _counter
    _process = os.urandom(8).hex()
    _counter = itertools.count(int.from_bytes(os.urandom(8), "big"))


os.register_at_fork(after_in_child=_reseed)


def new_id(prefix: str) -> str:
    """A fresh id such as ``run_3f2a...`` (32 hex digits)."""
    return f"{prefix}_{(next(_counter) * _SCRAMBLE) & _MASK:016x}{_process}"
