"""Implementations of the ``deputy-runtime`` subcommands, one module per job."""

from __future__ import annotations

import os
from typing import IO, Any


def silence_stream(stream: IO[Any]) -> None:
    """Point ``stream``'s descriptor at /dev/null once its reader is gone (``| head``).

    Later writes, including the interpreter's final flush, then succeed quietly instead
    of raising BrokenPipeError again.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
