"""A settled delegation keeps its record and result, not its subagent: a long-lived lead
must not keep every child's chat, tools and turns alive."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path
from typing import Any

import pytest

from deputy_runtime import DelegationPolicy, DelegationResources
from deputy_runtime.chat import reply
from tests.runtime.helpers import definition, delegate, scripted_lead

pytestmark = pytest.mark.anyio


async def test_a_settled_subagent_is_released_but_its_record_stays(tmp_path: Path) -> None:
    children: list[weakref.ref[Any]] = []

    def resources(agent: Any, definition: Any, context: Any) -> DelegationResources:
        children.append(weakref.ref(agent))
        return DelegationResources(tools=())

    lead, _ = scripted_lead(
        {
            "lead": [delegate("worker", "first"), delegate("worker", "second"), reply("ok")],
            "worker": ["one", "two"],
        },
        [definition("worker")],
        tmp_path,
        delegation_policy=DelegationPolicy(resource_mode="owned", resources=resources),
    )
    result = await lead.run("go")
    assert result.stop_reason == "complete"
    gc.collect()
    assert len(children) == 2
    assert [ref() for ref in children] == [None, None]
    records = lead.list_subagents()
    assert [(r.status, r.task) for r in records] == [
        ("completed", "first"),
        ("completed", "second"),
    ]
    answers = [r.response if r else None for r in lead.get_subagent_results("worker")]
    assert answers == ["one", "two"]
