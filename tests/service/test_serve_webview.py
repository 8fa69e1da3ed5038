"""What the web view needs from the server: the run list, the model, a favicon, JSON errors.

A real server process per anyio backend (module scope) and a real HTTP client; every
test checks the status code, the content type and the body of the real response.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from deputy_runtime import LeadAgent
from deputy_runtime.service.app import build_app
from deputy_runtime.service.config import Resolved, ServiceConfig
from deputy_runtime.service.runs import Run, RunManager
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


class Live:
    def __init__(self, server: Server, markers: Path) -> None:
        self.server = server
        self.markers = markers


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    tmp = tmp_path_factory.mktemp(f"webview-{request.param}")
    agents = agents_dir(tmp / "agents", "quick_a", "slow_one")
    markers = tmp / "markers"
    markers.mkdir()
    tokens = tmp / "tokens"
    tokens.write_text(f"{TOKEN}\n{OTHER_TOKEN}\n", encoding="utf-8")
    server = start_server(
        tmp,
        *("--agents", str(agents), "--plugin", str(PLUGIN), "--backend", request.param),
        *("--token-file", str(tokens), "--rate", "1000", "--burst", "1000"),
        env=offline_env(SERVE_PLUGIN_DIR=str(markers)),
        token=None,
    )
    yield Live(server, markers)
    (markers / "release").touch()
    status, stderr = server.stop()
    assert status == 0, stderr
    assert "Traceback" not in stderr, stderr


def _json_error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert list(body) == ["error"], body
    assert isinstance(body["error"], str)
    assert body["error"]
    return str(body["error"])


def _until_end(client: httpx.Client, run_id: str) -> dict[str, object]:
    with client.stream("GET", f"/runs/{run_id}/events") as response:
        assert response.status_code == 200
        for message in sse_messages(response.iter_lines()):
            if message.get("event") == "end":
                return dict(json.loads(message["data"]))
    raise AssertionError("the event stream closed without event: end")


def test_the_favicon_is_a_public_png_linked_from_the_page(live: Live) -> None:
    response = httpx.get(f"{live.server.url}/favicon.ico")  # no token
    assert response.status_code == 200
    assert response.headers["content-type"] == "image/png"
    assert response.content.startswith(b"\x89PNG\r\n\x1a\n")
    assert int.from_bytes(response.content[16:20], "big") == 32  # 32 pixels wide
    assert len(response.content) < 2048
    page = httpx.get(f"{live.server.url}/")
    assert page.status_code == 200
    assert '<link rel="icon" href="/favicon.ico" type="image/png">' in page.text


@pytest.mark.parametrize(
    ("method", "path", "status", "message"),
    [
        ("GET", "/nope", 404, "no route GET /nope"),
        ("GET", "/runs/run_x/nope", 404, "no route GET /runs/run_x/nope"),
        ("POST", "/favicon.ico.bak", 404, "no route POST /favicon.ico.bak"),
        ("DELETE", "/runs", 405, "DELETE is not allowed on /runs"),
        ("PUT", "/agents", 405, "PUT is not allowed on /agents"),
        ("GET", "/runs/run_x/interrupt", 405, "GET is not allowed on /runs/run_x/interrupt"),
    ],
)
def test_unknown_routes_and_methods_answer_in_the_json_error_shape(
    live: Live, method: str, path: str, status: int, message: str
) -> None:
    with live.server.client() as client:
        assert _json_error(client.request(method, path), status) == message


def test_an_unknown_route_without_a_token_is_a_json_401(live: Live) -> None:
    # Authentication comes before routing: the paths that exist are not revealed.
    response = httpx.get(f"{live.server.url}/nope")
    assert _json_error(response, 401) == "missing or invalid bearer token"
    assert response.headers["www-authenticate"] == "Bearer"


def test_a_page_file_with_a_wrong_method_is_a_json_405(live: Live) -> None:
    response = httpx.post(f"{live.server.url}/app.js")
    assert _json_error(response, 405) == "POST is not allowed on /app.js"


def test_the_run_list_holds_live_and_finished_runs_of_this_token_newest_first(
    live: Live,
) -> None:
    with live.server.client() as client, live.server.client(OTHER_TOKEN) as other:
        done = client.post("/runs", json={"task": "First: quick", "agents": ["quick_a"]})
        assert done.status_code == 201
        done_id = done.json()["id"]
        assert _until_end(client, done_id)["status"] == "completed"
        slow = client.post("/runs", json={"task": "Second: " + "x" * 300, "agents": ["slow_one"]})
        assert slow.status_code == 201
        slow_id = slow.json()["id"]
        theirs = other.post("/runs", json={"task": "Not yours", "agents": ["quick_a"]})
        assert theirs.status_code == 201

        response = client.get("/runs")
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json"
        runs = response.json()["runs"]
        ids = [r["id"] for r in runs]
        assert theirs.json()["id"] not in ids
        assert ids.index(slow_id) < ids.index(done_id)  # newest first
        listed = {r["id"]: r for r in runs}
        assert listed[slow_id]["status"] == "running"
        assert listed[slow_id]["finished_at"] is None
        assert listed[slow_id]["task"] == ("Second: " + "x" * 300)[:200]
        assert listed[done_id]["status"] == "completed"
        assert listed[done_id]["finished_at"] >= listed[done_id]["created_at"]
        assert listed[done_id]["model"] == "test"
        assert listed[done_id]["provider"] == "test"
        assert set(listed[done_id]) == {
            "id",
            "status",
            "task",
            "model",
            "provider",
            "created_at",
            "finished_at",
        }
        assert other.get("/runs").json()["runs"][0]["id"] == theirs.json()["id"]

        interrupted = client.post(f"/runs/{slow_id}/interrupt")
        assert interrupted.status_code == 202
        (live.markers / "release").touch()
        assert _until_end(client, slow_id)["status"] == "interrupted"
        after = {r["id"]: r for r in client.get("/runs").json()["runs"]}
        assert after[slow_id]["status"] == "interrupted"


def test_a_run_shows_its_model_and_per_delegation_usage(live: Live) -> None:
    with live.server.client() as client:
        started = client.post("/runs", json={"task": "Look", "agents": ["quick_a"]})
        run_id = started.json()["id"]
        _until_end(client, run_id)
        response = client.get(f"/runs/{run_id}")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    run = response.json()
    assert (run["model"], run["provider"]) == ("test", "test")
    (record,) = run["records"]
    usage = record["usage"]
    assert usage["requests"] == 2  # the subagent's tool call, then its answer
    assert usage["input_tokens"] > 0
    assert usage["output_tokens"] > 0
    assert "cost_usd" in usage  # None: the offline model has no prices
    assert run["result"]["usage"]["requests"] >= usage["requests"]


def _no_lead(resolved: Resolved) -> LeadAgent:
    raise AssertionError("no run is started here")


@pytest.mark.anyio
async def test_an_unexpected_failure_is_a_json_500_naming_only_the_type(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # No route fails on its own, so the failure is injected into the run store (the one
    # stand-in here); the app, its routes and its error handlers are the real ones.
    def broken(owner: int) -> list[Run]:
        raise RuntimeError("the store broke: secret detail")

    async with anyio.create_task_group() as tg:
        manager = RunManager(ServiceConfig(), agents=(), make_lead=_no_lead, task_group=tg)
        monkeypatch.setattr(manager, "runs_of", broken)
        app = build_app(manager, {}, None)  # no tokens: every request is client 0
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:
            response = await client.get("/runs")
            healthy = await client.get("/healthz")
    assert _json_error(response, 500) == "internal server error (RuntimeError)"
    assert "secret" not in response.text
    assert healthy.json() == {"status": "ok"}
