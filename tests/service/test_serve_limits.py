"""429s: the per-token request rate and the bound on active runs (real server process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.service.serving import (
    OTHER_TOKEN,
    PLUGIN,
    TOKEN,
    agents_dir,
    offline_env,
    sse_messages,
    start_server,
)

pytestmark = pytest.mark.slow

BURST = 6


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_burst_over_the_rate_gets_429_with_retry_after(tmp_path: Path, backend: str) -> None:
    agents = agents_dir(tmp_path / "agents", "quick_a")
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN}\n{OTHER_TOKEN}\n", encoding="utf-8")
    # One request per 1000 s after the burst: nothing refills while the test runs.
    server = start_server(
        tmp_path,
        *("--agents", str(agents), "--backend", backend, "--token-file", str(tokens)),
        *("--burst", str(BURST), "--rate", "0.001"),
        token=None,
    )
    try:
        with server.client() as client, server.client(OTHER_TOKEN) as other:
            responses = [client.get("/agents") for _ in range(BURST + 4)]
            other_status = other.get("/agents").status_code
            health = client.get("/healthz").status_code
    finally:
        status, stderr = server.stop()
    statuses = [r.status_code for r in responses]
    assert statuses == [200] * BURST + [429] * 4
    for refused in responses[BURST:]:
        assert int(refused.headers["retry-after"]) >= 1
        assert refused.json() == {"error": "too many requests for this token"}
    assert other_status == 200  # buckets are per token
    assert health == 200  # /healthz is not rate limited
    assert status == 0, stderr


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_runs_over_max_runs_get_429_until_one_ends(tmp_path: Path, backend: str) -> None:
    agents = agents_dir(tmp_path / "agents", "slow_one")
    markers = tmp_path / "markers"
    markers.mkdir()
    server = start_server(
        tmp_path,
        *("--agents", str(agents), "--backend", backend, "--plugin", str(PLUGIN)),
        *("--max-runs", "1"),
        env=offline_env(SERVE_PLUGIN_DIR=str(markers)),
    )
    try:
        with server.client() as client:
            first = client.post("/runs", json={"task": "wait"})
            assert first.status_code == 201, first.text
            busy = client.post("/runs", json={"task": "wait too"})
            run_id = first.json()["id"]
            (markers / "release").touch()
            with client.stream("GET", f"/runs/{run_id}/events") as stream:
                ends = [m for m in sse_messages(stream.iter_lines()) if m.get("event") == "end"]
            after = client.post("/runs", json={"task": "now there is room"})
    finally:
        status, stderr = server.stop()
    assert busy.status_code == 429
    assert busy.headers["retry-after"] == "1"
    assert "--max-runs" in busy.json()["error"]
    assert json.loads(ends[0]["data"])["status"] == "completed"
    assert after.status_code == 201
    assert status == 0, stderr


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_event_log_is_bounded_and_says_what_it_dropped(tmp_path: Path, backend: str) -> None:
    agents = agents_dir(tmp_path / "agents", "quick_a", "quick_b")
    markers = tmp_path / "markers"
    markers.mkdir()
    server = start_server(
        tmp_path,
        *("--agents", str(agents), "--backend", backend, "--plugin", str(PLUGIN)),
        *("--event-log-size", "5"),
        env=offline_env(SERVE_PLUGIN_DIR=str(markers)),
    )
    try:
        with server.client() as client:
            run_id = client.post("/runs", json={"task": "work"}).json()["id"]
            with client.stream("GET", f"/runs/{run_id}/events") as stream:
                list(sse_messages(stream.iter_lines()))  # until the run has ended
            total = client.get(f"/runs/{run_id}").json()["events"]
            with client.stream("GET", f"/runs/{run_id}/events") as stream:
                replay = list(sse_messages(stream.iter_lines()))
            with client.stream(
                "GET", f"/runs/{run_id}/events", headers={"Last-Event-ID": str(total - 2)}
            ) as stream:
                tail = list(sse_messages(stream.iter_lines()))
    finally:
        status, stderr = server.stop()
    assert total > 5
    assert replay[0]["event"] == "truncated"
    assert json.loads(replay[0]["data"]) == {"dropped": total - 5}
    assert [int(m["id"]) for m in replay[1:-1]] == list(range(total - 4, total + 1))
    assert json.loads(replay[1 + 4]["data"])["type"] == "stop"
    assert replay[-1]["event"] == "end"
    # resuming within what is kept loses nothing and reports no gap
    assert [m.get("event", "message") for m in tail] == ["message", "message", "end"]
    assert [int(m["id"]) for m in tail[:2]] == [total - 1, total]
    assert status == 0, stderr
