"""Owned resources and lease tokens of durable delegations on a real dev server, with the
worker in this process (the crash test, ``test_crash.py``, kills real worker processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from temporalio.client import Client

from deputy_runtime import (
    AgentDefinition,
    DelegationPolicy,
    DelegationResources,
    ExclusiveResource,
    OwnedResources,
    SharedResources,
    UsageLimits,
    tool,
)
from deputy_runtime.errors import DefinitionError, DelegationBindingError
from deputy_runtime.runtime import Lease
from deputy_runtime.temporal import (
    DeputyActivities,
    ExclusiveResourceSpec,
    LeadOutput,
    OwnedResourceFactory,
    OwnedResourceRecord,
    OwnedResourceSpec,
    current_delegation,
    deputy_worker,
    lead_input,
    start_lead,
)
from tests.temporal.helpers import assert_replays, run_workflow_ids

pytestmark = pytest.mark.anyio

REPO_ROOT = Path(__file__).resolve().parents[2]

NAMES = ("alpha", "beta")


def _definitions() -> list[AgentDefinition]:
    return [
        AgentDefinition(n, f"Works in a workspace ({n}).", "You work.", max_requests=3)
        for n in NAMES
    ]


class Workspaces:
    """An owned resource whose records are files: ``<root>/<resource>.json`` says who made
    it, and its ``state`` becomes ``cleaned`` or ``reclaimed`` when it is removed."""

    def __init__(self, root: Path, *, failing_cleanup: bool = False) -> None:
        self.root = root
        self.failing_cleanup = failing_cleanup
        root.mkdir(parents=True, exist_ok=True)

    def path(self, record: OwnedResourceRecord) -> Path:
        return self.root / (record.resource_id.replace("/", "_") + ".json")

    def write(self, record: OwnedResourceRecord, state: str) -> None:
        data = {"delegation": record.context.delegation_id, "agent": record.spec.name}
        self.path(record).write_text(json.dumps({**data, "state": state}))

    def create(self, record: OwnedResourceRecord) -> DelegationResources:
        self.write(record, "created")
        calls = self.root / "calls.log"

        @tool
        def note(text: str) -> str:
            """Write a note in the workspace."""
            context = current_delegation()
            assert context is not None
            with calls.open("a") as log:
                log.write(json.dumps([record.resource_id, context.delegation_id]) + "\n")
            return f"noted in {record.resource_id}"

        def cleanup() -> None:
            self.write(record, "cleaned")
            if self.failing_cleanup:
                raise RuntimeError("disk on fire")

        return DelegationResources(tools=(note,), cleanup=cleanup)

    def reclaim(self, record: OwnedResourceRecord) -> None:
        if self.path(record).exists():
            self.write(record, "reclaimed")

    def states(self) -> dict[str, dict[str, str]]:
        return {p.stem: json.loads(p.read_text()) for p in self.root.glob("*.json")}


async def _run(
    client: Client, task_queue: str, workspaces: Workspaces, tmp_path: Path
) -> tuple[str, LeadOutput]:
    factory = OwnedResourceFactory(create=workspaces.create, reclaim=workspaces.reclaim)
    activities = DeputyActivities(working_dir=tmp_path, owned_resources={"workspace": factory})
    request = lead_input(
        "Take notes",
        _definitions(),
        model="test",
        usage_limits=UsageLimits(max_requests=12),
        resources=(OwnedResourceSpec(name="workspace"),),
    )
    workflow_id = f"owned-{uuid.uuid4().hex}"
    async with deputy_worker(client, activities, task_queue=task_queue):
        handle = await start_lead(client, request, workflow_id=workflow_id, task_queue=task_queue)
        out = await handle.result()
    return workflow_id, out


async def test_owned_resources_are_made_used_and_cleaned_once_per_delegation(
    client: Client, task_queue: str, tmp_path: Path
) -> None:
    workspaces = Workspaces(tmp_path / "ws")
    workflow_id, out = await _run(client, task_queue, workspaces, tmp_path)
    assert out.result.stop_reason == "complete"
    records = out.subagents
    assert sorted(r.agent_name for r in records) == sorted(NAMES)
    assert {(r.status, r.cleanup_error) for r in records} == {("completed", None)}
    states = workspaces.states()
    # One resource per delegation, made for it and cleaned by its own worker.
    assert sorted(s["delegation"] for s in states.values()) == sorted(
        r.delegation_id for r in records
    )
    assert {s["state"] for s in states.values()} == {"cleaned"}
    # Each delegation's tool call ran on its own resource, seeing its own context.
    calls = [json.loads(line) for line in (workspaces.root / "calls.log").read_text().splitlines()]
    assert sorted(d for _, d in calls) == sorted(r.delegation_id for r in records)
    assert all(rid.startswith(f"{d}/workspace/") for rid, d in calls)
    for result in out.subagent_results:
        assert result is not None
        assert "noted in" in str(result.turns)
    assert await assert_replays(client, run_workflow_ids(workflow_id, out)) == 3


async def test_a_failing_cleanup_is_the_record_cleanup_error(
    client: Client, task_queue: str, tmp_path: Path
) -> None:
    workspaces = Workspaces(tmp_path / "ws", failing_cleanup=True)
    _, out = await _run(client, task_queue, workspaces, tmp_path)
    errors = {r.cleanup_error for r in out.subagents}
    assert errors == {"workspace: RuntimeError: disk on fire"}
    assert {r.status for r in out.subagents} == {"completed"}


async def test_an_unregistered_owned_resource_fails_the_delegation_at_setup(
    client: Client, task_queue: str, tmp_path: Path
) -> None:
    activities = DeputyActivities(working_dir=tmp_path)
    request = lead_input(
        "Take notes",
        _definitions()[:1],
        model="test",
        usage_limits=UsageLimits(max_requests=6),
        resources=(OwnedResourceSpec(name="workspace"),),
    )
    async with deputy_worker(client, activities, task_queue=task_queue):
        handle = await start_lead(
            client, request, workflow_id=f"owned-{uuid.uuid4().hex}", task_queue=task_queue
        )
        out = await handle.result()
    (record,) = out.subagents
    assert (record.status, record.stop_reason) == ("failed", "setup_error")
    assert record.error is not None
    assert "'workspace' is not registered on this worker" in record.error


# -- lead_input: what can cross the boundary --------------------------------------------


def test_lead_input_converts_policy_modes_to_specs() -> None:
    class Shared:  # a cross-process backend stand-in: only its type is looked at
        async def acquire(self, key: str, holder: str, *, wait: bool) -> Lease:
            raise NotImplementedError("never called: only the backend's type is looked at")

        async def hold(self, lease: Lease, on_lost: Callable[[str], None]) -> None: ...
        async def release(self, lease: Lease) -> None: ...

    policy = DelegationPolicy(
        resource_modes=(
            SharedResources(),
            ExclusiveResource("repo", wait=True, backend=Shared()),
        )
    )
    request = lead_input(
        "t",
        _definitions(),
        model="test",
        delegation_policy=policy,
        resources=(OwnedResourceSpec(name="workspace", agents=("alpha",)),),
    )
    assert request.resources == (
        ExclusiveResourceSpec(key="repo", wait=True),
        OwnedResourceSpec(name="workspace", agents=("alpha",)),
    )


@pytest.mark.parametrize(
    ("policy", "needle"),
    [
        (DelegationPolicy(resource_mode="exclusive", resource_key="k"), "in-process lease"),
        (
            DelegationPolicy(
                resource_modes=(OwnedResources(lambda a, d, c: DelegationResources()),)
            ),
            "OwnedResourceSpec",
        ),
        (DelegationPolicy(human_input=lambda q, c: "yes"), "human_input"),
    ],
)
def test_lead_input_refuses_what_cannot_travel(policy: DelegationPolicy, needle: str) -> None:
    with pytest.raises(DelegationBindingError, match=needle):
        lead_input("t", _definitions(), model="test", delegation_policy=policy)


def test_owned_resources_need_definitions_without_tools() -> None:
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    with_tools = [AgentDefinition("alpha", "A.", "You work.", tools=(ping,))]
    with pytest.raises(DefinitionError, match=r"'alpha'.*'workspace' supplies its tools"):
        lead_input("t", with_tools, model="test", resources=(OwnedResourceSpec(name="workspace"),))
    # Bound to another agent only: fine.
    lead_input(
        "t",
        with_tools,
        model="test",
        resources=(OwnedResourceSpec(name="workspace", agents=("beta",)),),
    )


def test_specs_check_their_fields() -> None:
    with pytest.raises(DelegationBindingError, match=r"OwnedResourceSpec\.name"):
        OwnedResourceSpec(name=" ")
    with pytest.raises(DelegationBindingError, match=r"ExclusiveResourceSpec\.wait"):
        ExclusiveResourceSpec(key="k", wait="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"OwnedResourceFactory\.reclaim"):
        OwnedResourceFactory(create=lambda r: None, reclaim=None)  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match=r"owned_resources\['w'\]"):
        DeputyActivities(owned_resources={"w": lambda r: None})  # type: ignore[dict-item]


@pytest.mark.parametrize(
    ("plugin", "needle"),
    [
        ("owned_resources = ['workspace']\n", "owned_resources must be a dict"),
        ("owned_resources = {'workspace': print}\n", "owned_resources['workspace']"),
    ],
)
def test_worker_cli_refuses_a_plugin_with_bad_owned_resources(
    temporal_address: str, tmp_path: Path, plugin: str, needle: str
) -> None:
    (tmp_path / "plugin.py").write_text(plugin)
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "a.yaml").write_text(
        "version: 1\nname: a\ndescription: A.\nprompt: You work.\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "deputy_runtime", "worker", "--temporal", temporal_address,
         "--agents", "agents", "--plugin", str(tmp_path / "plugin.py"),
         "--task-queue", f"bad-{uuid.uuid4().hex}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert needle in done.stderr
