"""Crash safety and races of writing, with real processes killed by SIGKILL mid-write."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from deputy_runtime.definitions import agent_definition, agent_definition_read
from deputy_runtime.definitions import agent_definition_write as write_definition
from deputy_runtime.definitions._files import TEMP_PREFIX
from deputy_runtime.errors import DefinitionFileError

REPO_ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL and fork")

# The writer alternates two definitions for ever, reporting each completed write; the
# parent kills it during a write cycle of its choosing, at a random moment in that cycle.
WRITER = """
import sys
from deputy_runtime.definitions import agent_definition, agent_definition_write
dest = sys.argv[1]
versions = [
    agent_definition("old", "The old one", "Old prompt.\\n" * 200),
    agent_definition("new", "The new one", "New prompt, longer.\\n" * 600),
]
i = 0
while True:
    agent_definition_write(versions[i % 2], dest, overwrite=True)
    print("wrote", i, flush=True)
    i += 1
"""

# Each racer waits for "go" on stdin, then tries to create the same file without overwrite.
RACER = """
import sys
from deputy_runtime.definitions import agent_definition, agent_definition_write
from deputy_runtime.errors import DefinitionFileError
definition = agent_definition(f"writer_{sys.argv[2]}", "Racer", "Race.\\n" * 500)
print("ready", flush=True)
sys.stdin.readline()
try:
    agent_definition_write(definition, sys.argv[1])
except DefinitionFileError as exc:
    print(exc.reason, flush=True)
    sys.exit(3)
print("won", flush=True)
"""


def child(script: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


def temp_files(directory: Path) -> list[str]:
    return [name for name in os.listdir(directory) if name.startswith(TEMP_PREFIX)]


@pytest.mark.slow
def test_sigkill_mid_write_leaves_old_or_new_bytes(tmp_path: Path) -> None:
    dest = tmp_path / "agent.yaml"
    old = agent_definition("old", "The old one", "Old prompt.\n" * 200)
    new = agent_definition("new", "The new one", "New prompt, longer.\n" * 600)
    write_definition(old, tmp_path / "old.yaml")
    write_definition(new, tmp_path / "new.yaml")
    allowed = {(tmp_path / "old.yaml").read_bytes(), (tmp_path / "new.yaml").read_bytes()}
    rng = random.Random(1234)
    seen: set[bytes] = set()
    for _ in range(30):
        process = child(WRITER, str(dest))
        assert process.stdout is not None
        for expected in range(rng.randint(1, 4)):
            assert process.stdout.readline() == f"wrote {expected}\n"
        threading.Event().wait(rng.uniform(0.0, 0.01))
        process.send_signal(signal.SIGKILL)
        process.wait()
        process.stdout.close()
        assert process.stdin is not None
        process.stdin.close()
        data = dest.read_bytes()
        assert data in allowed, "destination is partial"
        seen.add(data)
        assert agent_definition_read(dest).name in {"old", "new"}
        # Only the killed writer's own temporary file may remain; the next writer sweeps it.
        leftovers = temp_files(tmp_path)
        assert len(leftovers) <= 1, leftovers
        assert all(f"-{process.pid}-" in name for name in leftovers)
    assert seen == allowed, "the kills never landed between the two versions"


@pytest.mark.slow
def test_concurrent_no_overwrite_processes_exactly_one_wins(tmp_path: Path) -> None:
    dest = tmp_path / "agent.yaml"
    racers = [child(RACER, str(dest), str(i)) for i in range(8)]
    for racer in racers:
        assert racer.stdout is not None
        assert racer.stdout.readline() == "ready\n"
    for racer in racers:
        assert racer.stdin is not None
        racer.stdin.write("go\n")
        racer.stdin.flush()
    outputs = [racer.communicate(timeout=60)[0] for racer in racers]
    winners = [i for i, racer in enumerate(racers) if racer.returncode == 0]
    assert len(winners) == 1, outputs
    for i, racer in enumerate(racers):
        if i != winners[0]:
            assert racer.returncode == 3
            assert "File already exists" in outputs[i]
    assert agent_definition_read(dest).name == f"writer_{winners[0]}"
    assert os.listdir(tmp_path) == ["agent.yaml"]


def test_concurrent_no_overwrite_threads_exactly_one_wins(tmp_path: Path) -> None:
    definitions = [agent_definition(f"writer_{i}", "Racer", "Race.") for i in range(16)]
    for round_number in range(10):
        dest = tmp_path / f"agent{round_number}.yaml"
        barrier = threading.Barrier(len(definitions))
        results: dict[int, str] = {}

        def race(
            index: int,
            dest: Path = dest,
            barrier: threading.Barrier = barrier,
            results: dict[int, str] = results,
        ) -> None:
            barrier.wait()
            try:
                write_definition(definitions[index], dest)
                results[index] = "won"
            except DefinitionFileError as exc:
                results[index] = exc.reason

        threads = [threading.Thread(target=race, args=(i,)) for i in range(len(definitions))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        winners = [i for i, outcome in results.items() if outcome == "won"]
        assert len(winners) == 1
        assert all(
            outcome.startswith("File already exists")
            for outcome in results.values()
            if outcome != "won"
        )
        assert agent_definition_read(dest).name == f"writer_{winners[0]}"
    assert temp_files(tmp_path) == []
