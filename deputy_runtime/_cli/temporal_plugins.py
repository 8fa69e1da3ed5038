"""``--plugin`` for the Temporal commands: import a module, collect its ``temporal_tools``.

A plugin may ``register_provider`` when imported, and may define ``temporal_tools``: a list
of ``Tool`` objects (or a function returning one) that join the file tools in the tool
registry. Workers run those tools; ``run --temporal`` needs only their names, to read
the definitions that name them.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from ..tools import Tool

__all__ = ["PluginError", "plugin_tools"]


class PluginError(Exception):
    """A plugin that cannot be imported or defines something wrong; the message names it."""


def plugin_tools(target: str) -> list[Tool]:
    """Import ``target`` (a ``.py`` file or a dotted module name); its ``temporal_tools``."""
    module = _load_module(target)
    tools: Any = getattr(module, "temporal_tools", ())
    if callable(tools):
        tools = tools()
    try:
        found = list(tools)
    except TypeError:
        found = [tools]
    bad = [t for t in found if not isinstance(t, Tool)]
    if bad:
        raise PluginError(
            f"--plugin {target!r}: temporal_tools must be a list of Tool objects, "
            f"got {type(bad[0]).__name__}"
        )
    return found


def _load_module(target: str) -> Any:
    try:
        if target.endswith(".py"):
            path = Path(target)
            if not path.is_file():
                raise PluginError(f"--plugin {target!r}: no such file")
            spec = importlib.util.spec_from_file_location(f"deputy_plugin_{path.stem}", path)
            if spec is None or spec.loader is None:
                raise PluginError(f"--plugin {target!r}: not an importable Python file")
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
            return module
        return importlib.import_module(target)
    except PluginError:
        raise
    except Exception as exc:
        raise PluginError(f"--plugin {target!r} failed: {type(exc).__name__}: {exc}") from exc
