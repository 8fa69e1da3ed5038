"""Saving a lead run at its turn boundaries and putting a saved run back.

:class:`RunSaver` is the run's boundary callback: it builds the :class:`Checkpoint` from
the run's context and the lead's settled delegations of the run, encodes it and hands it
to the store. :func:`restorer` gives the callback that puts a checkpoint into a new run's
context and the saved delegations back into the lead's coordinator, before the run's
loop starts. What a checkpoint holds is decided in :mod:`._checkpoint`; when it is taken
is the loop's (``RunContext.boundary``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from ..definitions import AgentDefinition
from ._checkpoint import Checkpoint, encode_checkpoint
from ._context import RunContext
from ._coordinator import DelegationCoordinator
from ._states import StopReason
from ._stores import CheckpointStore

__all__ = ["KEPT_STOP_REASONS", "RunSaver", "restorer"]

#: How a run may end and leave its checkpoint to be resumed: stopped from outside, or
#: failed in a way a later attempt may get past. Every other ending deletes it: the run
#: is complete, or stopped where continuing would stop again (a limit, a hook).
KEPT_STOP_REASONS = frozenset({StopReason.INTERRUPTED, StopReason.PROVIDER_ERROR, StopReason.ERROR})


class RunSaver:
    """Saves a lead run's checkpoint to ``store`` at each of its turn boundaries.

    Args:
        coordinator: The lead's delegations.
        store: Where checkpoints are kept.
        key: The HMAC key, or ``None`` for a plain checksum.
        task: The task the run started with.
    """

    __slots__ = ("coordinator", "key", "store", "task")

    def __init__(
        self,
        coordinator: DelegationCoordinator,
        store: CheckpointStore,
        key: bytes | None,
        task: str,
    ) -> None:
        self.coordinator = coordinator
        self.store = store
        self.key = key
        self.task = task

    async def __call__(self, ctx: RunContext) -> None:
        """Save the run as it is now (at a boundary: nothing is in flight)."""
        entries = self.coordinator.settled_of(ctx.run_id)
        meter = ctx.meter
        checkpoint = Checkpoint(
            run_id=ctx.run_id,
            agent_id=ctx.owner.agent_id,
            agent_name=ctx.owner.name,
            task=self.task,
            limits=ctx.limits,
            usage=meter.snapshot(),
            requests=ctx.requests,
            seconds_left=ctx.seconds_left(),
            turns=tuple(ctx.turns),
            subagents=tuple(record for record, _ in entries),
            subagent_results=tuple(result for _, result in entries),
            delegation_counts=self.coordinator.run_counts(ctx.run_id),
            hook_errors=tuple(ctx.hook_errors),
            output_attempts=ctx.output_attempts,
            cost_warned=ctx.cost_warned,
            saved_at=time.time(),
        )
        await self.store.save(ctx.run_id, encode_checkpoint(checkpoint, self.key))

    async def finished(self, run_id: str, stop_reason: StopReason | None) -> None:
        """Delete the run's checkpoint unless the run may be resumed from it.

        Args:
            run_id: The run.
            stop_reason: How it ended (``None``: it raised, as ``on_exceed="error"`` does).
        """
        if stop_reason is None or stop_reason not in KEPT_STOP_REASONS:
            await self.store.delete(run_id)


def restorer(
    checkpoint: Checkpoint,
    coordinator: DelegationCoordinator,
    definitions: Mapping[str, AgentDefinition],
) -> Callable[[RunContext], None]:
    """The callback that puts ``checkpoint`` into the new run's context.

    The conversation, the usage so far, the request count, hook errors and the output
    contract's attempts go into the run; the settled delegations (records, results and
    ``max_delegations`` counts) go back into ``coordinator``, never to run again.
    """

    def restore(ctx: RunContext) -> None:
        usage = checkpoint.usage
        ctx.turns = list(checkpoint.turns)
        ctx.meter.restore(
            {
                "requests": usage.requests,
                "tool_calls": usage.tool_calls,
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "cached_input_tokens": usage.cached_input_tokens,
                "cost_usd": usage.cost_usd or 0.0,
            },
            usage.cost_usd is not None,
        )
        ctx.requests = checkpoint.requests
        ctx.hook_errors.extend(checkpoint.hook_errors)
        ctx.output_attempts = checkpoint.output_attempts
        ctx.cost_warned = checkpoint.cost_warned
        coordinator.restore(
            checkpoint.run_id,
            tuple(zip(checkpoint.subagents, checkpoint.subagent_results, strict=True)),
            definitions,
            checkpoint.delegation_counts,
        )

    return restore
