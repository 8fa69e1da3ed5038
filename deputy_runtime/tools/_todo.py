"""todo_write: an agent's task list, replaced whole on each call.

As with Claude Code's TodoWrite, every call sends the complete list; the tool checks it
(at most one item in progress, unique ids) and answers with the list rendered, which the
model sees as the list's current state. The list lives in the calling agent's own
conversation, not in the tool, so one Tool object serves any number of agents and each
has its own list. A host sees every change as the ``todo_write`` tool call in the run's
events: its arguments are the whole new list.
"""

from __future__ import annotations

import enum

import msgspec

from ..errors import ToolArgumentError

__all__ = ["MAX_TODOS", "TodoItem", "TodoStatus", "render_todos"]

#: Most items in one list; a longer plan belongs in a file.
MAX_TODOS = 100
_MARKS = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


class TodoStatus(enum.Enum):
    """Where one task stands."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"


class TodoItem(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One task: what to do and its status; id is optional and unique if given."""

    content: str
    status: TodoStatus
    id: str | None = None
    activeForm: str | None = None  # Claude Code's field name, camelCase as it sends it


def render_todos(todos: list[TodoItem]) -> str:
    if len(todos) > MAX_TODOS:
        raise ToolArgumentError(
            f"argument 'todos': {len(todos)} items is over the limit of {MAX_TODOS}"
        )
    ids = [item.id for item in todos if item.id is not None]
    if len(ids) != len(set(ids)):
        raise ToolArgumentError("argument 'todos': two items have the same id")
    for index, item in enumerate(todos):
        if not item.content.strip():
            raise ToolArgumentError(f"argument 'todos[{index}].content': must not be empty")
    working = sum(item.status is TodoStatus.IN_PROGRESS for item in todos)
    if working > 1:
        raise ToolArgumentError(
            f"argument 'todos': {working} items are in_progress; keep exactly one in "
            "progress at a time"
        )
    if not todos:
        return "Task list cleared."
    done = sum(item.status is TodoStatus.COMPLETED for item in todos)
    lines = [f"Task list updated ({done}/{len(todos)} completed):"]
    lines += [f"{_MARKS[item.status.value]} {item.content.strip()}" for item in todos]
    return "\n".join(lines)
