"""The floors: the least code that reproduces the workload, with no framework at all.

A floor is what a delegation costs when the runtime does nothing but schedule it: a task
per delegation awaiting the canned model coroutine, and one small dict standing in for the
subagent. Every other contender is reported as a ratio to these, measured in the same run.
"""

from __future__ import annotations

import asyncio
import platform
from typing import Any

import anyio
import anyio.lowlevel

from ._shape import (
    CHILD_ANSWER,
    CHILD_NAME,
    CHILD_PROMPT,
    TOKENS_IN,
    TOKENS_OUT,
    distribution_version,
    done,
    task_text,
)

__all__ = ["AnyioFloor", "AsyncioFloor", "create_anyio", "create_asyncio"]

_Reply = tuple[Any, tuple[int, int]]


class _Floor:
    """The shared canned models; subclasses differ only in how they spawn the tasks."""

    name = "floor"
    version = ""

    def __init__(self, child_yields: bool = False) -> None:
        self._child_yields = child_yields
        self.tokens = 0

    async def _lead_model(self, n: int, results: list[Any] | None) -> _Reply:
        # First call: n delegation requests; second call: the final answer.
        if results is None:
            return [task_text(i) for i in range(n)], (TOKENS_IN, TOKENS_OUT)
        return done(results), (TOKENS_IN, TOKENS_OUT)

    async def _child_model(self, subagent: dict[str, str]) -> _Reply:
        if self._child_yields:
            await anyio.lowlevel.checkpoint()
        return CHILD_ANSWER, (TOKENS_IN, TOKENS_OUT)

    async def _delegate(self, task: str) -> Any:
        subagent = {"name": CHILD_NAME, "prompt": CHILD_PROMPT, "task": task}
        answer, usage = await self._child_model(subagent)
        self.tokens += usage[0] + usage[1]
        return answer

    async def _spawn(self, tasks: list[str]) -> list[Any]:
        raise NotImplementedError

    async def _run(self, n: int) -> str:
        tasks, usage = await self._lead_model(n, None)
        self.tokens += usage[0] + usage[1]
        results = await self._spawn(tasks)
        answer, usage = await self._lead_model(n, results)
        self.tokens += usage[0] + usage[1]
        return str(answer)

    async def sequential(self) -> str:
        """One lead run with one delegation."""
        return await self._run(1)

    async def fanout(self, n: int) -> str:
        """One lead run with ``n`` concurrent delegations."""
        return await self._run(n)


class AsyncioFloor(_Floor):
    """Bare asyncio: ``asyncio.create_task`` per delegation, awaited in order."""

    name = "asyncio floor"
    version = "python " + platform.python_version()

    async def _spawn(self, tasks: list[str]) -> list[Any]:
        running = [asyncio.create_task(self._delegate(task)) for task in tasks]
        return [await t for t in running]


class AnyioFloor(_Floor):
    """Bare anyio: one task group, ``start_soon`` per delegation, results by index."""

    name = "anyio floor"
    version = distribution_version("anyio")

    async def _spawn(self, tasks: list[str]) -> list[Any]:
        results: list[Any] = [None] * len(tasks)

        async def one(index: int, task: str) -> None:
            results[index] = await self._delegate(task)

        async with anyio.create_task_group() as tg:
            for index, task in enumerate(tasks):
                tg.start_soon(one, index, task)
        return results


def create_asyncio(child_yields: bool = False) -> AsyncioFloor:
    """The bare asyncio floor (runs on the asyncio backend only)."""
    return AsyncioFloor(child_yields)


def create_anyio(child_yields: bool = False) -> AnyioFloor:
    """The bare anyio floor."""
    return AnyioFloor(child_yields)
