"""Resource modes of durable delegations, as data.

In-process, :class:`~deputy_runtime.DelegationPolicy` binds delegations to resources with
mode objects that hold callables and backends. Those cannot be recorded in a workflow's
history, so a durable run names its resources instead, and the workers hold the code:

* :class:`OwnedResourceSpec` names an owned-resource factory registered on every worker
  (``DeputyActivities(owned_resources={name: OwnedResourceFactory(...)})``).
* :class:`ExclusiveResourceSpec` names a lease key; the workers' ``lease_backend``
  (a cross-process one such as ``RedisLeases``) keeps the lease.
* Shared resources need no spec: a definition's tools are the worker's registry tools.

:func:`resource_specs` turns a policy's mode objects into specs where they can travel.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import msgspec

from ..errors import DefinitionError, DelegationBindingError
from ..runtime import (
    DelegationContext,
    DelegationPolicy,
    ExclusiveResource,
    InProcessLeases,
    OwnedResources,
    SharedResources,
)

__all__ = [
    "ExclusiveResourceSpec",
    "OwnedResourceSpec",
    "ResourceSpec",
    "ToolRoute",
    "applies_to",
    "check_owned",
    "resource_specs",
]


class _Named(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def tools(self) -> tuple[str, ...]: ...


class OwnedResourceSpec(msgspec.Struct, frozen=True, gc=False, kw_only=True, tag="owned"):
    """An owned resource made per delegation by the factory ``name`` on a worker.

    Attributes:
        name: The factory's name in the workers' ``owned_resources``.
        agents: The definitions it applies to (empty: every delegation of the lead).
            Their tools come from the factory, so they must list none themselves.
    """

    name: str
    agents: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_name("OwnedResourceSpec.name", self.name)
        _check_agents("OwnedResourceSpec.agents", self.agents)


class ExclusiveResourceSpec(msgspec.Struct, frozen=True, gc=False, kw_only=True, tag="exclusive"):
    """A lease on ``key`` each delegation holds while it runs, across every worker and lead
    sharing the workers' lease backend.

    Attributes:
        key: The resource key.
        wait: ``False``: a busy key fails the delegation (``setup_error``) at once;
            ``True``: the delegation waits until the key is free.
        agents: The definitions it applies to (empty: every delegation of the lead).
    """

    key: str
    wait: bool = False
    agents: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_name("ExclusiveResourceSpec.key", self.key)
        if not isinstance(self.wait, bool):
            raise DelegationBindingError(
                f"ExclusiveResourceSpec.wait must be a bool, got {self.wait!r}"
            )
        _check_agents("ExclusiveResourceSpec.agents", self.agents)


ResourceSpec = OwnedResourceSpec | ExclusiveResourceSpec


class ToolRoute(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """What a tool activity learns about the delegation calling it: its context (with
    the fencing token of its exclusive lease, if any) and its owned resources' ids."""

    context: DelegationContext
    resource_ids: tuple[str, ...] = ()


def applies_to(spec: ResourceSpec, agent_name: str) -> bool:
    """Whether ``spec`` binds delegations to ``agent_name``."""
    return not spec.agents or agent_name in spec.agents


def resource_specs(
    policy: DelegationPolicy | None, resources: Iterable[ResourceSpec] = ()
) -> tuple[ResourceSpec, ...]:
    """The resource specs of a durable run: ``policy``'s modes converted, then ``resources``.

    Args:
        policy: A delegation policy whose ``resource_modes`` are converted: shared
            modes need nothing, ``ExclusiveResource(key, wait, backend)`` becomes an
            :class:`ExclusiveResourceSpec` (the backend stays behind: the workers use
            theirs). Its limits travel apart (``_limits``); nothing else of the policy
            may be set.
        resources: Specs given directly.

    Returns:
        The specs, in order.

    Raises:
        DelegationBindingError: A mode or setting cannot cross the durable boundary,
            naming what to use instead.
    """
    specs: list[ResourceSpec] = []
    if policy is not None:
        if not isinstance(policy, DelegationPolicy):
            raise TypeError(
                f"delegation_policy must be a DelegationPolicy, got {type(policy).__name__}"
            )
        if policy.human_input is not None:
            raise DelegationBindingError(
                "delegation_policy.human_input: a handler cannot cross the durable "
                "boundary; pass lead_input(human_input=True) and answer the questions "
                "with answer_question (deputy_runtime.temporal)"
            )
        for field in ("chat",):
            if getattr(policy, field) is not None:
                raise DelegationBindingError(
                    f"delegation_policy.{field} is not supported on Temporal yet"
                )
        for mode in policy.resource_modes:
            specs.extend(_converted(mode))
    for spec in resources:
        if not isinstance(spec, OwnedResourceSpec | ExclusiveResourceSpec):
            raise TypeError(
                "resources entries must be OwnedResourceSpec or ExclusiveResourceSpec, got "
                f"{type(spec).__name__}"
            )
        specs.append(spec)
    return tuple(specs)


def check_owned(specs: Iterable[ResourceSpec], agents: Iterable[_Named]) -> None:
    """Refuse definitions listing tools where an owned resource supplies them.

    Raises:
        DefinitionError: Such a definition, naming it and the resource.
    """
    owned = [s for s in specs if isinstance(s, OwnedResourceSpec)]
    for agent in agents:
        for spec in owned:
            if applies_to(spec, agent.name) and agent.tools:
                raise DefinitionError(
                    f"Subagent {agent.name!r}: owned resource {spec.name!r} supplies its "
                    "tools, so its definition must list none"
                )


def _converted(mode: object) -> tuple[ResourceSpec, ...]:
    if isinstance(mode, SharedResources):
        return ()
    if isinstance(mode, ExclusiveResource):
        if isinstance(mode.backend, InProcessLeases):
            raise DelegationBindingError(
                f"ExclusiveResource({mode.key!r}): an in-process lease backend cannot "
                "keep a key exclusive across workers; give the workers a cross-process "
                "backend (DeputyActivities(lease_backend=RedisLeases(...))) and pass "
                "ExclusiveResource(key, backend=<that backend>) or ExclusiveResourceSpec(key=...)"
            )
        return (ExclusiveResourceSpec(key=mode.key, wait=mode.wait),)
    if isinstance(mode, OwnedResources):
        raise DelegationBindingError(
            "OwnedResources: a factory cannot cross the durable boundary; register it on "
            "the workers (DeputyActivities(owned_resources={name: OwnedResourceFactory(...)})) "
            "and pass OwnedResourceSpec(name=...) in lead_input(resources=...)"
        )
    raise DelegationBindingError(
        f"resource mode {type(mode).__name__} is not supported on Temporal: use "
        "SharedResources, ExclusiveResource, OwnedResourceSpec or ExclusiveResourceSpec"
    )


def _check_name(field: str, value: object) -> None:
    if not isinstance(value, str) or not value.strip():
        raise DelegationBindingError(f"{field} must be a non-blank string, got {value!r}")


def _check_agents(field: str, agents: object) -> None:
    if not isinstance(agents, tuple) or not all(isinstance(a, str) for a in agents):
        raise DelegationBindingError(f"{field} must be a tuple of agent names, got {agents!r}")
