"""Saving a lead run at its turn boundaries and resuming it in a new lead.

A run is cut off the way a crash cuts it (cancelled mid-turn, so nothing is saved after
its last boundary), or interrupted; a new LeadAgent on a new provider then resumes it
from the store. The scripted provider of the second part has no replies for what the
first part did, so a delegation run again, or a lead request sent again, fails the test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from deputy_runtime import (
    AgentUsage,
    CheckpointError,
    HookEvent,
    HookInput,
    Hooks,
    LeadAgent,
    RunActiveError,
    UsageLimits,
)
from deputy_runtime.chat import (
    DEFAULT_SCRIPTED_USAGE,
    AssistantTurn,
    Chat,
    ContentToolResult,
    ModelRequest,
    ScriptedProvider,
    StreamDelta,
    reply,
)
from deputy_runtime.runtime import (
    DelegationStatus,
    Event,
    FileCheckpointStore,
    ModelRequestEvent,
    StopReason,
    ToolStart,
    decode_checkpoint,
)
from tests.runtime.helpers import definition, delegate, outcome, scripted_lead

pytestmark = pytest.mark.anyio

AGENTS = [definition("alpha"), definition("beta")]
U = DEFAULT_SCRIPTED_USAGE


async def _hang(request: ModelRequest) -> str:
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


async def _first_part(
    store: FileCheckpointStore, tmp_path: Path, limits: UsageLimits
) -> tuple[LeadAgent, str]:
    """Lead delegates to alpha (completes), then to beta, which hangs: cut off there."""
    lead, _ = scripted_lead(
        {"lead": [delegate("alpha", "A"), delegate("beta", "B")], "alpha": ["alpha says"],
         "beta": [_hang]},
        AGENTS,
        tmp_path,
        usage_limits=limits,
    )  # fmt: skip
    started = anyio.Event()

    def on_event(event: Event) -> None:
        if isinstance(event, ToolStart) and event.arguments.get("agent_name") == "beta":
            started.set()

    async with anyio.create_task_group() as tg:

        async def run() -> None:
            await lead.run("Do both", on_event=on_event, checkpoints=store, run_id="run_part1")

        tg.start_soon(run)
        await started.wait()
        tg.cancel_scope.cancel()  # as a crash would: nothing is saved after this
    return lead, "run_part1"


async def test_resume_after_cut_off_keeps_records_and_exact_budget(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path / "ck")
    first, run_id = await _first_part(store, tmp_path, UsageLimits(max_requests=20))
    data = await store.load(run_id)
    assert data is not None
    saved = decode_checkpoint(data, run_id)
    # Saved before the lead's second request: one lead request and alpha's one.
    assert saved.usage.requests == 2
    assert [r.agent_name for r in saved.subagents] == ["alpha"]
    alpha_before = first.list_subagents()[0]

    lead, provider = scripted_lead(
        {"lead": [delegate("beta", "B"), reply("all done")], "alpha": [], "beta": ["beta says"]},
        AGENTS,
        tmp_path,
    )
    result = await lead.resume(run_id, store=store)
    assert result.stop_reason == StopReason.COMPLETE
    assert result.run_id == run_id
    assert result.response == "all done"
    records = lead.list_subagents()
    assert [r.agent_name for r in records] == ["alpha", "beta"]
    assert records[0] == alpha_before  # restored exactly, not run again
    assert records[1].status == DelegationStatus.COMPLETED
    assert lead.get_subagent_results("alpha")[0] is not None
    assert provider.requests_for("alpha") == []
    # Usage after resume = usage at the checkpoint + the rest: two lead requests and
    # beta's one, and the lead's second delegate call.
    rest = AgentUsage(
        requests=3,
        tool_calls=1,
        input_tokens=3 * U.input_tokens,
        output_tokens=3 * U.output_tokens,
        cost_usd=None if U.cost_usd is None else 3 * U.cost_usd,
    )
    assert saved.usage.tool_calls == 1
    assert result.usage == saved.usage + rest
    assert result.usage.requests == 5
    tree = lead.usage_tree()
    assert tree.subtree == result.usage
    assert [c.agent_name for c in tree.children] == ["alpha", "beta"]
    # The resumed model saw alpha's outcome from the first part.
    first_request = provider.requests_for("lead")[0]
    tool_result = first_request.turns[-1].contents[0]
    assert isinstance(tool_result, ContentToolResult)
    assert outcome(tool_result)["answer"] == "alpha says"
    assert await store.list() == []  # completed: nothing left to resume


async def test_max_requests_is_honoured_across_both_parts(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path / "ck")
    await _first_part(store, tmp_path, UsageLimits(max_requests=5))
    # The new lead's own limits must not matter: the saved ones (5, 2 used) apply.
    lead, provider = scripted_lead(
        {"lead": [delegate("beta", "B"), delegate("beta", "again"), reply("never sent")],
         "alpha": [], "beta": ["beta says"]},
        AGENTS,
        tmp_path,
        usage_limits=UsageLimits(max_requests=100),
    )  # fmt: skip
    result = await lead.resume("run_part1", store=store)
    # 2 before the cut; then lead, beta, lead (whose second beta call is refused) = 5.
    assert result.usage.requests == 5
    assert result.stop_reason == StopReason.REQUEST_LIMIT
    assert result.limits.max_requests == 5
    statuses = [(r.agent_name, r.status) for r in lead.list_subagents()]
    assert statuses == [("alpha", DelegationStatus.COMPLETED), ("beta", DelegationStatus.COMPLETED)]
    # The second beta call met the spent budget: refused, never admitted or run.
    refused = result.turns[-1].contents[0]
    assert isinstance(refused, ContentToolResult)
    assert refused.error is not None
    assert "limit" in refused.error.lower()
    assert len(provider.requests_for("beta")) == 1
    assert len(provider.requests_for("lead")) == 2


async def test_interrupted_run_keeps_its_answered_turn(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path / "ck")
    lead, _ = scripted_lead(
        {"lead": [delegate("alpha", "A"), reply("never")], "alpha": ["alpha says"]},
        AGENTS,
        tmp_path,
    )

    def on_event(event: Event) -> None:
        if isinstance(event, ToolStart):
            lead.interrupt("host stop")

    first = await lead.run("Go", on_event=on_event, checkpoints=store, run_id="run_int")
    assert first.stop_reason == StopReason.INTERRUPTED
    assert await store.list() == ["run_int"]  # kept: an interrupted run may be resumed
    saved = decode_checkpoint(await store.load("run_int") or b"", "run_int")
    assert saved.turns[-1].role == "user"  # the turn's answer is in the checkpoint
    assert len(saved.subagents) == 1

    again, provider = scripted_lead({"lead": [reply("resumed")]}, AGENTS, tmp_path)
    result = await again.resume("run_int", store=store)
    assert result.stop_reason == StopReason.COMPLETE
    assert result.response == "resumed"
    assert len(again.list_subagents()) == 1
    assert again.list_subagents()[0] == lead.list_subagents()[0]
    assert provider.requests_for("lead")[0].turns == saved.turns


async def test_resume_refuses_missing_and_foreign_checkpoints(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path / "ck")
    lead, _ = scripted_lead({"lead": []}, AGENTS, tmp_path)
    with pytest.raises(CheckpointError, match="no checkpoint of run 'run_none'"):
        await lead.resume("run_none", store=store)
    await _first_part(store, tmp_path, UsageLimits())
    other = LeadAgent(lead.chat, AGENTS, working_dir=tmp_path, name="other")
    with pytest.raises(CheckpointError, match="agent_name is 'lead'") as caught:
        await other.resume("run_part1", store=store)
    assert caught.value.field == "agent_name"
    key = b"k" * 32
    with pytest.raises(CheckpointError, match="not signed with a key"):
        await lead.resume("run_part1", store=store, checkpoint_key=key)
    with pytest.raises(ValueError, match="run_id must be"):
        await lead.resume("../etc/passwd", store=store)


async def test_keyed_checkpoints_need_their_key(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path / "ck")
    key = b"0123456789abcdef-key"
    lead, _ = scripted_lead(
        {"lead": [delegate("alpha", "A"), reply("never")], "alpha": ["alpha says"]},
        AGENTS,
        tmp_path,
    )

    def on_event(event: Event) -> None:
        if isinstance(event, ToolStart):
            lead.interrupt()

    await lead.run("Go", on_event=on_event, checkpoints=store, checkpoint_key=key, run_id="r1")
    again, _ = scripted_lead({"lead": [reply("ok")]}, AGENTS, tmp_path)
    with pytest.raises(CheckpointError, match="signed with a key"):
        await again.resume("r1", store=store)
    with pytest.raises(CheckpointError, match="another key"):
        await again.resume("r1", store=store, checkpoint_key=b"another key of 16+ bytes")
    result = await again.resume("r1", store=store, checkpoint_key=key)
    assert result.stop_reason == StopReason.COMPLETE


async def test_a_limit_ending_deletes_the_checkpoint(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path / "ck")
    lead, _ = scripted_lead(
        {"lead": [delegate("alpha", "A"), reply("x")], "alpha": ["a"]},
        AGENTS,
        tmp_path,
        usage_limits=UsageLimits(max_requests=1),
    )
    result = await lead.run("Go", checkpoints=store)
    assert result.stop_reason == StopReason.REQUEST_LIMIT
    assert await store.list() == []


class _KeyedProvider:
    """A provider holding an API key, as real ones do; it answers from a script."""

    def __init__(self, inner: ScriptedProvider, api_key: str) -> None:
        self.inner = inner
        self.api_key = api_key
        self.name = "keyed"
        self.model = "keyed-1"

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        return await self.inner.complete(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta | AssistantTurn]:
        yield await self.complete(request)

    def with_model(self, model: str) -> _KeyedProvider:
        return self


async def test_no_secret_reaches_the_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-test-SECRET-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("DEPUTY_TEST_TOKEN", secret + "-env")
    scripted = ScriptedProvider({"lead": [delegate("alpha", "A"), reply("x")], "alpha": ["a"]})
    lead = LeadAgent(Chat(_KeyedProvider(scripted, secret)), AGENTS, working_dir=tmp_path)
    captured: list[bytes] = []

    class Spy(FileCheckpointStore):
        async def save(self, run_id: str, data: bytes) -> None:
            captured.append(data)
            await super().save(run_id, data)

    def on_event(event: Event) -> None:
        if isinstance(event, ToolStart):
            lead.interrupt()  # the checkpoint stays, with the delegation's result

    await lead.run("Go", checkpoints=Spy(tmp_path / "ck"), on_event=on_event)
    assert len(captured) == 2  # before the first request, and the answered turn
    for data in captured:
        assert secret.encode() not in data
        assert b"api_key" not in data
        assert b"keyed-1" not in data  # not even the provider's identity


async def test_the_time_limit_left_is_what_the_resumed_run_gets(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path / "ck")
    lead, _ = scripted_lead(
        {"lead": [delegate("alpha", "A"), reply("never")], "alpha": ["a"]},
        AGENTS,
        tmp_path,
        usage_limits=UsageLimits(max_seconds=300),
    )

    def on_event(event: Event) -> None:
        if isinstance(event, ToolStart):
            lead.interrupt()

    await lead.run("Go", on_event=on_event, checkpoints=store, run_id="run_t")
    saved = decode_checkpoint(await store.load("run_t") or b"", "run_t")
    assert saved.seconds_left is not None
    assert 0 < saved.seconds_left <= 300
    again, _ = scripted_lead({"lead": [reply("ok")]}, AGENTS, tmp_path)
    result = await again.resume("run_t", store=store)
    assert result.limits.max_seconds == saved.seconds_left


async def test_resume_refuses_a_busy_lead_without_taking_its_identity(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path / "ck")
    await _first_part(store, tmp_path, UsageLimits())
    lead, _ = scripted_lead({"lead": [_hang]}, AGENTS, tmp_path)
    own_id = lead.agent_id
    requested = anyio.Event()

    def on_event(event: Event) -> None:
        if isinstance(event, ModelRequestEvent):
            requested.set()

    async def busy() -> None:
        await lead.run("busy", on_event=on_event)

    async with anyio.create_task_group() as tg:
        tg.start_soon(busy)
        await requested.wait()
        with pytest.raises(RunActiveError):
            await lead.resume("run_part1", store=store)
        assert lead.agent_id == own_id
        tg.cancel_scope.cancel()


async def test_the_prompt_hooks_do_not_run_again_on_resume(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path / "ck")
    await _first_part(store, tmp_path, UsageLimits())
    prompts: list[str | None] = []
    hooks = Hooks()

    def submitted(data: HookInput) -> None:
        prompts.append(data.prompt)

    hooks.add(HookEvent.UserPromptSubmit, submitted)
    lead, _ = scripted_lead(
        {"lead": [delegate("beta", "B"), reply("ok"), reply("next ok")], "beta": ["b"]},
        AGENTS,
        tmp_path,
        hooks=hooks,
    )
    result = await lead.resume("run_part1", store=store)
    assert result.stop_reason == StopReason.COMPLETE
    assert prompts == []  # "Do both" was submitted in the first part
    await lead.run("next")  # a new run's prompt is submitted as always
    assert prompts == ["next"]


async def test_a_failed_save_fails_the_run(tmp_path: Path) -> None:
    class FullDisk(FileCheckpointStore):
        async def save(self, run_id: str, data: bytes) -> None:
            raise OSError(28, "No space left on device")

    lead, provider = scripted_lead({"lead": [reply("never")]}, AGENTS, tmp_path)
    with pytest.raises(OSError, match="No space"):
        await lead.run("Go", checkpoints=FullDisk(tmp_path / "ck"))
    assert provider.requests_for("lead") == []  # nothing was sent unprotected
    assert lead.last_result is not None
    assert lead.last_result.stop_reason == StopReason.ERROR
