"""STOP_REASONS is complete: the runtime suite observes only listed reasons, and the
recorder in ``conftest.py`` really sees what the runtime produces."""

from __future__ import annotations

from pathlib import Path

import pytest

from deputy_runtime.chat import reply
from deputy_runtime.runtime import STOP_REASONS, DelegationStatus, StopReason, delegation_status
from tests.runtime.helpers import OBSERVED_STOP_REASONS as OBSERVED
from tests.runtime.helpers import definition, delegate, scripted_lead

pytestmark = pytest.mark.anyio


def test_stop_reasons_are_the_enum_values_in_order() -> None:
    assert tuple(r.value for r in StopReason) == STOP_REASONS
    assert len(set(STOP_REASONS)) == len(STOP_REASONS)


@pytest.mark.parametrize("reason", list(StopReason))
def test_every_reason_maps_to_one_settled_status(reason: StopReason) -> None:
    status = delegation_status(reason)
    assert status not in (DelegationStatus.QUEUED, DelegationStatus.RUNNING)
    expected = {
        "complete": "completed",
        "error": "failed",
        "provider_error": "failed",
        "setup_error": "failed",
        "invalid_output": "failed",
        "not_started": "not_started",
        "delegation_limit": "not_started",
    }.get(reason.value, "stopped")
    assert status == expected


async def test_the_recorder_sees_run_and_delegation_reasons(tmp_path: Path) -> None:
    before = set(OBSERVED)
    lead, _ = scripted_lead(
        {"lead": [delegate("ghost"), reply("ok")]}, [definition("worker")], tmp_path
    )
    result = await lead.run("go")
    [record] = lead.list_subagents()
    assert result.stop_reason == "complete"
    assert record.stop_reason == "setup_error"
    assert {"complete", "setup_error"} <= set(OBSERVED)
    assert set(OBSERVED) - before <= set(STOP_REASONS)
