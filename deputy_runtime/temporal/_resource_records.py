"""What an owned resource or a lease is, as recorded in a delegation's history."""

from __future__ import annotations

import msgspec

from ..chat import ToolSpec
from ..runtime import DelegationContext
from ._values import AgentSpec

__all__ = ["LeaseGrant", "OwnedPlacement", "OwnedResourceRecord"]


class OwnedResourceRecord(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """What an owned resource is, as recorded in the delegation's history: what its
    factory was given, and all a ``reclaim`` on another worker has to go on.

    Attributes:
        name: The factory's name.
        resource_id: ``<delegation id>/<name>/<generation>``: unique per resource made
            (a delegation whose worker died gets a fresh one, the next generation).
        spec: The subagent's definition.
        context: The delegation's ids (``working_dir`` is the worker's).
    """

    name: str
    resource_id: str
    spec: AgentSpec
    context: DelegationContext


class OwnedPlacement(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """Where an owned resource lives: the worker's own task queue, and its tools' specs."""

    record: OwnedResourceRecord
    queue: str
    worker: str
    tools: tuple[ToolSpec, ...] = ()


class LeaseGrant(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """A lease granted by the workers' backend (``None`` fields when busy)."""

    key: str
    holder: str
    token: int
    busy: str | None = None


# Resolve the annotations (and cache the decoders' type info on the classes) here, at
# import, with this module's real globals: the first decode may otherwise happen inside
# the workflow sandbox, whose view of the modules cannot always resolve them.
for _cls in (LeaseGrant, OwnedPlacement, OwnedResourceRecord):
    msgspec.json.Decoder(_cls)
