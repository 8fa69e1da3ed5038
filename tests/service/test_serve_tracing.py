"""``deputy-runtime serve --otlp``: a run continues the caller's W3C traceparent.

A real server process exports its spans over OTLP/HTTP to a real collector endpoint
served by this test (a threaded HTTP server decoding the protobuf export requests).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.service.otlp import Collector, running_collector
from tests.service.serving import TOKEN, agents_dir, sse_messages, start_server

pytestmark = pytest.mark.slow


@pytest.fixture
def collector() -> Iterator[Collector]:
    with running_collector() as c:
        yield c


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_post_runs_with_traceparent_continues_the_callers_trace(
    backend: str, tmp_path: Path, collector: Collector
) -> None:
    agents = agents_dir(tmp_path / "agents", "quick_a")
    server = start_server(
        tmp_path,
        *("--agents", str(agents), "--backend", backend, "--otlp", collector.url),
    )
    trace_id = secrets.token_hex(16)
    parent_id = secrets.token_hex(8)
    try:
        with server.client() as client:
            runs = []
            for headers in ({"traceparent": f"00-{trace_id}-{parent_id}-01"}, {}):
                response = client.post(
                    "/runs", json={"task": "Do the work", "agents": ["quick_a"]}, headers=headers
                )
                assert response.status_code == 201, response.text
                runs.append(response.json()["id"])
            for run_id in runs:
                with client.stream("GET", f"/runs/{run_id}/events") as stream:
                    for message in sse_messages(stream.iter_lines()):
                        if message.get("event") == "end":
                            break
    finally:
        status, stderr = server.stop()
    assert status == 0, stderr
    assert "Traceback" not in stderr, stderr
    # Shutdown flushed the batch: every span has arrived.
    runs_spans = [
        s
        for s in collector.spans
        if s.name.startswith("invoke_agent ")
        and any(a.key == "deputy.run.id" for a in s.attributes)
        and not any(a.key == "deputy.delegation.id" for a in s.attributes)
    ]
    assert len(runs_spans) == 2, [s.name for s in collector.spans]
    continued = [s for s in runs_spans if s.trace_id.hex() == trace_id]
    assert len(continued) == 1
    assert continued[0].parent_span_id.hex() == parent_id
    [fresh] = [s for s in runs_spans if s.trace_id.hex() != trace_id]
    assert fresh.parent_span_id == b""
    # The continued run's model requests are in the caller's trace, under its run span.
    children = [s for s in collector.spans if s.parent_span_id == continued[0].span_id]
    assert children
    assert all(s.trace_id.hex() == trace_id for s in children)
    assert TOKEN not in repr(collector.spans)
