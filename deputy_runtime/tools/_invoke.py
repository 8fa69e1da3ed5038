"""Running one tool call: validate the arguments, then call the function.

This is on the agent loop's hot path, so it does the least it can: one validator call
(the ``@tool`` msgspec converter, or a cached hand-written-schema validator) and one
function call. The function's own exceptions propagate unchanged; the agent reports them
to the model as tool errors.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from functools import partial
from types import CoroutineType
from typing import Any

import anyio.to_thread

from ._schema import schema_validator
from ._tool import Tool

__all__ = ["invoke_tool", "tool_validator"]

_Validator = Callable[[Mapping[str, Any]], dict[str, Any]]
# Validators for tools without one, keyed by the id of the parameters dict. The dict is
# kept alive in the entry, so an id is never reused while its entry exists.
_CACHE: dict[int, tuple[dict[str, Any], _Validator]] = {}
_CACHE_MAX = 1024
# Common results that are never awaitable: skip the slower isawaitable ABC check.
_PLAIN = frozenset({str, int, float, bool, type(None), dict, list, tuple, bytes})


def tool_validator(tool: Tool) -> _Validator:
    """The validator for ``tool``: its own, or one compiled from its JSON Schema."""
    if tool.validator is not None:
        return tool.validator
    params = tool.parameters
    entry = _CACHE.get(id(params))
    if entry is not None and entry[0] is params:
        return entry[1]
    validator = schema_validator(params, tool.name)
    if len(_CACHE) >= _CACHE_MAX:
        _CACHE.clear()
    _CACHE[id(params)] = (params, validator)
    return validator


def _abandonable(tool: Tool) -> bool:
    """Whether a cancelled call may return before ``tool``'s thread finishes.

    Only for tools that change nothing: leaving one behind loses only its result.
    """
    return tool.read_only and not tool.destructive


async def invoke_tool(tool: Tool, arguments: Mapping[str, Any]) -> Any:
    """Validate ``arguments`` against ``tool`` and run it.

    Async functions are awaited; sync ones run inline, or in a worker thread when
    ``tool.run_in_thread``.

    Cancelling a threaded call: a worker thread cannot be stopped, so it is a choice between
    waiting for it and leaving it behind. A read-only tool (``read_only`` and not
    ``destructive``) is abandoned: the caller gets the cancellation at once and the thread
    finishes in the background, its result discarded, so a read stuck on slow I/O or a long
    search does not hold up cancelling a run. (Only between the thread's GIL releases: one
    long C call that keeps the GIL, such as a single ``re`` match, stalls every thread, the
    event loop included, until it returns.) On the asyncio backend the abandoned thread is
    not a daemon, so interpreter exit still waits for it. Any other tool is waited for: a
    write must not be left half-applied while its caller is told it was cancelled. The call
    then returns the tool's result (or raises its error) as usual, and the cancellation
    arrives at the caller's next checkpoint, so the caller can still record that the write
    happened.

    Args:
        tool: The tool to run.
        arguments: The model's arguments, a JSON object.

    Returns:
        What the tool's function returns.

    Raises:
        ToolArgumentError: The arguments do not fit the tool's schema (the function does
            not run); the error names the bad argument.
    """
    validator = tool.validator
    kwargs = validator(arguments) if validator is not None else tool_validator(tool)(arguments)
    if tool.run_in_thread:
        func = tool.function
        if not inspect.iscoroutinefunction(func):
            return await anyio.to_thread.run_sync(
                partial(func, **kwargs), abandon_on_cancel=_abandonable(tool)
            )
    result = tool.function(**kwargs)
    kind = type(result)
    if kind is CoroutineType:
        return await result
    if kind in _PLAIN or not inspect.isawaitable(result):
        return result
    return await result
