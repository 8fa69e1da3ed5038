"""invoke_tool: validation before the call, sync/async/threaded functions, errors."""

from __future__ import annotations

import threading
from typing import Annotated, Any, Literal

import anyio
import msgspec
import pytest

from deputy_runtime.errors import ToolArgumentError
from deputy_runtime.tools import Tool, invoke_tool, tool

pytestmark = pytest.mark.anyio


class Item(msgspec.Struct):
    name: str
    qty: int = 1


@tool
def order(
    items: list[Item],
    speed: Literal["slow", "fast"] = "slow",
    note: Annotated[str, msgspec.Meta(max_length=5)] | None = None,
) -> str:
    """Place an order."""
    return f"{speed}:{','.join(f'{i.name}x{i.qty}' for i in items)}:{note}"


async def test_valid_call_converts_nested_structs() -> None:
    result = await invoke_tool(order, {"items": [{"name": "a"}, {"name": "b", "qty": 2}]})
    assert result == "slow:ax1,bx2:None"


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({}, "argument 'items': missing required argument"),
        ({"items": "x"}, "argument 'items': expected array, got string"),
        ({"items": [{"qty": 1}]}, "argument 'items[0].name': missing required argument"),
        ({"items": [{"name": 3}]}, "argument 'items[0].name': expected string, got integer"),
        (
            {"items": [], "speed": "warp"},
            "argument 'speed': invalid enum value 'warp' (expected one of 'fast', 'slow')",
        ),
        ({"items": [], "note": "toolong"}, "argument 'note'"),
        ({"items": [], "colour": "red"}, "argument 'colour': unexpected argument"),
        ([1, 2], "expected a JSON object of arguments"),
    ],
)
async def test_bad_arguments_name_the_argument(arguments: Any, fragment: str) -> None:
    with pytest.raises(ToolArgumentError) as info:
        await invoke_tool(order, arguments)
    message = str(info.value)
    assert message.startswith("Invalid arguments for tool 'order': "), message
    assert fragment in message, message


async def test_function_does_not_run_on_bad_arguments() -> None:
    calls: list[int] = []

    @tool
    def count(n: int) -> int:
        calls.append(n)
        return n

    with pytest.raises(ToolArgumentError):
        await invoke_tool(count, {"n": "7"})
    assert calls == []
    assert await invoke_tool(count, {"n": 7}) == 7
    assert calls == [7]


async def test_async_tool_is_awaited() -> None:
    @tool
    async def slow_echo(text: str) -> str:
        await anyio.sleep(0)
        return text.upper()

    assert await invoke_tool(slow_echo, {"text": "hi"}) == "HI"


async def test_sync_tool_runs_inline_on_event_loop_thread() -> None:
    @tool
    def where() -> int:
        return threading.get_ident()

    assert await invoke_tool(where, {}) == threading.get_ident()


async def test_run_in_thread_runs_in_worker_thread_concurrently() -> None:
    # Two threaded calls must overlap: each waits until both have started, which can
    # only happen if they run in different threads at the same time.
    barrier = threading.Barrier(2, timeout=10)

    @tool(run_in_thread=True)
    def meet(tag: str) -> tuple[str, int]:
        barrier.wait()
        return tag, threading.get_ident()

    results: dict[str, int] = {}

    async def call(tag: str) -> None:
        got, ident = await invoke_tool(meet, {"tag": tag})
        results[got] = ident

    async with anyio.create_task_group() as tg:
        tg.start_soon(call, "a")
        tg.start_soon(call, "b")
    assert set(results) == {"a", "b"}
    assert threading.get_ident() not in results.values()
    assert results["a"] != results["b"]


async def test_function_exceptions_propagate_unchanged() -> None:
    class Boom(Exception):
        pass

    @tool
    def explode() -> None:
        raise Boom("bang")

    @tool
    async def explode_async() -> None:
        raise Boom("async bang")

    @tool(run_in_thread=True)
    def explode_thread() -> None:
        raise Boom("thread bang")

    for made, text in [
        (explode, "bang"),
        (explode_async, "async bang"),
        (explode_thread, "thread bang"),
    ]:
        with pytest.raises(Boom, match=text):
            await invoke_tool(made, {})


async def test_hand_written_tool_without_validator_uses_schema() -> None:
    seen: list[dict[str, Any]] = []

    def record(**kwargs: Any) -> str:
        seen.append(kwargs)
        return "ok"

    handmade = Tool(
        name="record",
        description="Record things.",
        parameters={
            "type": "object",
            "properties": {
                "level": {"type": "integer", "minimum": 1, "maximum": 3},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["level"],
            "additionalProperties": False,
        },
        function=record,
    )
    assert await invoke_tool(handmade, {"level": 2, "tags": ["x"]}) == "ok"
    with pytest.raises(ToolArgumentError, match=r"argument 'level': expected a number <= 3"):
        await invoke_tool(handmade, {"level": 9})
    with pytest.raises(ToolArgumentError, match=r"argument 'tags\[1\]': expected string"):
        await invoke_tool(handmade, {"level": 1, "tags": ["a", 2]})
    with pytest.raises(ToolArgumentError, match="argument 'level': missing required"):
        await invoke_tool(handmade, {})
    assert seen == [{"level": 2, "tags": ["x"]}]


async def test_hand_written_async_tool_and_threaded_sync_tool() -> None:
    async def afn(x: int) -> int:
        return x + 1

    def sfn(x: int) -> int:
        return threading.get_ident()

    params = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    assert await invoke_tool(Tool("a", "", params, afn), {"x": 1}) == 2
    threaded = Tool("s", "", params, sfn, run_in_thread=True)
    assert await invoke_tool(threaded, {"x": 1}) != threading.get_ident()


async def test_many_concurrent_invocations_keep_their_results() -> None:
    @tool
    async def double(n: int) -> int:
        await anyio.sleep(0)
        return n * 2

    results: list[int | None] = [None] * 200

    async def one(i: int) -> None:
        results[i] = await invoke_tool(double, {"n": i})

    async with anyio.create_task_group() as tg:
        for i in range(200):
            tg.start_soon(one, i)
    assert results == [i * 2 for i in range(200)]


async def test_cancellation_propagates_through_async_tool() -> None:
    started = anyio.Event()

    @tool
    async def wait_forever() -> None:
        started.set()
        await anyio.sleep_forever()

    with anyio.move_on_after(5) as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(invoke_tool, wait_forever, {})
            await started.wait()
            tg.cancel_scope.cancel()
    assert not scope.cancelled_caught
