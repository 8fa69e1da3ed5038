"""``deputy-runtime run/serve --redis URL [--shared-budget NAME] [--redis-namespace NS]``.

The CLI runs as a subprocess on the offline test model against the fixture's server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from deputy_runtime.redis import RedisBudget, RedisLeases
from tests.cli._runhelp import run_cli, tool_free_agents
from tests.redis.redis_support import _free_port

pytestmark = pytest.mark.slow

PLUGIN = """\
from deputy_runtime import DelegationPolicy

delegation_policy = DelegationPolicy(resource_mode="exclusive", resource_key="repo")
"""


def test_run_draws_on_the_shared_budget_under_redis_leases(
    tmp_path: Path, redis_url: str, namespace: str
) -> None:
    tool_free_agents(tmp_path / "agents", "alpha", "beta")
    plugin = tmp_path / "exclusive_plugin.py"
    plugin.write_text(PLUGIN, encoding="utf-8")
    created = run_cli(
        "budget", "create", "nightly", "--redis", redis_url, "--redis-namespace", namespace,
        "--max-requests", "20", cwd=tmp_path,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    assert created.stdout == "budget 'nightly' created: requests 20\n"
    argv = ["run", "--agents", "agents", "--plugin", str(plugin), "--max-requests", "8"]
    argv += ["--redis", redis_url, "--shared-budget", "nightly", "--redis-namespace", namespace]
    done = run_cli(*argv, "Do it", cwd=tmp_path)
    assert done.returncode == 0, done.stderr

    async def read() -> Any:
        async with RedisBudget(redis_url, "nightly", {"requests": 20}, namespace=namespace) as b:
            state = await b.state()
        async with RedisLeases(redis_url, namespace=namespace) as leases:
            current = await leases.current("repo")
        return state, current

    state, current = anyio.run(read)
    assert state.limit.requests == 20  # the budget's own size, not the run's --max-requests
    assert state.used.requests > 0  # the delegations' requests were settled there
    assert (state.reserved.requests, state.holders) == (0, 0)
    assert current is None  # every exclusive lease was released


@pytest.mark.parametrize("command", ["run", "serve"])
def test_an_unreachable_redis_is_exit_2_with_one_line(tmp_path: Path, command: str) -> None:
    tool_free_agents(tmp_path / "agents", "alpha")
    dead = f"redis://127.0.0.1:{_free_port()}/0"
    argv = [command, "--agents", "agents", "--redis", dead, "--shared-budget", "b"]
    if command == "run":
        argv.append("Do it")
    else:
        argv += ["--insecure-no-auth", "--port", str(_free_port())]
    done = run_cli(*argv, cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith(f"deputy-runtime {command}: --redis"), done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--shared-budget", "b"], "--shared-budget needs --redis"),
        (["--redis-namespace", "ns"], "--redis-namespace needs --redis"),
        (["--redis", "http://x"], "--redis: url must be a Redis URL"),
        (["--redis", "redis://x", "--shared-budget", "a:b"], "--shared-budget: name"),
        (["--redis", "redis://x", "--temporal", "localhost:7233"], "do not combine"),
    ],
)
def test_bad_redis_options_are_exit_2_naming_them(
    tmp_path: Path, args: list[str], expected: str
) -> None:
    tool_free_agents(tmp_path / "agents", "alpha")
    done = run_cli("run", "--agents", "agents", *args, "Do it", cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert expected in done.stderr
    assert "Traceback" not in done.stderr
