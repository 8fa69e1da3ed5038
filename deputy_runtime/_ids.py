"""Identifier minting: ``agent_<hex>``, ``run_<hex>``, ``delegation_<hex>`` and friends."""

from __future__ import annotations

import os

__all__ = ["new_id"]


def new_id(prefix: str) -> str:
    """A fresh random id such as ``run_3f2a...`` (128 random bits, hex)."""
    return f"{prefix}_{os.urandom(16).hex()}"
