"""Skills and MCP servers named by definitions, resolved by a worker, on a real dev server.

The MCP servers are the real stdio test servers of ``tests/mcp/servers`` run as
subprocesses of the worker (in this process); each run is compared with the in-process
run of the same task on a recording copy of the offline ``test`` model.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from deputy_runtime import (
    AgentDefinition,
    AgentResult,
    DelegationPolicy,
    LeadAgent,
    Skill,
    UsageLimits,
    chat,
    tool,
)
from deputy_runtime.chat import ContentToolResult, ModelRequest, TestProvider, register_provider
from deputy_runtime.mcp import McpResource, McpServer, McpStdio
from deputy_runtime.temporal import (
    DeputyActivities,
    LeadOutput,
    deputy_worker,
    lead_input,
    start_lead,
)
from tests.mcp._mcp_helpers import SERVERS, process_left
from tests.temporal.helpers import assert_replays, chain_run_ids, run_workflow_ids

pytestmark = pytest.mark.anyio

TASK = "Use your skills and tools."
PROMPT = "You help with books."


class Recording(TestProvider):
    """The ``test`` model, remembering what each subagent request offered."""

    __test__ = False
    __slots__ = ("seen",)

    def __init__(self, seen: list[tuple[str | None, tuple[str, ...]]], model: str) -> None:
        super().__init__(model=model, name="recorded")
        self.seen = seen

    async def complete(self, request: ModelRequest) -> Any:
        if (request.system_prompt or "").startswith(PROMPT):
            self.seen.append((request.system_prompt, tuple(t.name for t in request.tools)))
        return await super().complete(request)


def _recorded() -> list[tuple[str | None, tuple[str, ...]]]:
    seen: list[tuple[str | None, tuple[str, ...]]] = []
    register_provider("recorded", lambda model, **_: Recording(seen, model), replace=True)
    return seen


def _skills(root: Path) -> tuple[Skill, str]:
    """A skill bringing a tool (a ``Skill`` value) and one read from a directory."""

    @tool(read_only=True)
    def shelve(title: str) -> str:
        """Say where a book goes."""
        return f"{title} goes on shelf {len(title)}"

    librarian = Skill(
        name="librarian",
        description="Shelving books.",
        instructions="Shelve each book you look up.",
        tools=(shelve,),
    )
    directory = root / "citing"
    directory.mkdir()
    (directory / "SKILL.md").write_text(
        "---\nname: citing\ndescription: Citing books with their year.\n---\n"
        "Cite a book as Title (year).\n"
    )
    return librarian, str(directory)


def _reader(mode: str = "shared", pid_dir: Path | None = None) -> McpResource:
    env = {"PID_DIR": str(pid_dir)} if pid_dir is not None else {}
    script = "tiny" if pid_dir is not None else "reader"
    config = McpStdio(command=sys.executable, args=(str(SERVERS / f"{script}.py"),), env=env)
    return McpResource(McpServer(script, config), mode=mode)


def _comparable(result: AgentResult | None) -> tuple[object, ...]:
    assert result is not None
    return (result.agent_name, result.response, result.turns, result.usage, result.stop_reason)


async def _durable(
    client: Client, task_queue: str, definitions: list[AgentDefinition], model: str
) -> tuple[str, LeadOutput]:
    workflow_id = f"lead-{uuid.uuid4().hex}"
    request = lead_input(TASK, definitions, model=model, usage_limits=UsageLimits(max_requests=12))
    handle = await start_lead(client, request, workflow_id=workflow_id, task_queue=task_queue)
    return workflow_id, await handle.result()


async def test_skills_and_a_shared_mcp_server_match_the_in_process_run(
    client: Client, task_queue: str, tmp_path: Path
) -> None:
    librarian, citing = _skills(tmp_path)
    definition = AgentDefinition(
        "helper",
        "Looks books up.",
        PROMPT,
        skills=(librarian, citing),
        mcp_tools=("mcp__reader__lookup", "mcp__reader__shout.loud"),
        max_requests=3,
    )
    seen = _recorded()
    lead = LeadAgent(
        chat("recorded/x"),
        [definition],
        usage_limits=UsageLimits(max_requests=12),
        working_dir=tmp_path,
        delegation_policy=DelegationPolicy(resource_modes=(_reader(),)),
    )
    async with lead:
        await lead.run(TASK)
    (expected,) = lead.get_subagent_results()
    in_process = list(seen)
    seen.clear()

    activities = DeputyActivities(working_dir=tmp_path, skills=(librarian, citing), mcp=[_reader()])
    async with activities, deputy_worker(client, activities, task_queue=task_queue):
        workflow_id, out = await _durable(client, task_queue, [definition], "recorded/x")
        assert await assert_replays(client, run_workflow_ids(workflow_id, out)) == 2

    (record,) = out.subagents
    assert record.status == "completed", record.error
    assert _comparable(out.subagent_results[0]) == _comparable(expected)
    # The same prompt (with the skills section) and the same tools, in the same order.
    assert seen == in_process
    prompt, offered = seen[0]
    assert prompt is not None
    assert "- citing: Citing books with their year." in prompt
    assert offered == ("shelve", "mcp__reader__lookup", "mcp__reader__shout_loud", "load_skill")
    child = out.subagent_results[0]
    assert child is not None
    results = [c for t in child.turns for c in t.contents]
    values = [getattr(c, "value", None) for c in results]
    assert {"result": "TEST"} in values  # the MCP call ran on the worker's shared server
    assert "test goes on shelf 4" in values  # the skill's own tool
    assert any(isinstance(v, str) and v.startswith("Cite a book as") for v in values)


async def test_owned_mcp_servers_start_one_per_delegation_and_are_all_reaped(
    client: Client, task_queue: str, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    names = ("one", "two", "three")
    definitions = [
        AgentDefinition(
            n, f"Asks who it is ({n}).", PROMPT, mcp_tools=("mcp__tiny__whoami",), max_requests=2
        )
        for n in names
    ]
    activities = DeputyActivities(working_dir=tmp_path, mcp=[_reader("owned", pids)])
    async with activities, deputy_worker(client, activities, task_queue=task_queue):
        workflow_id, out = await _durable(client, task_queue, definitions, "test")
        assert await assert_replays(client, run_workflow_ids(workflow_id, out)) == 4
    assert [r.status for r in out.subagents] == ["completed"] * 3
    started = sorted(int(p.name) for p in pids.iterdir())
    assert len(started) == 3  # one server per delegation, none at worker start
    assert not [pid for pid in started if process_left(pid)]  # each exited and reaped
    # Each delegation talked to its own server.
    answers: set[object] = set()
    for result in out.subagent_results:
        assert result is not None
        (reply,) = [c for t in result.turns for c in t.contents if isinstance(c, ContentToolResult)]
        answers.add(reply.value)
    assert len(answers) == 3
    assert all(r.cleanup_error is None for r in out.subagents)


async def test_a_skill_or_server_the_worker_lacks_fails_the_delegation_at_setup(
    client: Client, task_queue: str, tmp_path: Path
) -> None:
    definitions = [
        AgentDefinition(
            "nomcp", "Uses a missing server.", PROMPT, mcp_tools=("mcp__gone__x",), max_requests=2
        ),
        AgentDefinition(
            "noskill",
            "Uses a missing skill.",
            PROMPT,
            skills=(Skill(name="absent", description="Not here.", instructions="None."),),
            max_requests=2,
        ),
    ]
    activities = DeputyActivities(working_dir=tmp_path)
    async with activities, deputy_worker(client, activities, task_queue=task_queue):
        workflow_id, out = await _durable(client, task_queue, definitions, "test")
        assert await assert_replays(client, run_workflow_ids(workflow_id, out)) == 3
    errors = {r.agent_name: (r.status, r.stop_reason, r.error or "") for r in out.subagents}
    assert errors["nomcp"][:2] == ("failed", "setup_error")
    assert "no MCP server named 'gone'" in errors["nomcp"][2]
    assert errors["noskill"][:2] == ("failed", "setup_error")
    assert "absent" in errors["noskill"][2]
    assert all(r.usage.requests == 0 for r in out.subagents)


async def test_an_exclusive_mcp_server_needs_the_workers_lease_backend() -> None:
    with pytest.raises(ValueError, match=r"'reader' is exclusive, which needs the workers' lease"):
        DeputyActivities(mcp=[_reader("exclusive")])


async def test_a_resolved_definition_is_carried_over_continue_as_new(
    client: Client, task_queue: str, tmp_path: Path
) -> None:
    librarian, citing = _skills(tmp_path)
    definition = AgentDefinition(
        "helper",
        "Looks books up.",
        PROMPT,
        skills=(librarian, citing),
        mcp_tools=("mcp__reader__shout.loud",),
        max_requests=3,
    )
    seen = _recorded()
    activities = DeputyActivities(working_dir=tmp_path, skills=(librarian, citing), mcp=[_reader()])
    outputs: list[LeadOutput] = []
    async with activities, deputy_worker(client, activities, task_queue=task_queue):
        for threshold in (10_000, 10):
            request = lead_input(
                TASK,
                [definition],
                model="recorded/x",
                usage_limits=UsageLimits(max_requests=12),
                continue_as_new_after=threshold,
            )
            handle = await start_lead(
                client, request, workflow_id=f"lead-{uuid.uuid4().hex}", task_queue=task_queue
            )
            outputs.append(await handle.result())
            (child,) = run_workflow_ids(handle.id, outputs[-1])[1:]
            runs = await chain_run_ids(client, child)
            assert (len(runs) > 1) == (threshold == 10), runs
            assert await assert_replays(client, [child], run_ids=runs) == len(runs)
    unchained, chained = outputs
    assert _comparable(chained.subagent_results[0]) == _comparable(unchained.subagent_results[0])
    # Every request of both runs had one skills section and the same tools: the continued
    # runs did not resolve (and append) again.
    assert len(seen) == 4
    assert len(set(seen)) == 1
    prompt = seen[0][0]
    assert prompt is not None
    assert prompt.count("# Skills") == 1


async def test_a_durable_runs_server_that_samples_gets_a_clear_refusal(
    client: Client, task_queue: str, tmp_path: Path
) -> None:
    # Durable tool calls run in activities, outside any agent run: a server's sampling
    # request made meanwhile is refused (nobody is charged), and the run goes on.
    definition = AgentDefinition(
        "sampler",
        "Asks a server that samples.",
        PROMPT,
        mcp_tools=("mcp__probe__sample_loop",),
        max_requests=2,
    )
    config = McpStdio(command=sys.executable, args=(str(SERVERS / "probe.py"),))
    activities = DeputyActivities(
        working_dir=tmp_path, mcp=[McpResource(McpServer("probe", config))]
    )
    async with activities, deputy_worker(client, activities, task_queue=task_queue):
        _, out = await _durable(client, task_queue, [definition], "test")
    (record,) = out.subagents
    assert record.status == "completed", record.error
    child = out.subagent_results[0]
    assert child is not None
    (result,) = [c for t in child.turns for c in t.contents if isinstance(c, ContentToolResult)]
    assert result.error is None, result.error
    assert result.value["answers"] == []
    refusal = result.value["refusal"]
    assert refusal.startswith("MCP client deputy-runtime cannot answer sampling/createMessage")
    assert "durable run" in refusal
    assert child.usage.requests == 2  # its own two requests, no sampling
