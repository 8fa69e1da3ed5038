"""``examples/redis_two_workers.py`` runs as documented against the fixture's server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_two_workers_share_one_key_and_one_budget(redis_url: str, backend: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "redis_two_workers.py"), redis_url, backend],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=55,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    tokens = [int(t) for t in re.findall(r"fencing token (\d+)", done.stdout)]
    assert len(tokens) == 4
    assert len(set(tokens)) == 4
    assert done.stdout.count("completed, 2 requests") == 4
    assert "budget: used 12 of 16 requests, 0 reserved, 4 remaining" in done.stdout
