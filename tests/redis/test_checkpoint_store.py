"""RedisCheckpointStore on a real redis-server: the store protocol, and a lead run saved
in Redis by one lead and resumed by another."""

from __future__ import annotations

from pathlib import Path

import pytest

from deputy_runtime import AgentUsage, CheckpointError, CheckpointStore, CoordinationError
from deputy_runtime.chat import DEFAULT_SCRIPTED_USAGE, reply
from deputy_runtime.redis import RedisCheckpointStore, RedisConnection
from deputy_runtime.runtime import Event, StopReason, ToolStart
from tests.runtime.helpers import definition, delegate, scripted_lead

pytestmark = pytest.mark.anyio


async def test_save_load_delete_list(redis_url: str, namespace: str) -> None:
    async with RedisCheckpointStore(redis_url, namespace=namespace) as store:
        assert isinstance(store, CheckpointStore)
        assert await store.list() == []
        assert await store.load("run_a") is None
        binary = bytes(range(256))  # opaque bytes, not only text
        await store.save("run_b", b"second")
        await store.save("run_a", binary)
        assert await store.list() == ["run_a", "run_b"]
        assert await store.load("run_a") == binary
        await store.save("run_a", b"replaced")
        assert await store.load("run_a") == b"replaced"
        await store.delete("run_a")
        await store.delete("run_a")
        assert await store.list() == ["run_b"]
        with pytest.raises(ValueError, match="run_id must be"):
            await store.save("../x", b"x")
    # Another namespace sees none of it.
    async with RedisCheckpointStore(redis_url, namespace=namespace + "-other") as other:
        assert await other.list() == []


async def test_a_shared_connection_must_be_open(redis_url: str, namespace: str) -> None:
    connection = RedisConnection(redis_url)
    with pytest.raises(CoordinationError, match="not open"):
        async with RedisCheckpointStore(connection, namespace=namespace):
            pass
    async with connection, RedisCheckpointStore(connection, namespace=namespace) as store:
        await store.save("run_1", b"x")
        assert await store.load("run_1") == b"x"


async def test_a_run_saved_in_redis_is_resumed_by_another_lead(
    redis_url: str, namespace: str, tmp_path: Path
) -> None:
    agents = [definition("alpha")]
    async with RedisCheckpointStore(redis_url, namespace=namespace) as store:
        first, _ = scripted_lead(
            {"lead": [delegate("alpha", "A"), reply("never")], "alpha": ["alpha says"]},
            agents,
            tmp_path,
        )

        def on_event(event: Event) -> None:
            if isinstance(event, ToolStart):
                first.interrupt()

        stopped = await first.run("Go", on_event=on_event, checkpoints=store, run_id="run_r")
        assert stopped.stop_reason == StopReason.INTERRUPTED
        assert await store.list() == ["run_r"]

    async with RedisCheckpointStore(redis_url, namespace=namespace) as store:
        second, provider = scripted_lead({"lead": [reply("done")], "alpha": []}, agents, tmp_path)
        result = await second.resume("run_r", store=store)
        assert result.stop_reason == StopReason.COMPLETE
        one = DEFAULT_SCRIPTED_USAGE  # the resumed part: one lead request
        assert result.usage == stopped.usage + AgentUsage(
            requests=1, input_tokens=one.input_tokens, output_tokens=one.output_tokens
        )
        assert len(provider.requests_for("lead")) == 1
        assert second.list_subagents() == first.list_subagents()
        assert await store.list() == []
        with pytest.raises(CheckpointError, match="no checkpoint"):
            await second.resume("run_r", store=store)
