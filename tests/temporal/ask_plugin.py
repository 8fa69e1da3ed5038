"""A ``--plugin`` naming ``ask_user``, so definitions may list it (the durable run answers
it in workflow code; the workers never call the tool)."""

from __future__ import annotations

from deputy_runtime import ask_user

tools = [ask_user]
