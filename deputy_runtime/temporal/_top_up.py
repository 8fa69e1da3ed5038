"""A durable delegation draws more budget from its lead, as an in-process one does.

In one process a delegation that used up its fair share calls its lead's
``Meter.top_up`` directly. A durable delegation's lead is another workflow, so the same
step is a signal round trip: the child signals its lead workflow a :class:`TopUpAsk`
(the field and the terms from its own ``Meter.refill_terms``), the lead answers it with
its meter's ``top_up`` on the delegation's live reservation (one workflow task, so the
grant is as atomic as in-process) and signals back a :class:`TopUpReply` with the
field's new limit, or ``None`` when nothing could be granted. The child waits for the
reply (``workflow.wait_condition``: no timer, no activity), raises its own limit and
goes on. Both signals are in the histories, so a replay takes the same grants.
"""

from __future__ import annotations

import contextlib

import msgspec
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ..runtime import Meter, Reservation

__all__ = ["TOP_UP_REPLY_SIGNAL", "TOP_UP_SIGNAL", "LeadTopUp", "TopUpAsk", "TopUpReply", "grant"]

#: Signal from a delegation's workflow to its lead: draw more of one limit field.
TOP_UP_SIGNAL = "deputy_top_up"
#: Signal from the lead to the delegation's workflow: the answer to one ask.
TOP_UP_REPLY_SIGNAL = "deputy_top_up_reply"


class TopUpAsk(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """One top-up asked of the lead: ``Meter.top_up``'s arguments, plus the ask's number
    (unique within the asking run) so its reply is recognised."""

    delegation_id: str
    field: str
    excess: float
    need: float
    number: int


class TopUpReply(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """The lead's answer: the field's new limit, or ``None`` when nothing was granted."""

    number: int
    limit: float | None


class LeadTopUp:
    """A delegation workflow's side: asks its lead and waits for the answer.

    Only a fair-share delegation asks (one whose limits the lead carved out as a share;
    host-given limits are never topped up, in-process neither).
    """

    def __init__(self, delegation_id: str) -> None:
        self._delegation_id = delegation_id
        self._asked = 0
        self._replies: dict[int, float | None] = {}

    def reply(self, reply: TopUpReply) -> None:
        """Record the lead's answer (the reply signal's handler)."""
        self._replies[reply.number] = reply.limit

    async def __call__(self, meter: Meter, field: str) -> bool:
        """Ask the lead for more of ``field`` and raise ``meter``'s limit by the grant.

        Args:
            meter: The delegation's meter (at its limit ``field``).
            field: The limit field reached.

        Returns:
            Whether the lead granted more.
        """
        parent = workflow.info().parent
        assert parent is not None, "a delegation's workflow is always a child of its lead"
        excess, need = meter.refill_terms(field)
        self._asked += 1
        number = self._asked
        lead = workflow.get_external_workflow_handle(parent.workflow_id)
        await lead.signal(
            TOP_UP_SIGNAL,
            TopUpAsk(
                delegation_id=self._delegation_id,
                field=field,
                excess=excess,
                need=need,
                number=number,
            ),
        )
        await workflow.wait_condition(lambda: number in self._replies)
        limit = self._replies.pop(number)
        if limit is None:
            return False
        meter.set_limit(field, limit)
        return True


async def grant(meter: Meter, reservation: Reservation | None, ask: TopUpAsk) -> None:
    """The lead's side: top up the delegation's reservation and signal the answer back.

    Args:
        meter: The lead's meter.
        reservation: The asking delegation's live reservation (``None`` once it
            settled: nothing is granted).
        ask: The delegation's ask.
    """
    limit: float | None = None
    if reservation is not None and meter.top_up(
        reservation, ask.field, excess=ask.excess, need=ask.need
    ):
        limit = getattr(reservation.limits, ask.field)
    child = workflow.get_external_workflow_handle(
        f"{workflow.info().workflow_id}/{ask.delegation_id}"
    )
    # A delegation that ended meanwhile (cancelled while it waited) has no one to read
    # the answer; its reservation is released with it, so nothing is held for it.
    with contextlib.suppress(Exception):
        await child.signal(TOP_UP_REPLY_SIGNAL, TopUpReply(number=ask.number, limit=limit))
