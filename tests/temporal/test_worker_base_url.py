"""A worker reaches the endpoint ``OPENAI_BASE_URL`` names, as an in-process ``run`` does.

The "provider" is a loopback HTTP server speaking OpenAI's streaming Chat Completions; the
worker process has the key and the variable, the ``run --temporal`` process has neither
(the workers are what talk to the model).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.cli._runhelp import REPO_ROOT, tool_free_agents
from tests.cli.test_run_provider import openai_loopback

__all__ = ["openai_loopback"]  # the fixture, used by name below

pytestmark = pytest.mark.slow  # a worker process and a CLI process


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("OPENAI_BASE_URL", None)
    env["PYTHONPATH"] = str(REPO_ROOT)
    return {**env, **extra}


def test_a_worker_uses_openai_base_url(
    temporal_address: str, tmp_path: Path, openai_loopback: tuple[str, list[Any]]
) -> None:
    base_url, recorded = openai_loopback
    agents = tool_free_agents(tmp_path / "agents", "alpha")
    queue = f"base-url-{uuid.uuid4().hex}"
    log_path = tmp_path / "worker.log"
    with open(log_path, "wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "deputy_runtime", "worker", "--temporal", temporal_address,
             "--agents", str(agents), "--task-queue", queue],
            cwd=tmp_path, stdout=log, stderr=log,
            env=_env(OPENAI_API_KEY="sk-loopback-not-real", OPENAI_BASE_URL=base_url),
        )  # fmt: skip
    try:
        done = subprocess.run(
            [sys.executable, "-m", "deputy_runtime", "run", "--agents", str(agents),
             "--model", "openai/gpt-4.1-mini", "--temporal", temporal_address,
             "--task-queue", queue, "Greet me"],
            cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300,
            check=False,
        )  # fmt: skip
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
    assert done.returncode == 0, (done.stdout, done.stderr, log_path.read_text())
    assert done.stdout.rstrip().endswith("Answer:\nfinal answer"), done.stdout
    assert len(recorded) == 3  # lead, subagent, lead: all at the loopback endpoint
    for path, headers, body in recorded:
        assert path == "/v1/chat/completions"
        assert headers["authorization"] == "Bearer sk-loopback-not-real"
        assert body["model"] == "gpt-4.1-mini"
