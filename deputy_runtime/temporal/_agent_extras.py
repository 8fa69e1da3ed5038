"""The worker side of skills and MCP servers named by durable definitions.

A definition's skills and MCP tools travel by name (``AgentSpec.skills``,
``mcp_tools``, ``mcp_servers``); the worker resolves them. When a delegation starts, the
child workflow runs the ``deputy_agent_resolve`` activity once, and whichever worker
takes it answers with an :class:`AgentExtras`: the skills' system-prompt section, the
registry names to offer (the skills' tools, the chosen tools of the worker's *shared*
MCP servers, ``load_skill``) and the owned-resource factories of its *owned* MCP
servers. That answer is recorded in the delegation's history, so a replay offers the same
tools in the same order.

MCP modes on a worker:

* ``shared``: one session per server for the worker's lifetime, started when the worker
  opens (``async with activities:``) and stopped, its process reaped, when it closes. Its
  tools are looked up by their ``mcp__<server>__<tool>`` names like registry tools. A
  shared session whose server died is replaced at the next delegation's resolve.
* ``owned``: an owned resource named ``mcp:<server>``: a fresh session per delegation,
  made on the worker that takes the create activity and stopped by the cleanup. The
  server is a child process of that worker: when the worker dies, the server loses its
  stdin and exits with it, so a reclaim from another worker has nothing left to remove
  (it stops the session when it is still held there, which makes it idempotent).
* ``exclusive``: the shared session, used by one delegation at a time across every
  worker sharing the workers' lease backend: the delegation takes the lease
  ``mcp:<server>`` as an exclusive resource (``ExclusiveResourceSpec``) before its loop
  starts and releases it when the loop ends. A worker with exclusive servers needs a
  ``lease_backend``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

import msgspec
from temporalio import activity
from temporalio.exceptions import ApplicationError

from ..definitions import McpToolName, missing_mcp_server_message, split_tool_names
from ..runtime import DelegationResources
from ..skills import Skill, skill_load, skills_prompt_section, skills_tool
from ..tools import Tool
from ._resource_records import OwnedResourceRecord
from ._resource_values import ExclusiveResourceSpec
from ._resource_worker import OwnedResourceFactory
from ._values import AgentSpec

__all__ = [
    "AGENT_RESOLVE_ACTIVITY",
    "LOAD_SKILL",
    "MCP_RESOURCE_PREFIX",
    "AgentExtras",
    "WorkerExtras",
    "needs_extras",
    "skill_names",
]

AGENT_RESOLVE_ACTIVITY = "deputy_agent_resolve"
#: Owned MCP servers are owned resources named ``mcp:<server>``.
MCP_RESOURCE_PREFIX = "mcp:"
LOAD_SKILL = "load_skill"
_WORKER_MODES = ("shared", "owned", "exclusive")
_NON_ALNUM = re.compile(r"[^a-z0-9]+")


class AgentExtras(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """What a worker resolved of a definition's skills and MCP servers.

    Attributes:
        prompt: The skills section of the system prompt (``None``: no skills).
        tools: Registry names offered after the definition's own tools, in the order an
            in-process subagent gets them: the skills' tools, the shared MCP servers'
            tools, then ``load_skill``.
        owned: Owned-resource names (``mcp:<server>``) the delegation binds.
        leases: The leases of the exclusive MCP servers it uses (``mcp:<server>``).
    """

    prompt: str | None = None
    tools: tuple[str, ...] = ()
    owned: tuple[str, ...] = ()
    leases: tuple[ExclusiveResourceSpec, ...] = ()


def needs_extras(spec: AgentSpec) -> bool:
    """Whether ``spec`` names skills or MCP tools a worker has to resolve."""
    return bool(spec.skills or spec.mcp_tools or spec.mcp_servers)


def _wanted(spec: AgentSpec) -> tuple[McpToolName, ...]:
    """The MCP names ``spec`` selects: its ``mcp_tools`` (``mcp__<server>__<tool>`` or a
    whole server), then each of its ``mcp_servers`` as a whole server."""
    servers = tuple(f"mcp__{server}" for server in spec.mcp_servers)
    mcp, _ = split_tool_names((*spec.mcp_tools, *servers))
    return mcp


def _folded(name: str) -> str:
    """A tool name as the permission lists compare it (case and punctuation folded)."""
    return _NON_ALNUM.sub("_", name.lower())


def _fail(message: str) -> ApplicationError:
    return ApplicationError(message, type="AgentSetupError", non_retryable=True)


def _select(
    server: str, tools: Iterable[Tool], wanted: Iterable[McpToolName], agent: str
) -> tuple[Tool, ...]:
    """The tools of ``server`` that ``wanted`` names, as an in-process lead selects them.

    Raises:
        ValueError: A named tool is not offered by the server (listing those it offers).
    """
    from ..mcp import mcp_tool_names  # the MCP SDK is an extra: only when servers are set

    available = {t.name: t for t in tools}
    out: dict[str, Tool] = {}
    for name in wanted:
        if name.server != server:
            continue
        if name.tool is None:
            out.update(available)
            continue
        found = available.get(name.name)
        if found is None:
            found = available.get(mcp_tool_names(server, [name.tool])[name.tool])
        if found is None:
            names = ", ".join(sorted(available)) or "none"
            raise ValueError(
                f"Subagent '{agent}' names {name.name!r}, but MCP server {server!r} has no "
                f"such tool; its tools: {names}"
            )
        out[found.name] = found
    return tuple(out.values())


class WorkerExtras:
    """One worker's skills and MCP servers, and the activity resolving a definition's.

    Args:
        skills: Skills definitions may name (``Skill`` values or skill directories),
            keyed by their names.
        mcp: The worker's MCP servers as ``McpResource(server, mode=...)`` values (an
            exclusive one's ``wait`` is kept; its leases are the worker's).
        leases: Whether the worker has a lease backend (exclusive servers need one).

    Raises:
        ValueError: Two skills or servers share a name, or a server is exclusive on a
            worker without a lease backend.
        TypeError: An entry is of the wrong type.
    """

    def __init__(
        self,
        skills: Iterable[Skill | str | os.PathLike[str]],
        mcp: Iterable[Any],
        *,
        leases: bool = False,
    ) -> None:
        self.skills: dict[str, Skill] = {}
        for entry in skills:
            skill = entry if isinstance(entry, Skill) else skill_load(_path(entry))
            same = self.skills.get(skill.name)
            if same is not None and (same.path, same.instructions) == (
                skill.path,
                skill.instructions,
            ):
                continue  # one skill under two registry keys
            if same is not None:
                raise ValueError(f"DeputyActivities skills: two skills are named {skill.name!r}")
            self.skills[skill.name] = skill
        self.servers: dict[str, Any] = {}
        self.modes: dict[str, str] = {}
        self.waits: dict[str, bool] = {}
        for resource in mcp:
            name = getattr(resource, "mcp_server", None)
            if not isinstance(name, str):
                raise TypeError(
                    "DeputyActivities mcp entries must be McpResource values, got "
                    f"{type(resource).__name__}"
                )
            if name in self.servers:
                raise ValueError(f"DeputyActivities mcp: server {name!r} is given twice")
            if resource.name not in _WORKER_MODES:
                raise ValueError(
                    f"DeputyActivities mcp: server {name!r} has unknown mode {resource.name!r}"
                )
            if resource.name == "exclusive" and not leases:
                raise ValueError(
                    f"DeputyActivities mcp: server {name!r} is exclusive, which needs the "
                    "workers' lease backend: DeputyActivities(lease_backend=RedisLeases(...))"
                )
            self.servers[name] = resource.server
            self.modes[name] = resource.name
            self.waits[name] = bool(resource.describe().get("wait", False))
        self._pool: Any = None
        self._shared: dict[str, Any] = {}
        self._owned: dict[str, Any] = {}

    def owned_factories(self) -> dict[str, OwnedResourceFactory]:
        """The owned-resource factories of the owned MCP servers (``mcp:<server>``)."""
        return {
            f"{MCP_RESOURCE_PREFIX}{name}": OwnedResourceFactory(
                create=self._owned_create, reclaim=self._owned_reclaim
            )
            for name, mode in self.modes.items()
            if mode == "owned"
        }

    # -- lifetime ---------------------------------------------------------------------

    async def open(self) -> None:
        """Start the pool and every shared server (a server that cannot start raises
        ``McpStartError`` naming it, its process reaped)."""
        if not self.servers or self._pool is not None:
            return
        from ..mcp import McpServerPool

        pool = McpServerPool()
        await pool.__aenter__()
        self._pool = pool
        try:
            for name, mode in self.modes.items():
                if mode != "owned":
                    self._shared[name] = await pool.shared(self.servers[name])
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        """Stop every session the worker holds and wait until each process is reaped."""
        pool, self._pool = self._pool, None
        self._shared.clear()
        self._owned.clear()
        if pool is not None:
            await pool.__aexit__(None, None, None)

    def _open_pool(self) -> Any:
        if self._pool is None:
            raise _fail(
                "this worker's MCP servers are not running: open DeputyActivities with "
                "'async with activities:' around the worker"
            )
        return self._pool

    # -- lookups by the model-request and tool-call activities -------------------------

    def tool(self, name: str, skills: tuple[str, ...]) -> Tool | None:
        """The tool ``name`` for an agent with ``skills``: ``load_skill`` over those
        skills, one of their tools, or a shared MCP server's tool; ``None`` otherwise."""
        known = tuple(self.skills[s] for s in skills if s in self.skills)
        if known:
            if name == LOAD_SKILL:
                return skills_tool(known)
            for skill in known:
                for t in skill.tools:
                    if t.name == name:
                        return t
        if name.startswith("mcp__"):
            server = name.removeprefix("mcp__").split("__", 1)[0]
            session = self._shared.get(server)
            if session is not None:
                for t in session.tools():
                    if t.name == name:
                        return t  # type: ignore[no-any-return]
        return None

    # -- the resolve activity ----------------------------------------------------------

    @activity.defn(name=AGENT_RESOLVE_ACTIVITY)
    async def resolve(self, spec: AgentSpec) -> AgentExtras:
        """Resolve ``spec``'s skills and MCP names on this worker.

        Args:
            spec: The delegated definition.

        Returns:
            The prompt section, the registry names to offer and the owned MCP resources.

        Raises:
            ApplicationError: A skill or server is unknown here, or a named MCP tool is
                not offered by its server (not retried: the delegation fails with
                ``setup_error``).
        """
        missing = [s for s in spec.skills if s not in self.skills]
        if missing:
            known = ", ".join(sorted(self.skills)) or "none"
            raise _fail(
                f"Subagent {spec.name!r} names skill(s) {', '.join(missing)} this worker does "
                f"not have (its skills: {known})"
            )
        skills = tuple(self.skills[s] for s in spec.skills)
        hidden = {_folded(n) for n in spec.disallowed_tools}
        names = [t.name for s in skills for t in s.tools]
        owned: list[str] = []
        leases: list[ExclusiveResourceSpec] = []
        wanted = _wanted(spec)
        for server in dict.fromkeys(n.server for n in wanted):
            if server not in self.servers:
                raise _fail(missing_mcp_server_message(server, spec.name))
            if self.modes[server] == "owned":
                owned.append(f"{MCP_RESOURCE_PREFIX}{server}")
                continue
            if self.modes[server] == "exclusive":
                key = f"{MCP_RESOURCE_PREFIX}{server}"
                leases.append(ExclusiveResourceSpec(key=key, wait=self.waits[server]))
            from ..mcp import SessionState  # the MCP SDK is an extra: servers are set here

            session = self._shared.get(server)
            if session is None or session.state is not SessionState.READY:
                session = await self._open_pool().shared(self.servers[server])
                self._shared[server] = session
            try:
                names += [t.name for t in _select(server, session.tools(), wanted, spec.name)]
            except ValueError as exc:
                raise _fail(str(exc)) from exc
        if skills:
            names.append(LOAD_SKILL)
        return AgentExtras(
            prompt=skills_prompt_section(skills) or None,
            tools=tuple(n for n in dict.fromkeys(names) if _folded(n) not in hidden),
            owned=tuple(owned),
            leases=tuple(leases),
        )

    # -- owned MCP servers -------------------------------------------------------------

    async def _owned_create(self, record: OwnedResourceRecord) -> DelegationResources:
        server = record.name.removeprefix(MCP_RESOURCE_PREFIX)
        session = await self._open_pool().owned(self.servers[server])
        self._owned[record.resource_id] = session
        hidden = {_folded(n) for n in record.spec.disallowed_tools}
        try:
            chosen = _select(server, session.tools(), _wanted(record.spec), record.spec.name)
        except ValueError:
            await self._release(record.resource_id)
            raise
        tools = tuple(t for t in chosen if _folded(t.name) not in hidden)
        return DelegationResources(tools=tools, cleanup=lambda: self._release(record.resource_id))

    async def _release(self, resource_id: str) -> None:
        session = self._owned.pop(resource_id, None)
        if session is not None and self._pool is not None:
            await self._pool.release(session)

    async def _owned_reclaim(self, record: OwnedResourceRecord) -> None:
        # The session lives only on the worker that made it; a server whose worker died
        # exited with it. Stopping a session still held here is the only work left.
        await self._release(record.resource_id)


def _path(entry: object) -> str | os.PathLike[str]:
    if isinstance(entry, str | os.PathLike):
        return entry
    raise TypeError(
        f"DeputyActivities skills entries must be Skill values or skill directories, got "
        f"{type(entry).__name__}"
    )


def skill_names(skills: Iterable[Any]) -> tuple[str, ...]:
    """The names of ``skills`` (``Skill`` values or skill paths), loading paths."""
    return tuple(s.name if isinstance(s, Skill) else skill_load(s).name for s in skills)


# Resolve the annotations (and cache the decoder's type info on the class) here, at
# import, with this module's real globals: the first decode may otherwise happen inside
# the workflow sandbox, whose view of the modules cannot always resolve them.
msgspec.json.Decoder(AgentExtras)
