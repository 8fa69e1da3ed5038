"""Tool-call overhead: ``invoke_tool`` and ``Permissions.check`` vs calling the function.

    python benchmarks/tool_call.py [--calls N] [--reps R]

Everything runs in one process and one event loop, so the ratios compare like with like:

* floor: ``await fn(**arguments)`` for an async tool, ``fn(**arguments)`` for a sync one
  (arguments already validated; the least any runtime can do);
* ``invoke_tool``: validation (the msgspec converter ``@tool`` builds, or the cached
  hand-written-schema validator) plus the call;
* ``check + invoke``: the permission check an agent does first (standard mode, a deny
  list and an allowlist-free path; ``write_file`` also resolves its path against the write
  root), then ``invoke_tool``.

The best of R repetitions of N calls is reported per call, with its ratio to the floor.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from deputy_runtime import Permissions
from deputy_runtime.tools import Tool, invoke_tool, tool


@tool
async def lookup(key: str, limit: int = 10, exact: bool = False) -> str:
    """Look a key up."""
    return key


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _plain(a: int, b: int) -> int:
    return a + b


HANDMADE = Tool(
    name="add_handmade",
    description="Add two integers.",
    parameters={
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    },
    function=_plain,
)


async def _time(n: int, reps: int, body: Callable[[], Awaitable[Any]]) -> float:
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(n):
            await body()
        best = min(best, time.perf_counter() - start)
    return best / n


async def main(n: int, reps: int) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="deputy-bench-tools-"))
    perms = Permissions(mode="standard", deny=["run_bash"]).bind(workdir)
    cases: list[tuple[str, Tool, dict[str, Any]]] = [
        ("async @tool", lookup, {"key": "k", "limit": 3}),
        ("sync @tool", add, {"a": 1, "b": 2}),
        ("hand-written schema", HANDMADE, {"a": 1, "b": 2}),
    ]
    print(f"{'case':<22}{'floor':>10}{'invoke':>10}{'ratio':>8}{'check+invoke':>14}{'ratio':>8}")
    for label, t, args in cases:
        fn = t.function
        if label.startswith("async"):

            async def floor(fn: Any = fn, args: dict[str, Any] = args) -> Any:
                return await fn(**args)
        else:

            async def floor(fn: Any = fn, args: dict[str, Any] = args) -> Any:
                return fn(**args)

        async def invoke(t: Tool = t, args: dict[str, Any] = args) -> Any:
            return await invoke_tool(t, args)

        async def checked(t: Tool = t, args: dict[str, Any] = args) -> Any:
            await perms.check(t, args, None)
            return await invoke_tool(t, args)

        base = await _time(n, reps, floor)
        inv = await _time(n, reps, invoke)
        chk = await _time(n, reps, checked)
        print(
            f"{label:<22}{base * 1e6:>8.2f}us{inv * 1e6:>8.2f}us{inv / base:>7.1f}x"
            f"{chk * 1e6:>12.2f}us{chk / base:>7.1f}x"
        )
    write_args = {"path": "notes/todo.txt", "content": "x"}
    write = next(t for t in _file_tools(workdir) if t.name == "write_file")
    static = await _time(n, reps, _static_check(perms, write, write_args))
    print(f"\ncheck_static(write_file, path inside write root): {static * 1e6:.2f}us per call")


def _file_tools(workdir: Path) -> tuple[Tool, ...]:
    from deputy_runtime.tools import tools_file

    return tools_file(workdir)


def _static_check(perms: Any, t: Tool, args: dict[str, Any]) -> Callable[[], Awaitable[Any]]:
    async def body() -> Any:
        return perms.check_static(t, args)

    return body


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--reps", type=int, default=5)
    ns = parser.parse_args()
    anyio.run(main, ns.calls, ns.reps)
