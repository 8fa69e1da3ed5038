"""Peer contenders for the full benchmark (need the ``bench`` extra)."""
