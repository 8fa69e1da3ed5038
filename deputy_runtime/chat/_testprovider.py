"""TestProvider: a deterministic offline model that exercises every offered tool.

Given tools and no results of its own calls yet, it calls every offered tool once, all in
one turn, with arguments derived from the tool's JSON Schema (and once per value of the
first required string ``enum`` property, so a lead's ``delegate_to_agent`` fans out to
each subagent). Once the results are back it answers with a short text naming what it
called. It makes no network calls and never varies, so it is the offline default.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import msgspec

from ._types import (
    AssistantTurn,
    Content,
    ContentText,
    ContentToolRequest,
    ContentToolResult,
    ModelRequest,
    StreamDelta,
    ToolSpec,
    Turn,
    Usage,
)
from ._window import window_value

__all__ = ["DEFAULT_TEST_USAGE", "TestProvider", "example_arguments", "example_value"]

#: Usage reported by every TestProvider reply unless configured otherwise.
DEFAULT_TEST_USAGE = Usage(requests=1, input_tokens=10, output_tokens=5)
#: Calls made for one tool at most when fanning out over an enum (``fanout`` changes it).
MAX_FANOUT = 8
#: Characters of each tool result quoted in the final answer.
RESULT_PREVIEW_CHARS = 200
_ID_PREFIX = "test_"
_MAX_DEPTH = 8
_FORMATS = {
    "date-time": "2024-01-01T00:00:00Z",
    "date": "2024-01-01",
    "time": "00:00:00Z",
    "email": "test@example.com",
    "uri": "https://example.com/test",
    "uuid": "00000000-0000-4000-8000-000000000000",
}


class TestProvider:
    """Deterministic offline provider (registry name ``test``); see the module docstring."""

    __test__ = False  # not a pytest test class, despite the name

    __slots__ = ("context_window", "fanout", "model", "name", "usage")

    def __init__(
        self,
        *,
        model: str = "test",
        name: str = "test",
        usage: Usage = DEFAULT_TEST_USAGE,
        fanout: int = MAX_FANOUT,
        context_window: int | None = None,
    ) -> None:
        if isinstance(fanout, bool) or not isinstance(fanout, int) or fanout < 1:
            raise ValueError(
                f"TestProvider fanout must be a whole number of at least 1, got {fanout!r}"
            )
        self.name = name
        self.model = model
        self.usage = usage
        self.fanout = fanout  # calls per tool at most when fanning out over an enum
        # The window the runtime assumes (None: unknown); see chat._window.
        self.context_window = window_value("TestProvider.context_window", context_window)

    def __repr__(self) -> str:
        return f"TestProvider(model={self.model!r})"

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        """Call every offered tool, or answer once the results of those calls are back.

        Args:
            request: The request.

        Returns:
            A turn calling each offered tool once (with arguments made from its schema), or a
            text summarising the tool results.
        """
        turns = request.turns
        if request.tools and not _answers_own_calls(turns):
            calls = _tool_calls(request.tools, len(turns), self.fanout)
            if calls:
                return AssistantTurn(calls, self.usage, finish_reason="tool_use")
        text = _summary(turns) if _answers_own_calls(turns) else _echo(turns)
        return AssistantTurn((ContentText(text),), self.usage, finish_reason="stop")

    async def stream(
        self, request: ModelRequest
    ) -> AsyncGenerator[StreamDelta | AssistantTurn, None]:
        """The reply of :meth:`complete` as one text delta, then the turn.

        Args:
            request: The request.

        Returns:
            An async generator of one delta followed by the turn.
        """
        turn = await self.complete(request)
        if turn.text:
            yield StreamDelta(text=turn.text)
        yield turn

    def with_model(self, model: str) -> TestProvider:
        """The same provider under another model name.

        Args:
            model: The model name.

        Returns:
            A new test provider.
        """
        return TestProvider(
            model=model,
            name=self.name,
            usage=self.usage,
            fanout=self.fanout,
            context_window=self.context_window,
        )


def _answers_own_calls(turns: tuple[Turn, ...]) -> bool:
    if not turns or turns[-1].role != "user":
        return False
    return any(
        isinstance(c, ContentToolResult) and c.request_id.startswith(_ID_PREFIX)
        for c in turns[-1].contents
    )


def _tool_calls(tools: tuple[ToolSpec, ...], n_turns: int, fanout: int) -> tuple[Content, ...]:
    calls: list[Content] = []
    for spec in tools:
        for arguments in _argument_sets(spec.parameters, fanout):
            calls.append(
                ContentToolRequest(f"{_ID_PREFIX}{n_turns}_{len(calls)}", spec.name, arguments)
            )
    return tuple(calls)


def _argument_sets(schema: Mapping[str, Any], fanout: int = MAX_FANOUT) -> list[dict[str, Any]]:
    """One argument set, or one per value of the first required string enum property."""
    base = example_arguments(schema)
    properties = schema.get("properties") or {}
    for name in schema.get("required") or ():
        prop = _resolve(properties.get(name), schema)
        values = prop.get("enum") if isinstance(prop, Mapping) else None
        if isinstance(values, list) and values and all(isinstance(v, str) for v in values):
            return [{**base, name: value} for value in values[:fanout]]
    return [base]


def example_arguments(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Schema-valid arguments for a tool, as the offline ``test`` model makes them up.

    Args:
        schema: The tool's parameters, a JSON Schema object.

    Returns:
        Arguments that validate against ``schema``.
    """
    value = example_value(schema, schema)
    return value if isinstance(value, dict) else {}


def _resolve(node: Any, root: Mapping[str, Any], depth: int = 0) -> Any:
    # Local references only ("#/$defs/Name"), as msgspec and hand-written schemas use.
    while isinstance(node, Mapping) and isinstance(node.get("$ref"), str) and depth < _MAX_DEPTH:
        target: Any = root
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        node = target
        depth += 1
    return node


def example_value(schema: Any, root: Mapping[str, Any] | None = None, depth: int = 0) -> Any:
    """A value valid for ``schema``: ``examples[0]``, ``default``, ``const``, ``enum[0]``,
    else one built from the type (``"test"``, ``1``, ``1.0``, ``True``, ``[]``, objects with
    their required properties)."""
    root = root if root is not None else (schema if isinstance(schema, Mapping) else {})
    schema = _resolve(schema, root)
    if not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
        return "test"
    examples = schema.get("examples")
    if isinstance(examples, list) and examples:
        return examples[0]
    for key in ("default", "const"):
        if key in schema:
            return schema[key]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            non_null = [o for o in options if _resolve(o, root) != {"type": "null"}]
            return example_value((non_null or options)[0], root, depth + 1)
    if isinstance(schema.get("allOf"), list):
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            resolved = _resolve(part, root)
            if isinstance(resolved, Mapping):
                merged.update(resolved)
        rest = {k: v for k, v in schema.items() if k != "allOf"}
        return example_value({**merged, **rest}, root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "string"
    return _by_type(kind, schema, root, depth)


def _by_type(kind: str, schema: Mapping[str, Any], root: Mapping[str, Any], depth: int) -> Any:
    if kind == "string":
        return _string(schema)
    if kind == "integer":
        return int(_number(schema, 1, integer=True))
    if kind == "number":
        return float(_number(schema, 1.0, integer=False))
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    if kind == "array":
        count = schema.get("minItems") or 0
        items = schema.get("items", {})
        return [example_value(items, root, depth + 1) for _ in range(min(count, 16))]
    properties = schema.get("properties") or {}
    return {
        name: example_value(properties.get(name, {}), root, depth + 1)
        for name in schema.get("required") or ()
    }


def _string(schema: Mapping[str, Any]) -> str:
    text = _FORMATS.get(schema.get("format", ""), "test")
    low = schema.get("minLength") or 0
    high = schema.get("maxLength")
    if len(text) < low:
        text = text + "x" * (low - len(text))
    if high is not None and len(text) > high:
        text = text[:high]
    return text


def _number(schema: Mapping[str, Any], value: float, *, integer: bool) -> float:
    low, high = schema.get("minimum"), schema.get("maximum")
    ex_low, ex_high = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    step = 1 if integer else 1.0
    if low is not None and value < low:
        value = math.ceil(low) if integer else low
    if ex_low is not None and value <= ex_low:
        value = math.floor(ex_low) + 1 if integer else ex_low + step
    if high is not None and value > high:
        value = math.floor(high) if integer else high
    if ex_high is not None and value >= ex_high:
        candidate = math.ceil(ex_high) - 1 if integer else ex_high - step
        floor = ex_low if ex_low is not None else low
        if not integer and floor is not None and candidate <= floor:
            candidate = (floor + ex_high) / 2  # a narrow open interval: take its middle
        value = candidate
    return value


def _preview(result: ContentToolResult) -> str:
    if result.error is not None:
        text = f"error: {result.error}"
    elif isinstance(result.value, str):
        text = result.value
    else:
        try:
            text = msgspec.json.encode(result.value).decode()
        except (TypeError, ValueError, msgspec.EncodeError):
            text = repr(result.value)
    if len(text) > RESULT_PREVIEW_CHARS:
        text = text[:RESULT_PREVIEW_CHARS] + "..."
    return text


def _summary(turns: tuple[Turn, ...]) -> str:
    """A short, readable answer built from the last turn's tool results.

    One line per result that says what it found (a subagent's first line, a file's first
    line, how many entries or matches), never a dump of the raw results.
    """
    requests: dict[str, tuple[str, dict[str, Any]]] = {}
    if len(turns) >= 2:
        requests = {r.id: (r.name, r.arguments) for r in turns[-2].tool_requests}
    results = [c for c in turns[-1].contents if isinstance(c, ContentToolResult)]
    lines = [f"Summary of {len(results)} tool result(s):"]
    for result in results:
        name, arguments = requests.get(result.request_id, (result.request_id, {}))
        lines.append(f"- {_finding(name, arguments, result)}")
    return "\n".join(lines)


def _first_line(text: str) -> str:
    """The first line of prose (headings only when there is nothing else)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    prose = [line for line in lines if not line.startswith("#")]
    chosen = (prose or lines or ["(empty)"])[0]
    return _clip(chosen.lstrip("#-* ").strip() or "(empty)")


def _findings(answer: str) -> str:
    """A subagent's own summary lines (this model's ``- ...`` bullets), joined."""
    bullets = [line[2:].strip() for line in answer.splitlines() if line.startswith("- ")]
    return _clip("; ".join(bullets), 160) if bullets else _first_line(answer)


def _clip(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _finding(name: str, arguments: Mapping[str, Any], result: ContentToolResult) -> str:
    if result.error is not None:
        return f"{name} failed: {_clip(str(result.error))}"
    value = result.value
    if isinstance(value, msgspec.Struct):
        value = msgspec.to_builtins(value)
    elif isinstance(value, str) and value.startswith("{"):
        # a delegation's result arrives as its JSON record
        with contextlib.suppress(msgspec.DecodeError):
            value = msgspec.json.decode(value)
    if isinstance(value, Mapping) and "answer" in value and "agent_name" in value:
        agent = value.get("agent_name") or name
        if value.get("error"):
            return f"{agent} failed: {_clip(str(value['error']))}"
        if value.get("status", "completed") != "completed":
            return f"{agent} {value['status']} ({value.get('stop_reason')}) without an answer"
        return f"{agent} found: {_findings(str(value.get('answer') or ''))}"
    text = value if isinstance(value, str) else _preview(result)
    if name == "read_file":
        return f"{arguments.get('path', 'the file')} begins: {_first_line(text)}"
    if name == "list_files":
        entries = [line for line in text.splitlines() if line.strip()]
        shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
        return f"{len(entries)} entries listed: {shown}"
    if name == "grep_files":
        hits = [line for line in text.splitlines() if line.strip()]
        pattern = arguments.get("pattern", "")
        if not hits or text.strip().lower().startswith("no match"):
            return f"no lines match {pattern!r}"
        return f"{len(hits)} line(s) match {pattern!r}, first {_clip(hits[0], 80)}"
    return f"{name}: {_first_line(text)}"


def _echo(turns: tuple[Turn, ...]) -> str:
    for turn in reversed(turns):
        if turn.role == "user" and turn.text:
            text = turn.text.strip()
            if len(text) > RESULT_PREVIEW_CHARS:
                text = text[:RESULT_PREVIEW_CHARS] + "..."
            return f"Test reply to: {text}"
    return "Test reply."
