"""Every example runs offline, as a user would run it, on both anyio backends.

Each example is executed in a subprocess (``python examples/X.py BACKEND``) with the
package importable from the repository and no API keys in the environment. The README's
embedding example is extracted from README.md and run the same way, so the documented
code is the tested code.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = REPO_ROOT / "examples"
BACKENDS = ["asyncio", "trio"]


def _run(*args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_embed_in_app(backend: str) -> None:
    done = _run(str(EXAMPLES / "embed_in_app.py"), backend)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"[{backend}]\n")
    assert "lead stopped: complete" in done.stdout
    started = set(re.findall(r"DelegationStart (\S+)", done.stdout))
    ended = dict(re.findall(r"DelegationEnd\s+(\S+)\s+(\S+)", done.stdout))
    assert started, done.stdout
    assert all(ended[name] == "completed" for name in started), done.stdout
    for name in ended:  # the records agree with the streamed events
        assert re.search(rf"^  {name}\s+{ended[name]}\s", done.stdout, re.M)


def test_embed_in_app_runs_both_backends_by_default() -> None:
    done = _run(str(EXAMPLES / "embed_in_app.py"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.index("[asyncio]") < done.stdout.index("[trio]")


@pytest.mark.parametrize("backend", BACKENDS)
def test_structured_results_are_typed_after_a_retry(backend: str) -> None:
    done = _run(str(EXAMPLES / "structured_results.py"), backend)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "bug      urgent=True  The app crashes when I upload a photo",
        "feature  urgent=False Please add a dark mode",
        "bug      urgent=True  Login fails with error 500 since this morning",
        # Three tickets, one of them answered twice: the retry is one more request.
        "batch: complete; 4 requests",
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_parallel_fanout_stays_within_budget(backend: str) -> None:
    done = _run(str(EXAMPLES / "parallel_fanout.py"), backend)
    assert done.returncode == 0, done.stderr
    rows = re.findall(r"^(completed|not_started|stopped)\s+(\S+)\s+(.+)$", done.stdout, re.M)
    assert len(rows) == 12
    assert [s for s, _, _ in rows].count("completed") == 8
    assert all(label == "-" for status, label, _ in rows if status != "completed")
    labels = {review: label for status, label, review in rows if status == "completed"}
    assert labels["Great battery life, I love it"] == "positive"
    assert labels["Broke after two days, terrible"] == "negative"
    assert labels["It is fine, does the job"] == "neutral"
    assert "batch: request_limit; 8 of 8 requests" in done.stdout


@pytest.mark.parametrize("backend", BACKENDS)
def test_exclusive_and_owned(backend: str) -> None:
    done = _run(str(EXAMPLES / "exclusive_and_owned.py"), backend)
    assert done.returncode == 0, done.stderr
    exclusive, owned = done.stdout.split("owned:", 1)
    # Overlap: one holder completes, the other fails at once; then the lease is free.
    assert "turn 1: 1 of 2 delegations completed" in exclusive
    assert re.search(r"failed\s+setup_error\s+Open \S+ - The exclusive delegation", exclusive)
    assert "turn 2: 1 of 1 delegations completed" in exclusive
    closed = re.findall(r"browser \d+: visited (\S+), closed (\d+) time", owned)
    assert sorted(url for url, _ in closed) == ["a.example", "b.example", "c.example"]
    assert all(times == "1" for _, times in closed)


@pytest.mark.parametrize("backend", BACKENDS)
def test_custom_provider(backend: str) -> None:
    done = _run(str(EXAMPLES / "custom_provider.py"), backend)
    assert done.returncode == 0, done.stderr
    assert "'Summarize the design decisions' -> summarizer says:" in done.stdout
    assert "'Review this source code for bugs' -> code_reviewer says:" in done.stdout


def test_custom_provider_as_cli_plugin() -> None:
    done = _run(
        "-m",
        "deputy_runtime",
        "run",
        *("--plugin", "examples/custom_provider.py", "--model", "keyword/v1"),
        *("--agents", "examples/agents", "Summarize the README decisions"),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Model: keyword/v1 (from --model)\n")
    assert "summarizer: delegation completed (complete)" in done.stdout
    assert done.stdout.rstrip().endswith("summarizer would handle: Summarize the README decisions")


def _readme_embedding_example() -> str:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Embedding", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "README's Embedding section should hold one python block"
    return str(blocks[0])


def test_readme_embedding_example_is_short() -> None:
    code = [line for line in _readme_embedding_example().splitlines() if line.strip()]
    assert len(code) <= 25


@pytest.mark.parametrize("backend", BACKENDS)
def test_readme_embedding_example_runs(tmp_path: Path, backend: str) -> None:
    code = _readme_embedding_example()
    if backend == "trio":
        code = code.replace("anyio.run(main)", 'anyio.run(main, backend="trio")')
        assert 'backend="trio"' in code
    script = tmp_path / "embedding.py"
    script.write_text(code, encoding="utf-8")
    done = _run(str(script))  # from the repository root, so README.md is there to review
    assert done.returncode == 0, done.stderr
    assert re.search(r"^reviewer completed complete 2$", done.stdout, re.M), done.stdout
    assert "  reviewer: ToolStart" in done.stdout
    assert "Summary of 1 tool result(s):\n- reviewer found: " in done.stdout  # the answer


@pytest.mark.parametrize("backend", BACKENDS)
def test_mcp_delegation(backend: str) -> None:
    done = _run(str(EXAMPLES / "mcp_delegation.py"), backend)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    # Owned: each researcher started its own files server and read through it.
    files = re.findall(r"researcher: mcp server files start \(pid (\d+)\)", out)
    assert len(set(files)) == 2, out
    for pid in files:
        assert f"researcher: mcp__files__whoami -> {{'result': {pid}}}" in out
        assert f"researcher: mcp server files stop (pid {pid})" in out
    assert "mcp__files__read_file -> {'result': 'oat milk\\n'}" in out
    # Shared: one notes server, stopped when the lead closed (after the answer).
    notes = re.findall(r"mcp server notes start \(pid (\d+)\)", out)
    assert len(notes) == 1, out
    stopped = out.index(f"notes server stopped (closed, pid {notes[0]})")
    assert out.index("answer:") < stopped < out.index("lead closed")
    assert out.count("completed") == 3
