"""A ``--plugin`` for the crash test: the ``loopback`` provider (an OpenAI-compatible
server at ``$DEPUTY_TEST_LLM``) and the owned resource ``workspace``, whose records are
files under ``$DEPUTY_TEST_RESOURCES``: ``<resource>.json`` holds the delegation, the
worker's pid and a state, ``created`` then ``cleaned`` (by its own worker) or
``reclaimed`` (from another worker)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from deputy_runtime import DelegationResources, tool
from deputy_runtime.chat import OpenAICompatibleProvider, register_provider
from deputy_runtime.temporal import OwnedResourceFactory, OwnedResourceRecord


def _loopback(model: str, **options: Any) -> OpenAICompatibleProvider:
    return OpenAICompatibleProvider(model, base_url=os.environ["DEPUTY_TEST_LLM"], **options)


register_provider("loopback", _loopback, replace=True)


def _path(record: OwnedResourceRecord) -> Path:
    root = Path(os.environ["DEPUTY_TEST_RESOURCES"])
    return root / (record.resource_id.replace("/", "_") + ".json")


def _write(record: OwnedResourceRecord, state: str) -> None:
    data = {
        "delegation": record.context.delegation_id,
        "resource": record.resource_id,
        "pid": os.getpid(),
        "state": state,
    }
    path = _path(record)
    part = path.with_suffix(".part")
    part.write_text(json.dumps(data))
    part.replace(path)  # whole-file writes: a reader never sees half a record


def create(record: OwnedResourceRecord) -> DelegationResources:
    """Make the workspace: write its record, offer a ``note`` tool bound to it."""
    _write(record, "created")

    @tool
    def note(text: str) -> str:
        """Write a note in the workspace."""
        return f"noted in {record.resource_id} by {os.getpid()}"

    return DelegationResources(tools=(note,), cleanup=lambda: _write(record, "cleaned"))


def reclaim(record: OwnedResourceRecord) -> None:
    """Remove a workspace whose worker is gone (idempotent: only a record that exists)."""
    if _path(record).exists():
        _write(record, "reclaimed")


owned_resources = {"workspace": OwnedResourceFactory(create=create, reclaim=reclaim)}
