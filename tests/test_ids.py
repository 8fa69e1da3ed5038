"""Ids: agent_/run_/delegation_ + 32 hex digits, unique, readable apart at a glance."""

from __future__ import annotations

import os
import re

from deputy_runtime._ids import new_id

ID = re.compile(r"^delegation_[0-9a-f]{32}$")


def test_ids_are_unique_and_differ_in_their_first_digits() -> None:
    ids = [new_id("delegation") for _ in range(50_000)]
    assert all(ID.match(i) for i in ids)
    assert len(set(ids)) == len(ids)
    # Log views show a short prefix: consecutive ids must not share it.
    assert len({i[: len("delegation_") + 8] for i in ids}) == len(ids)


def test_a_forked_child_draws_new_ids() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report the id it mints, then leave at once
        os.write(write, new_id("run").encode())
        os._exit(0)
    os.close(write)
    child_id = os.read(read, 100).decode()
    os.close(read)
    os.waitpid(pid, 0)
    parent_id = new_id("run")
    assert child_id.startswith("run_")
    # The process part (last 16 hex digits) is drawn again after fork.
    assert child_id[-16:] != parent_id[-16:]
