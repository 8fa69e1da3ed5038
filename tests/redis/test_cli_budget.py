"""``deputy-runtime budget create|show|reset|delete`` against a real Redis server, and
``run``/``serve --shared-budget`` refusing a budget nobody created."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.cli._runhelp import run_cli, tool_free_agents

pytestmark = pytest.mark.slow  # spawns the CLI


def _budget(tmp_path: Path, redis_url: str, namespace: str, *args: str) -> tuple[int, str, str]:
    done = run_cli(
        "budget", *args[:1], *args[1:2], "--redis", redis_url, "--redis-namespace", namespace,
        *args[2:], cwd=tmp_path,
    )  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def test_create_show_reset_delete(tmp_path: Path, redis_url: str, namespace: str) -> None:
    code, out, err = _budget(tmp_path, redis_url, namespace, "show", "team")
    assert code == 1
    assert "The shared budget 'team' does not exist in Redis" in err
    assert f"deputy-runtime budget create team --redis {redis_url} --max-requests N" in err

    code, out, err = _budget(tmp_path, redis_url, namespace, "create", "team")
    assert (code, out) == (2, "")
    assert "give at least one limit" in err

    limits = ("--max-requests", "150", "--max-output-tokens", "9000", "--max-cost-usd", "2.5")
    code, out, err = _budget(tmp_path, redis_url, namespace, "create", "team", *limits)
    assert code == 0, err
    assert out == "budget 'team' created: requests 150, output_tokens 9000, cost_usd 2.5\n"
    # Idempotent with the same limits; other limits are refused, naming the stored ones.
    code, out, _ = _budget(tmp_path, redis_url, namespace, "create", "team", *limits)
    assert (code, out.split(":")[0]) == (
        0,
        "budget 'team' exists already with these limits; unchanged",
    )
    code, _, err = _budget(tmp_path, redis_url, namespace, "create", "team", "--max-requests", "9")
    assert code == 1
    assert "already exists with limits {'requests': 150" in err

    code, out, err = _budget(tmp_path, redis_url, namespace, "show", "team", "--json")
    assert code == 0, err
    state = json.loads(out)
    assert state["limit"] == {
        "requests": 150, "tool_calls": None, "input_tokens": None, "output_tokens": 9000,
        "cost_usd": 2.5,
    }  # fmt: skip
    assert state["used"]["requests"] == 0
    assert state["holders"] == 0
    code, out, _ = _budget(tmp_path, redis_url, namespace, "show", "team")
    assert code == 0
    assert out.splitlines()[0] == "budget 'team': 0 reservation(s) held"
    assert out.splitlines()[2].split() == ["requests", "150", "0", "0", "150"]

    code, out, err = _budget(tmp_path, redis_url, namespace, "reset", "team")
    assert (code, out) == (0, "budget 'team' reset: nothing used, nothing reserved\n"), err
    code, out, err = _budget(tmp_path, redis_url, namespace, "delete", "team")
    assert (code, out) == (0, "budget 'team' deleted\n"), err
    code, _, err = _budget(tmp_path, redis_url, namespace, "reset", "team")
    assert code == 1
    assert "does not exist" in err


def test_bad_names_and_options_are_exit_2(tmp_path: Path, redis_url: str, namespace: str) -> None:
    code, _, err = _budget(tmp_path, redis_url, namespace, "create", "a:b", "--max-requests", "1")
    assert code == 2
    assert "NAME: name" in err
    code, _, err = _budget(tmp_path, redis_url, namespace, "create", "t", "--max-requests", "0")
    assert code == 2
    assert "--max-requests: expected a whole number of at least 1" in err


@pytest.mark.parametrize("command", ["run", "serve"])
def test_a_shared_budget_nobody_created_is_exit_2(
    tmp_path: Path, redis_url: str, namespace: str, command: str
) -> None:
    tool_free_agents(tmp_path / "agents", "alpha")
    argv = [command, "--agents", "agents", "--redis", redis_url, "--shared-budget", "nobody",
            "--redis-namespace", namespace]  # fmt: skip
    if command == "run":
        argv.append("Do it")
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        argv += ["--insecure-no-auth", "--port", str(port)]
    done = run_cli(*argv, cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""  # no Model: line for a run that cannot start
    assert f"deputy-runtime {command}: --shared-budget: The shared budget 'nobody' does not" in (
        done.stderr
    )
    assert f"deputy-runtime budget create nobody --redis {redis_url}" in done.stderr
