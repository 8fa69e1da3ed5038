"""The Redis page's command-line example runs as written (only the server's URL differs)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

from tests.cli._runhelp import REPO_ROOT, offline_env


def _examples() -> list[list[str]]:
    text = (REPO_ROOT / "docs" / "redis.md").read_text(encoding="utf-8")
    section = text[text.index("### From the command line") :]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    lines = block.group(1).replace("\\\n", " ").strip().splitlines()
    return [shlex.split(line) for line in lines]


def test_the_redis_page_cli_example_runs(redis_url: str, namespace: str) -> None:
    commands = _examples()
    assert [argv[:2] for argv in commands] == [
        ["deputy-runtime", "budget"],
        ["deputy-runtime", "run"],
    ], commands
    for argv in commands:
        assert argv[argv.index("--redis") + 1] == "redis://127.0.0.1:6379/0"
        argv[argv.index("--redis") + 1] = redis_url  # this test's own server
        argv[argv.index("--redis-namespace") + 1] = namespace  # keys of its own
        done = subprocess.run(
            [sys.executable, "-m", "deputy_runtime", *argv[1:]],
            cwd=REPO_ROOT,
            env=offline_env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr)
    assert "lead: run ended (complete)" in done.stdout
