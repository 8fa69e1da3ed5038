"""LeadAgent: an Agent whose first tool delegates to subagents built from definitions."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

import msgspec

from .._ids import new_id
from ..chat import Chat, ContentToolRequest, model_alias_map
from ..definitions import AgentDefinition
from ..errors import CheckpointError, DefinitionError, RunActiveError, UsageLimitExceeded
from ..tools import Tool, invoke_tool, struct_validator, tool_validator
from ._agent import Agent
from ._checkpoint import check_key, decode_checkpoint
from ._compaction import Compaction
from ._context import RunContext
from ._coordinator import DelegationCoordinator
from ._events import EventSink, GuardedSink
from ._hooks import Hooks
from ._ledger import BudgetLedger
from ._parallel import ParallelResult, parallel_delegate
from ._permissions import DELEGATE_TOOL_NAME, Permissions, delegate_placeholder
from ._policy import DelegationPolicy
from ._records import SubagentRecord
from ._result import AgentResult
from ._resume import RunSaver, restorer
from ._routing import DELEGATE_DESCRIPTION, delegate_parameters, routing_section
from ._shared import check_ledger
from ._stores import CheckpointStore, check_run_id
from ._usage import UsageLimits
from ._usagetree import UsageNode, usage_tree

__all__ = ["LeadAgent"]


class _DelegateArgs(msgspec.Struct, forbid_unknown_fields=True):
    agent_name: str
    task: str
    constraints: list[str] | None = None
    deliverable: str | None = None
    stop_conditions: list[str] | None = None


_DELEGATE_VALIDATOR = struct_validator(_DelegateArgs, DELEGATE_TOOL_NAME, {})


class LeadAgent(Agent):
    """An agent that delegates to fresh subagents built from ``sub_agents`` definitions.

    ``sub_agents`` is a sequence of AgentDefinitions or the dict ``agent_definitions()``
    returns; names must be unique. The system prompt gains a generated routing section
    and the first tool is ``delegate_to_agent(agent_name, task, constraints?,
    deliverable?, stop_conditions?)``. Subagents are bounded by this agent's permissions
    (ceiling at start, live re-check per call), its remaining budget (reserved per
    delegation) and its hooks (tool events always forwarded). See DelegationPolicy for
    how they get tools. ``max_active_delegations`` caps how many of the model's
    delegations run at once (``1`` serialises them); the others wait ``queued``, holding
    no budget until they start. One whose slot frees after the lead was interrupted, or
    after the lead's run reached a limit, ends ``not_started`` without being built (a
    limit also gives the model the "Run limit reached" tool error). ``None`` (default):
    all of a turn's delegations at once. A delegation whose reservation grants it no
    requests, tokens or cost (running siblings hold the rest) ends ``not_started`` with
    that limit's stop reason before anything is built for it. ``async with lead:`` (or
    :meth:`aclose`) bounds the resource modes that have a lifecycle, such as attached MCP
    servers.

    The delegations themselves (records, slots, admission, budget reservation and
    settlement) belong to :attr:`delegations`, a
    :class:`~deputy_runtime.runtime.DelegationCoordinator`; this class routes the
    model's ``delegate_to_agent`` calls and ``parallel_delegate`` batches to it.

    Args:
        chat: The lead's conversation and provider.
        sub_agents: The definitions it may delegate to.
        tools: The lead's own tools, after ``delegate_to_agent``.
        system_prompt: Replaces the chat's system prompt when given.
        permissions: The lead's permissions (and its subagents' ceiling).
        usage_limits: Per-run limits, shared with the subagents by reservation.
        hooks: Host callbacks; tool events of subagents are forwarded to them.
        working_dir: The lead's (and its subagents') working directory.
        delegation_policy: How subagents get resources, people and models.
        delegation_scope: Host data handed to callbacks in ``DelegationContext.scope``.
        name: The lead's name.
        max_active_delegations: How many of a run's delegations run at once.
        model_aliases: Maps a definition's model (a Claude Code alias such as ``sonnet``,
            or any model id) to ``provider/model`` or a model id on this lead's provider;
            see :func:`deputy_runtime.chat.resolve_model`.
        shared_budget: A :class:`~deputy_runtime.runtime.BudgetLedger` shared with other
            leads (for example ``deputy_runtime.redis.RedisBudget``, opened by the host
            with ``async with``). Each delegation also reserves its share there, the
            tighter grant wins, the reservation is renewed while it runs (a lost one
            stops it ``lease_lost``) and its usage is settled exactly once. The lead's
            own model requests and tool calls are drawn from it too: each request is
            reserved before it is sent (the next one before a turn's delegations
            reserve, so the lead can always conclude) and settled with its usage. A
            ledger that cannot be reached fails new delegations (a tool error for the
            model) and the lead's next request (the run raises what the ledger raised).

    Raises:
        TypeError: ``delegation_policy``, ``delegation_scope`` or ``shared_budget`` has
            the wrong type.
        ValueError: ``max_active_delegations`` is not a positive int or ``None``.
        DefinitionError: A sub-agent entry is not an AgentDefinition, or names repeat.
    """

    __slots__ = (
        "_definitions",
        "_delegate_tool",
        "_open",
        "_own_tools",
        "delegation_policy",
        "delegation_scope",
        "delegations",
        "model_aliases",
        "shared_budget",
    )

    def __init__(
        self,
        chat: Chat,
        sub_agents: Sequence[AgentDefinition] | Mapping[str, AgentDefinition] = (),
        *,
        tools: Iterable[Tool] = (),
        system_prompt: str | None = None,
        permissions: Permissions | None = None,
        usage_limits: UsageLimits | None = None,
        hooks: Hooks | None = None,
        working_dir: str | os.PathLike[str] | None = None,
        delegation_policy: DelegationPolicy | None = None,
        delegation_scope: Mapping[str, Any] | None = None,
        name: str | None = "lead",
        max_active_delegations: int | None = None,
        model_aliases: Mapping[str, str] | None = None,
        shared_budget: BudgetLedger | None = None,
        compaction: Compaction | None = None,
    ) -> None:
        # Alias -> "provider/model" or a model id on the lead's provider: how definitions
        # saying "sonnet" (or another vendor's id) run under this lead's provider.
        self.model_aliases: Mapping[str, str] = model_alias_map(model_aliases)
        if delegation_policy is None:
            delegation_policy = DelegationPolicy()
        if not isinstance(delegation_policy, DelegationPolicy):
            raise TypeError("delegation_policy must be a DelegationPolicy")
        if delegation_scope is not None and not isinstance(delegation_scope, Mapping):
            raise TypeError("delegation_scope must be a mapping or None")
        if max_active_delegations is not None and (
            isinstance(max_active_delegations, bool)
            or not isinstance(max_active_delegations, int)
            or max_active_delegations < 1
        ):
            raise ValueError(
                "max_active_delegations must be a positive int or None, "
                f"got {max_active_delegations!r}"
            )
        self.delegation_policy = delegation_policy
        self.shared_budget = check_ledger(shared_budget)
        self.delegation_scope = dict(delegation_scope) if delegation_scope is not None else None
        self._definitions: dict[str, AgentDefinition] = {}
        self._open: contextlib.AsyncExitStack | None = None
        self.delegations = DelegationCoordinator(self, max_active=max_active_delegations)
        self._own_tools = tuple(tools)
        self._delegate_tool = _delegate_tool(())
        super().__init__(
            chat,
            tools=(),
            system_prompt=system_prompt,
            permissions=permissions,
            usage_limits=usage_limits,
            hooks=hooks,
            working_dir=working_dir,
            name=name,
            compaction=compaction,
        )
        values = sub_agents.values() if isinstance(sub_agents, Mapping) else sub_agents
        for definition in values:
            self._add_definition(definition)
        self._refresh()

    def _own_ledger(self) -> BudgetLedger | None:
        return self.shared_budget

    # -- sub-agent registry -------------------------------------------------------------

    def register_sub_agent(self, definition: AgentDefinition) -> None:
        """Add a definition.

        Args:
            definition: A definition whose name is not registered yet.

        Raises:
            DefinitionError: It is not an AgentDefinition, or its name is registered.
        """
        self._add_definition(definition)
        self._refresh()

    def available_sub_agents(self) -> list[str]:
        """Registered sub-agent names in registration order."""
        return list(self._definitions)

    def sub_agent(self, name: str) -> AgentDefinition:
        """The registered definition for ``name`` (trimmed, case-insensitive)."""
        return self._definitions[name.strip().lower()]

    def _add_definition(self, definition: AgentDefinition) -> None:
        if not isinstance(definition, AgentDefinition):
            raise DefinitionError(
                f"sub_agents entries must be AgentDefinition, got {type(definition).__name__}"
            )
        if definition.name in self._definitions:
            raise DefinitionError(
                f"Sub-agent {definition.name!r} is already registered; duplicate "
                "AgentDefinition routing keys are not allowed"
            )
        self._definitions[definition.name] = definition

    def _refresh(self) -> None:
        self._delegate_tool = _delegate_tool(tuple(self._definitions))
        self.set_tools((self._delegate_tool, *self._own_tools))
        self._prompt = self._compose_prompt()

    def _compose_prompt(self) -> str | None:
        """The base prompt followed by the generated routing section."""
        base = super()._compose_prompt()
        section = self._routing_section()
        return f"{base}\n\n{section}" if base else section

    def _routing_section(self) -> str:
        return routing_section((d.name, d.description) for d in self._definitions.values())

    # -- lifecycle ----------------------------------------------------------------------------

    async def __aenter__(self) -> LeadAgent:
        """Open the lead: enter every resource mode of its policy that has a lifecycle.

        Modes that are async context managers (an attached MCP server) live from here
        until :meth:`aclose`; a shared MCP server starts on first use and stops then.

        Returns:
            The lead itself.

        Raises:
            RuntimeError: The lead is already open.
        """
        if self._open is not None:
            raise RuntimeError(f"LeadAgent {self.name!r} is already open")
        stack = contextlib.AsyncExitStack()
        await stack.__aenter__()
        try:
            for mode in self.delegation_policy.resource_modes:
                if hasattr(mode, "__aenter__") and hasattr(mode, "__aexit__"):
                    await stack.enter_async_context(mode)  # type: ignore[arg-type]
        except BaseException:
            await stack.aclose()
            raise
        self._open = stack
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the lead: leave what :meth:`__aenter__` entered, last first (shielded).

        Call it from the task that opened the lead (what was entered holds task groups,
        which must be left where they were entered, so no cancel scope is put around
        them here: each mode stops its own resources shielded, with bounded waits). A
        lead that is not open is left as it is.
        """
        stack, self._open = self._open, None
        if stack is not None:
            await stack.aclose()

    @property
    def max_active_delegations(self) -> int | None:
        """How many of a run's delegations run at once (``None``: all)."""
        return self.delegations.max_active

    # -- running, saved and resumed ---------------------------------------------------------

    async def run(
        self,
        task: str,
        *,
        usage_limits: UsageLimits | None = None,
        on_event: EventSink | None = None,
        checkpoints: CheckpointStore | None = None,
        checkpoint_key: bytes | None = None,
        run_id: str | None = None,
    ) -> AgentResult:
        """Run the lead on ``task``; with ``checkpoints``, save it at every turn boundary.

        As :meth:`Agent.run <deputy_runtime.Agent.run>`. With a ``checkpoints`` store the
        run is saved under its run id before each model request and when it stops with
        its last turn answered (see :meth:`resume`); the checkpoint is deleted when the
        run ends, unless it ended ``interrupted``, ``provider_error`` or ``error``, the
        endings a resume may get past. A save that fails fails the run (it raises).

        Args:
            task: The user message that starts the run.
            usage_limits: This run's limits (default: the lead's ``usage_limits``).
            on_event: Receives every event, as for :meth:`Agent.run`.
            checkpoints: Where to save the run (``None``: it is not saved).
            checkpoint_key: An HMAC key (at least 16 bytes) the checkpoints are signed
                with; :meth:`resume` then needs the same key. ``None``: a checksum only.
            run_id: The run's id (default: a fresh one); it names the checkpoint.

        Returns:
            The run's result.

        Raises:
            RunActiveError: A run of this lead is already active.
            RequestLimitExceeded: A limit was reached with ``on_exceed="error"``.
            BudgetExceeded: Another limit was reached with ``on_exceed="error"``.
            ValueError: ``run_id`` is not a valid run id.
            TypeError: ``checkpoints`` is not a CheckpointStore, or the key is not bytes.
        """
        if checkpoints is None:
            if checkpoint_key is not None:
                raise TypeError("checkpoint_key needs a checkpoints store")
            if run_id is None:
                return await super().run(task, usage_limits=usage_limits, on_event=on_event)
            check_run_id(run_id)
            return await self._saved_run(task, usage_limits, on_event, None, run_id, None)
        _check_store(checkpoints)
        if run_id is None:
            run_id = new_id("run")
        check_run_id(run_id)
        saver = RunSaver(self.delegations, checkpoints, check_key(checkpoint_key), task)
        return await self._saved_run(task, usage_limits, on_event, saver, run_id, None)

    async def resume(
        self,
        run_id: str,
        *,
        store: CheckpointStore,
        checkpoint_key: bytes | None = None,
        on_event: EventSink | None = None,
    ) -> AgentResult:
        """Continue a run saved by :meth:`run` (in this process or a previous one).

        The checkpoint is validated (format version, run id, digest, structure; see
        :class:`~deputy_runtime.errors.CheckpointError`), then the run continues from its
        last turn boundary under its id: the conversation, the usage so far and the
        limits are the saved ones, so the run gets exactly the budget it had left (the
        result's usage is the whole run's, both parts). Delegations the checkpoint holds
        are never run again: their records and results are restored (see
        :meth:`list_subagents`) and the conversation already holds their outcomes. The
        lead takes the checkpoint's agent id. Saving continues in ``store``, with the
        same rules as :meth:`run`. A lead whose name is not the saved one refuses it.

        What a checkpoint cannot hold is this lead's: its provider, tools, definitions,
        hooks and permissions are the ones it was built with now.

        Args:
            run_id: The saved run's id.
            store: Where it was saved.
            checkpoint_key: The key it was saved with (``None``: saved without one).
            on_event: Receives every event, as for :meth:`Agent.run`.

        Returns:
            The run's result (its usage covers the saved part too).

        Raises:
            CheckpointError: There is no checkpoint for ``run_id``, it is damaged,
                tampered with, of another version, run or lead; the message says which.
            RunActiveError: A run of this lead is already active.
            ValueError: ``run_id`` is not a valid run id.
        """
        _check_store(store)
        check_run_id(run_id)
        key = check_key(checkpoint_key)
        if self.running:  # before the lead takes the checkpoint's identity
            raise RunActiveError(f"Agent {self.name or self.agent_id} already has an active run")
        data = await store.load(run_id)
        if data is None:
            raise CheckpointError(f"no checkpoint of run {run_id!r} in {store!r}", run_id=run_id)
        checkpoint = decode_checkpoint(data, run_id, key)
        if checkpoint.agent_name != self.name:
            raise CheckpointError(
                f"checkpoint of run {run_id!r}: agent_name is {checkpoint.agent_name!r}, but "
                f"this lead is {self.name!r}",
                run_id=run_id,
                field="agent_name",
            )
        limits = checkpoint.limits
        if checkpoint.seconds_left is not None:
            # Time passed while no process ran the run is not counted: it gets what it had.
            limits = msgspec.structs.replace(limits, max_seconds=checkpoint.seconds_left)
        self.agent_id = checkpoint.agent_id
        saver = RunSaver(self.delegations, store, key, checkpoint.task)
        restore = restorer(checkpoint, self.delegations, self._definitions)
        return await self._saved_run(checkpoint.task, limits, on_event, saver, run_id, restore)

    async def _saved_run(
        self,
        task: str,
        usage_limits: UsageLimits | None,
        on_event: EventSink | None,
        saver: RunSaver | None,
        run_id: str,
        restore: Callable[[RunContext], None] | None,
    ) -> AgentResult:
        sink = GuardedSink(on_event) if on_event is not None else None
        try:
            result = await self._run(
                task,
                usage_limits=usage_limits,
                emit=sink,
                run_id=run_id,
                boundary=saver,
                restore=restore,
            )
        except UsageLimitExceeded:
            if saver is not None:
                await saver.finished(run_id, None)
            raise
        if saver is not None:
            await saver.finished(run_id, result.stop_reason)
        if sink is not None and sink.error is not None:
            raise sink.error
        return result

    # -- records -----------------------------------------------------------------------------

    def list_subagents(self) -> list[SubagentRecord]:
        """One record per admitted delegation, in admission order."""
        return self.delegations.list_records()

    def usage_tree(self) -> UsageNode:
        """The cost tree of the lead's last run: its own usage and each delegation's.

        Every node carries its run's ``own`` usage and its ``subtree`` (own plus every
        descendant's); the ``own`` values add up to the root's ``subtree``, the run's
        ``AgentResult.usage``. ``UsageNode.to_json()`` gives it as JSON. For a
        ``parallel_delegate`` batch use ``usage_tree(batch.run, lead.list_subagents())``.

        Returns:
            The root node (the lead run) with its delegations below it.

        Raises:
            RuntimeError: The lead has not finished a run yet.
        """
        result = self.last_result
        if result is None:
            raise RuntimeError(
                f"LeadAgent {self.name or self.agent_id} has no finished run: call "
                "usage_tree() after run() returns"
            )
        return usage_tree(result, self.list_subagents())

    def get_subagent_results(
        self, agent_name: str | None = None, delegation_id: str | None = None
    ) -> list[AgentResult | None]:
        """Subagent results in admission order (``None`` where a delegation has none).

        Args:
            agent_name: Only delegations to this sub-agent (trimmed, case-insensitive).
            delegation_id: Only the delegation with this id.

        Returns:
            The matching results, in admission order.
        """
        return self.delegations.results(agent_name, delegation_id)

    # -- interrupts --------------------------------------------------------------------------

    def interrupt(self, reason: str = "interrupted") -> None:
        """Stop the lead and every unsettled subagent at their next boundary.

        Args:
            reason: Why; passed on to the subagents.
        """
        super().interrupt(reason)
        self.delegations.interrupt_all(reason)

    def interrupt_subagent(self, delegation_id: str, reason: str = "interrupted") -> bool:
        """Stop one subagent at its next boundary (or before it starts, if it has not).

        Args:
            delegation_id: The delegation to stop.
            reason: Why.

        Returns:
            ``False`` when no unsettled delegation has that id.
        """
        return self.delegations.interrupt(delegation_id, reason)

    # -- the delegate tool ----------------------------------------------------------------

    def _invoke(
        self,
        ctx: RunContext,
        tool: Tool,
        call: ContentToolRequest,
        call_id: str,
        delegation_id: str | None,
    ) -> Awaitable[Any]:
        # A plain function returning the coroutine: one frame less per in-flight call.
        if tool is not self._delegate_tool or delegation_id is None:
            return invoke_tool(tool, call.arguments)
        arguments = tool_validator(tool)(call.arguments)
        return self.delegations.delegate(ctx, self._definitions, arguments, call_id, delegation_id)

    def _call_delegation_id(self, tool_name: str) -> str | None:
        # Minted when the call is seen, so tool_start/tool_end and the record share it.
        return new_id("delegation") if tool_name == DELEGATE_TOOL_NAME else None

    # -- host-driven fan-out ----------------------------------------------------------------

    async def parallel_delegate(
        self,
        tasks: Mapping[str, str] | Sequence[tuple[str, str]],
        *,
        max_active: int = 4,
        usage_limits: UsageLimits | None = None,
        on_event: EventSink | None = None,
    ) -> ParallelResult:
        """Fan tasks out to stateless sub-agents (no tools; one request each, or one per
        allowed answer for a definition with an ``output_schema``).

        ``tasks`` maps definition names to tasks, or is a sequence of ``(name, task)``
        pairs so one definition can take many tasks. Everything is prepared before
        anything is dispatched; a failed responder never discards its siblings. The
        lead's conversation is untouched. See :class:`ParallelResult`.

        The batch runs under the lead's ``usage_limits``; ``usage_limits`` here can only
        tighten them: each limit is the tighter of the two (``None``, unlimited, loses
        to any number), and ``on_exceed`` is taken from the batch's limits when given.
        So a batch limit of 50 requests on a lead limited to 10 allows 10.

        Args:
            tasks: Definition name -> task, or ``(name, task)`` pairs.
            max_active: How many responders run at once.
            usage_limits: Limits that tighten the lead's for this batch.
            on_event: Receives the batch's events (as for :meth:`run`).

        Returns:
            Every responder's result, status and outcome, in input order.

        Raises:
            DefinitionError: A name is not a registered sub-agent.
            DelegationBindingError: A definition has tools, skills or mcp_servers, or a
                responder could not be built (nothing was dispatched).
            RunActiveError: A run or batch of this lead is active.
            ValueError: ``tasks`` is empty or ``max_active`` is not a positive int.
            TypeError: ``tasks`` has the wrong shape.
        """
        return await parallel_delegate(
            self,
            self.delegations,
            self._definitions,
            tasks,
            max_active=max_active,
            usage_limits=usage_limits,
            on_event=on_event,
        )


def _check_store(store: object) -> None:
    if not isinstance(store, CheckpointStore):
        raise TypeError(
            "checkpoints must be a CheckpointStore (save, load, delete, list), got "
            f"{type(store).__name__}"
        )


def _delegate_tool(names: tuple[str, ...]) -> Tool:
    parameters = delegate_parameters(names)
    return Tool(
        name=DELEGATE_TOOL_NAME,
        description=DELEGATE_DESCRIPTION,
        parameters=parameters,
        function=delegate_placeholder,
        # The enum guides the model; routing itself is by trimmed, lowercased name, so the
        # validator accepts any string and an unknown name gets the routing error.
        validator=_DELEGATE_VALIDATOR,
    )
