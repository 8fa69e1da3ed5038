"""The service's endpoints against a real server process and a real HTTP client.

One server per anyio backend (module scope) serves every test here; tests that need a
delegation to stay running use agents named ``slow*`` from ``serve_plugin.py``, whose
tool waits until the test creates ``release-<delegation id>``.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.service.serving import (
    OTHER_TOKEN,
    PLUGIN,
    TOKEN,
    Server,
    agents_dir,
    offline_env,
    sse_messages,
    start_server,
)

pytestmark = pytest.mark.slow

MAX_BODY = 4096
CEILING = 20


class Live:
    """The module's server and the directory its plugin writes markers into."""

    def __init__(self, server: Server, markers: Path) -> None:
        self.server = server
        self.markers = markers

    def release(self, delegation_id: str) -> None:
        (self.markers / f"release-{delegation_id}").touch()


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    tmp = tmp_path_factory.mktemp(f"serve-{request.param}")
    agents = agents_dir(tmp / "agents", "quick_a", "quick_b", "slow_one")
    markers = tmp / "markers"
    markers.mkdir()
    tokens = tmp / "tokens"
    tokens.write_text(f"# clients\n{TOKEN}\n\n{OTHER_TOKEN}\n", encoding="utf-8")
    server = start_server(
        tmp,
        *("--agents", str(agents), "--plugin", str(PLUGIN), "--backend", request.param),
        *("--token-file", str(tokens), "--max-requests", str(CEILING)),
        *("--max-body-bytes", str(MAX_BODY), "--rate", "1000", "--burst", "1000"),
        env=offline_env(SERVE_PLUGIN_DIR=str(markers)),
        token=None,
    )
    yield Live(server, markers)
    (markers / "release").touch()  # let anything still waiting finish
    status, stderr = server.stop()
    assert status == 0, stderr
    assert "Traceback" not in stderr, stderr


def start(client: httpx.Client, **body: object) -> str:
    response = client.post("/runs", json={"task": "Do the work", **body})
    assert response.status_code == 201, response.text
    run_id = str(response.json()["id"])
    assert response.headers["location"] == f"/runs/{run_id}"
    return run_id


def events(
    client: httpx.Client, run_id: str, last_event_id: int | None = None
) -> Generator[dict[str, str], None, None]:
    """The run's SSE messages as they arrive (the stream closes when the generator does)."""
    headers = {} if last_event_id is None else {"Last-Event-ID": str(last_event_id)}
    with client.stream("GET", f"/runs/{run_id}/events", headers=headers) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        yield from sse_messages(response.iter_lines())


def until_end(messages: Iterator[dict[str, str]]) -> tuple[list[dict[str, str]], dict[str, str]]:
    seen: list[dict[str, str]] = []
    for message in messages:
        if message.get("event") == "end":
            return seen, message
        seen.append(message)
    raise AssertionError(f"the stream closed without an end message after {len(seen)}")


def waiting_delegation(messages: Iterator[dict[str, str]], agent: str) -> tuple[str, int]:
    """Read until ``agent``'s slow tool is running; its delegation id and the last id read."""
    last = 0
    for message in messages:
        last = int(message.get("id", last))
        event = json.loads(message["data"])
        if event["type"] == "tool_start" and event["agent_name"] == agent:
            return str(event["delegation_id"]), last
    raise AssertionError(f"{agent} never started its tool")


ENDPOINTS = [
    ("GET", "/agents"),
    ("POST", "/runs"),
    ("GET", "/runs"),
    ("GET", "/runs/run_x"),
    ("GET", "/runs/run_x/events"),
    ("POST", "/runs/run_x/interrupt"),
    ("POST", "/runs/run_x/delegations/delegation_y/interrupt"),
]


def test_healthz_answers_without_a_token(live: Live) -> None:
    response = httpx.get(f"{live.server.url}/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong-token-0123456789abcdef", f"Basic {TOKEN}", f"Bearer {TOKEN}x", "Bearer"],
)
def test_every_other_endpoint_needs_a_valid_token(
    live: Live, method: str, path: str, authorization: str | None
) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    response = httpx.request(
        method, live.server.url + path, headers=headers, json={"task": "x"}, timeout=30
    )
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json() == {"error": "missing or invalid bearer token"}


def test_agents_lists_the_loaded_definitions(live: Live) -> None:
    with live.server.client() as client:
        agents = client.get("/agents").json()["agents"]
    assert [a["name"] for a in agents] == ["quick_a", "quick_b", "slow_one"]
    assert agents[0]["description"] == "quick_a agent used by the service tests."
    assert agents[0]["max_requests"] == 3
    assert agents[0]["permission_mode"] == "readonly"
    assert agents[0]["color"] is None  # a YAML definition has no colour


def test_a_run_streams_every_event_then_reports_its_result(live: Live) -> None:
    with live.server.client() as client:
        run_id = start(client, agents=["quick_a", "quick_b"], max_requests=10)
        seen, end = until_end(events(client, run_id))
        run = client.get(f"/runs/{run_id}").json()
    ids = [int(m["id"]) for m in seen]
    assert ids == list(range(1, len(ids) + 1))
    assert json.loads(end["data"]) == {"status": "completed", "events": len(ids)}
    types = [json.loads(m["data"])["type"] for m in seen]
    assert types[0] == "run_start"
    assert types[-2:] == ["usage", "stop"]
    assert types.count("delegation_end") == 2
    assert run["status"] == "completed"
    assert run["events"] == len(ids)
    assert run["agents"] == ["quick_a", "quick_b"]
    assert run["limits"]["max_requests"] == 10
    assert run["result"]["stop_reason"] == "complete"
    assert run["result"]["response"]
    records = {r["agent_name"]: r for r in run["records"]}
    assert set(records) == {"quick_a", "quick_b"}
    assert all(r["status"] == "completed" for r in records.values())
    # owned resources: one created and one cleaned marker per delegation
    for record in records.values():
        assert (live.markers / f"created-{record['delegation_id']}").exists()
        assert (live.markers / f"cleaned-{record['delegation_id']}").exists()


def test_a_run_is_invisible_to_another_token(live: Live) -> None:
    with live.server.client() as client, live.server.client(OTHER_TOKEN) as other:
        run_id = start(client, agents=["quick_a"])
        until_end(events(client, run_id))
        assert other.get(f"/runs/{run_id}").status_code == 404
        assert other.get(f"/runs/{run_id}/events").status_code == 404
        assert other.post(f"/runs/{run_id}/interrupt").status_code == 404
        assert client.get("/runs/run_nope").status_code == 404


def test_an_oversize_body_is_refused_with_413(live: Live) -> None:
    body = json.dumps({"task": "x" * MAX_BODY}).encode()
    with live.server.client() as client:
        response = client.post("/runs", content=body, headers={"Content-Type": "application/json"})
        assert response.status_code == 413
        assert str(MAX_BODY) in response.json()["error"]

        def chunks() -> Iterator[bytes]:  # no Content-Length: counted while read
            for start in range(0, len(body), 512):
                yield body[start : start + 512]

        response = client.post("/runs", content=chunks())
        assert response.status_code == 413


@pytest.mark.parametrize(
    ("body", "status", "names"),
    [
        (b"{not json", 400, "not valid JSON"),
        (b'{"task": 5}', 422, "$.task"),
        (b'{"task": ""}', 422, "$.task"),
        (b'{"task": "   "}', 422, "task: must not be blank"),
        (b'{"task": "x", "extra": 1}', 422, "extra"),
        (b'{"task": "x", "max_requests": 0}', 422, "$.max_requests"),
        (b'{"task": "x", "max_requests": 21}', 422, "max_requests: 21 is above the server's"),
        (b'{"task": "x", "permission_mode": "full"}', 422, "permission_mode: 'full' is wider"),
        (b'{"task": "x", "permission_mode": "root"}', 422, "$.permission_mode"),
        (b'{"task": "x", "agents": ["nobody"]}', 422, "agents[0]: no agent named 'nobody'"),
        (b'{"task": "x", "agents": []}', 422, "agents: must name at least one"),
    ],
)
def test_bad_run_requests_name_the_field(live: Live, body: bytes, status: int, names: str) -> None:
    with live.server.client() as client:
        response = client.post("/runs", content=body)
    assert response.status_code == status, response.text
    assert names in response.json()["error"]


def test_a_narrower_mode_is_accepted(live: Live) -> None:
    with live.server.client() as client:
        run_id = start(client, agents=["quick_a"], permission_mode="readonly")
        until_end(events(client, run_id))
        assert client.get(f"/runs/{run_id}").json()["permission_mode"] == "readonly"


def test_sse_resumes_with_last_event_id_without_losing_events(live: Live) -> None:
    with live.server.client() as client:
        run_id = start(client, agents=["slow_one", "quick_a"])
        first = events(client, run_id)
        delegation_id, last = waiting_delegation(first, "slow_one")
        first.close()  # the client disconnects mid-run
        live.release(delegation_id)
        rest, end = until_end(events(client, run_id, last_event_id=last))
        whole, _ = until_end(events(client, run_id))
    resumed = list(range(1, last + 1)) + [int(m["id"]) for m in rest]
    assert resumed == list(range(1, len(whole) + 1))
    assert [m["data"] for m in rest] == [m["data"] for m in whole[last:]]
    assert json.loads(end["data"])["status"] == "completed"
    with live.server.client() as client:
        bad = client.get(f"/runs/{run_id}/events", headers={"Last-Event-ID": "abc"})
    assert bad.status_code == 400
    assert "Last-Event-ID" in bad.json()["error"]


def test_interrupting_one_delegation_stops_only_it(live: Live) -> None:
    with live.server.client() as client:
        run_id = start(client, agents=["slow_one", "quick_a"])
        stream = events(client, run_id)
        delegation_id, _ = waiting_delegation(stream, "slow_one")
        path = f"/runs/{run_id}/delegations/{delegation_id}/interrupt"
        response = client.post(path)
        assert response.status_code == 202, response.text
        unknown = f"/runs/{run_id}/delegations/delegation_nope/interrupt"
        assert client.post(unknown).status_code == 404
        live.release(delegation_id)  # the tool returns; the next boundary stops it
        _, end = until_end(stream)
        run = client.get(f"/runs/{run_id}").json()
        assert client.post(path).status_code == 409
        assert client.post(f"/runs/{run_id}/interrupt").status_code == 409
    assert json.loads(end["data"])["status"] == "completed"
    records = {r["agent_name"]: r for r in run["records"]}
    assert (records["slow_one"]["status"], records["slow_one"]["stop_reason"]) == (
        "stopped",
        "interrupted",
    )
    assert records["quick_a"]["status"] == "completed"


def test_interrupting_the_run_stops_the_lead_and_its_delegations(live: Live) -> None:
    with live.server.client() as client:
        run_id = start(client, agents=["slow_one"])
        stream = events(client, run_id)
        delegation_id, _ = waiting_delegation(stream, "slow_one")
        assert client.post(f"/runs/{run_id}/interrupt").status_code == 202
        live.release(delegation_id)
        _, end = until_end(stream)
        run = client.get(f"/runs/{run_id}").json()
    assert json.loads(end["data"])["status"] == "interrupted"
    assert run["status"] == "interrupted"
    assert run["result"]["stop_reason"] == "interrupted"
    assert run["records"][0]["stop_reason"] == "interrupted"
