"""SIGTERM while 20 delegations are running: exit 0, every owned resource cleaned.

The delegations' tools (``serve_plugin.py``) wait on a file that is never created, so
they are really running when the signal arrives; the server interrupts the run, cancels
it after ``--shutdown-grace``, and every owned cleanup still runs exactly once (O_EXCL
marker files). A client following the run's events receives the end of the stream.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from tests.service.serving import PLUGIN, agents_dir, offline_env, sse_messages, start_server

pytestmark = pytest.mark.slow

DELEGATIONS = 20


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_sigterm_during_running_delegations_cleans_up_and_exits_0(
    tmp_path: Path, backend: str
) -> None:
    names = [f"slow_{i:02d}" for i in range(DELEGATIONS)]
    agents = agents_dir(tmp_path / "agents", *names)
    markers = tmp_path / "markers"
    markers.mkdir()
    server = start_server(
        tmp_path,
        *("--agents", str(agents), "--backend", backend, "--plugin", str(PLUGIN)),
        *("--test-fanout", str(DELEGATIONS), "--max-requests", "100"),
        *("--shutdown-grace", "1"),
        env=offline_env(SERVE_PLUGIN_DIR=str(markers)),
    )
    stream_messages: list[dict[str, str]] = []
    try:
        with server.client() as client:
            run_id = client.post("/runs", json={"task": "Everyone wait"}).json()["id"]
            started = threading.Event()

            def follow() -> None:
                waiting = 0
                with (
                    server.client() as reader,
                    reader.stream("GET", f"/runs/{run_id}/events") as response,
                ):
                    for message in sse_messages(response.iter_lines()):
                        stream_messages.append(message)
                        event = json.loads(message["data"]) if "id" in message else {}
                        if event.get("tool_name") == "wait_for_release":
                            waiting += event["type"] == "tool_start"
                            if waiting == DELEGATIONS:
                                started.set()

            follower = threading.Thread(target=follow, daemon=True)
            follower.start()
            assert started.wait(timeout=120), "the 20 delegations never all started"
            records = client.get(f"/runs/{run_id}").json()["records"]
            assert [r["status"] for r in records] == ["running"] * DELEGATIONS
    finally:
        status, stderr = server.stop(timeout=120)
    follower.join(timeout=30)
    assert status == 0, stderr
    assert "Traceback" not in stderr, stderr
    assert "shutting down" in stderr
    created = {p.name.removeprefix("created-") for p in markers.glob("created-*")}
    cleaned = {p.name.removeprefix("cleaned-") for p in markers.glob("cleaned-*")}
    assert len(created) == DELEGATIONS
    assert cleaned == created
    assert not (markers / "release").exists()  # nothing let the tools finish normally
    end = stream_messages[-1]
    assert end.get("event") == "end", stream_messages[-3:]
    assert json.loads(end["data"])["status"] == "interrupted"
    seen = [json.loads(m["data"]) for m in stream_messages if "id" in m]
    ended = [e for e in seen if e["type"] == "delegation_end"]
    assert len(ended) == DELEGATIONS
    assert {e["stop_reason"] for e in ended} == {"interrupted"}
