"""The JSON Schema of formats 1 and 2 accepts valid files and rejects invalid ones."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from deputy_runtime.definitions import (
    AGENT_DEFINITION_SCHEMA,
    agent_definition_read,
    agent_definition_schema,
)

jsonschema = pytest.importorskip("jsonschema")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "agents"
MIN = {"version": 1, "name": "reviewer", "description": "Reviews", "prompt": "Read"}


def valid(document: object) -> bool:
    validator = jsonschema.Draft202012Validator(AGENT_DEFINITION_SCHEMA)
    return bool(validator.is_valid(document))


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(AGENT_DEFINITION_SCHEMA)
    copy = agent_definition_schema()
    copy["title"] = "changed"
    assert AGENT_DEFINITION_SCHEMA["title"] != "changed"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_example_files_are_valid_for_reader_and_schema(path: Path) -> None:
    assert valid(yaml.safe_load(path.read_text()))
    assert agent_definition_read(path, _AnyTools(), None).name == path.stem


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_example_files_are_canonical(path: Path) -> None:
    from deputy_runtime.definitions._format import definition_to_yaml

    tools = _AnyTools()
    definition = agent_definition_read(path, tools, None)
    assert {tool.name for tool in definition.tools} <= {"read_file", "list_files", "grep_files"}
    assert definition.permission_mode in {"readonly", "plan"}
    assert definition_to_yaml(definition, path, dict(tools), {}) == path.read_bytes()


class _AnyTools(dict):  # type: ignore[type-arg]
    """Resolves each example's tool names to real tools made on demand."""

    def __missing__(self, key: str) -> object:
        from tests.definitions._definition_helpers import make_tool

        self[key] = make_tool(key)
        return self[key]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str)


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"tools": "read_file", "memory": "fact", "max_requests": 0},
        {"tools": [], "skills": ["a.b"], "memory": None, "mcp_servers": []},
        {"permission_mode": None, "initial_prompt": "Hi", "params": {"temperature": 0.2}},
        {"name": "  Reviewer  ", "model": "openai/gpt-4.1"},
        {"version": 2},
        {"version": 2, "output_schema": {"type": "object"}, "output_retries": 0},
        {"version": 2, "output_schema": None, "output_retries": None},
    ],
)
def test_valid_documents(extra: dict[str, object]) -> None:
    assert valid({**MIN, **extra})


@pytest.mark.parametrize(
    "change",
    [
        {"version": 3},
        {"version": "1"},
        {"output_schema": {"type": "object"}},
        {"output_retries": 1},
        {"version": 2, "output_schema": "object"},
        {"version": 2, "output_retries": 11},
        {"unexpected": True},
        {"sub_agents": []},
        {"name": "two words"},
        {"name": True},
        {"prompt": ""},
        {"tools": None},
        {"tools": ["package::read"]},
        {"tools": ["read", "read"]},
        {"memory": [True]},
        {"memory": {"a": "b"}},
        {"max_requests": -1},
        {"max_requests": 2**31},
        {"max_requests": "2"},
        {"permission_mode": "auto"},
        {"model": None},
        {"params": [1]},
    ],
)
def test_invalid_documents(change: dict[str, object]) -> None:
    assert not valid({**MIN, **change})


@pytest.mark.parametrize("field", ["version", "name", "description", "prompt"])
def test_required_fields(field: str) -> None:
    assert not valid({key: value for key, value in MIN.items() if key != field})
