"""Load test of ``deputy-runtime serve``: many concurrent runs on the offline model.

    python benchmarks/service_load.py                      # 200 runs at once, asyncio
    python benchmarks/service_load.py --backend trio --runs 100
    python benchmarks/service_load.py --json               # one JSON object on stdout

By default the server runs in a fresh temporary directory over three generated
tool-free definitions (``--agents DIR`` to use others), so the lead's file tools touch
an empty directory and what is measured is the service and the runtime, not grep over
a checkout. It starts a real server on a free 127.0.0.1 port (``--max-runs`` = ``--runs``, a rate
limit high enough not to refuse the load), starts every run at once with a real HTTP
client and follows each run's server-sent events to the end. A run counts as an error
when any request fails or is refused, or when its events are not complete: ids must be
1..N without a gap, the last event must be the lead's ``stop``, and ``event: end`` must
report N events and a final status. Latencies are per run, from the POST to the end of
its event stream (``run``), to the POST's answer (``start``) and to its first event
(``first_event``); the percentiles are nearest-rank over all runs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
TOKEN = "load-test-token-" + "0123456789abcdef"


def percentiles(values: list[float]) -> dict[str, float]:
    """p50, p90, p99 and max (nearest rank), in milliseconds."""
    ordered = sorted(values)
    if not ordered:
        return {}

    def rank(p: float) -> float:
        return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)] * 1000

    return {"p50": rank(50), "p90": rank(90), "p99": rank(99), "max": ordered[-1] * 1000}


async def one_run(client: httpx.AsyncClient, index: int) -> dict[str, Any]:
    """Start one run and follow its events; what happened, and how long it took."""
    began = time.perf_counter()
    outcome: dict[str, Any] = {"index": index, "error": None}
    try:
        response = await client.post("/runs", json={"task": f"Load run {index}"})
        outcome["start"] = time.perf_counter() - began
        if response.status_code != 201:
            outcome["error"] = f"POST /runs: {response.status_code} {response.text[:200]}"
            return outcome
        run_id = response.json()["id"]
        ids: list[int] = []
        last_type = None
        end: dict[str, Any] | None = None
        async with client.stream("GET", f"/runs/{run_id}/events") as stream:
            if stream.status_code != 200:
                outcome["error"] = f"GET events: {stream.status_code}"
                return outcome
            message: dict[str, str] = {}
            async for line in stream.aiter_lines():
                if line:
                    field, _, value = line.partition(":")
                    message[field] = value.removeprefix(" ")
                    continue
                if message.get("event") == "end":
                    end = json.loads(message["data"])
                    break
                if "id" in message:
                    if not ids:
                        outcome["first_event"] = time.perf_counter() - began
                    ids.append(int(message["id"]))
                    last_type = json.loads(message["data"])["type"]
                message = {}
        outcome["run"] = time.perf_counter() - began
        outcome["events"] = len(ids)
        if end is None:
            outcome["error"] = f"the stream ended without 'event: end' after {len(ids)} events"
        elif ids != list(range(1, len(ids) + 1)) or end["events"] != len(ids):
            outcome["error"] = f"events incomplete: {len(ids)} read, end says {end['events']}"
        elif last_type != "stop":
            outcome["error"] = f"the last event is {last_type!r}, not the lead's stop"
        elif end["status"] != "completed":
            outcome["error"] = f"the run ended {end['status']}"
    except httpx.HTTPError as exc:
        outcome["error"] = f"{type(exc).__name__}: {exc}"
    return outcome


async def drive(url: str, runs: int, timeout: float) -> list[dict[str, Any]]:
    """All runs at once (each in its own task); bounded by ``timeout`` seconds."""
    results: list[dict[str, Any]] = []
    limits = httpx.Limits(max_connections=runs * 2 + 10, max_keepalive_connections=runs * 2)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(
        base_url=url, headers=headers, limits=limits, timeout=timeout
    ) as client:
        with anyio.fail_after(timeout):
            async with anyio.create_task_group() as tg:

                async def record(index: int) -> None:
                    results.append(await one_run(client, index))

                for index in range(runs):
                    tg.start_soon(record, index)
    return results


DEFINITION = """\
version: 1
name: {name}
description: {name} answers load-test tasks.
prompt: You are {name}.
tools: []
max_requests: 2
permission_mode: readonly
"""


def write_agents(directory: Path, count: int = 3) -> Path:
    """Tool-free definitions ``worker_0`` ... in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        name = f"worker_{i}"
        (directory / f"{name}.yaml").write_text(DEFINITION.format(name=name), encoding="utf-8")
    return directory


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(
    agents: str, runs: int, backend: str, port: int, cwd: Path
) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env["DEPUTY_RUNTIME_TOKEN"] = TOKEN
    argv = [
        *(sys.executable, "-m", "deputy_runtime", "serve", "--agents", agents),
        *("--port", str(port), "--backend", backend, "--max-runs", str(runs)),
        *("--rate", "100000", "--burst", str(runs * 4 + 100)),
    ]
    return subprocess.Popen(argv, cwd=cwd, env=env, stderr=subprocess.PIPE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument("--agents", default=None, help="default: three generated agents")
    parser.add_argument("--timeout", type=float, default=600.0, help="bound on the whole load")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="service-load-") as tmp:
        return measure(args, Path(tmp))


def measure(args: argparse.Namespace, tmp: Path) -> int:
    agents = args.agents or str(write_agents(tmp / "agents"))
    port = free_port()
    server = start_server(agents, args.runs, args.backend, port, tmp)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if server.poll() is not None:
                raise SystemExit(
                    f"serve exited: {server.stderr.read().decode() if server.stderr else ''}"
                )
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("serve did not become ready within 60 s")
            time.sleep(0.05)
        began = time.perf_counter()
        results = anyio.run(drive, url, args.runs, args.timeout, backend="asyncio")
        wall = time.perf_counter() - began
    finally:
        server.send_signal(signal.SIGTERM)
        _, stderr = server.communicate(timeout=120)
    errors = [r for r in results if r["error"]]
    report = {
        "runs": args.runs,
        "backend": args.backend,
        "completed": len(results) - len(errors),
        "errors": len(errors),
        "error_samples": [r["error"] for r in errors[:5]],
        "events_per_run": sorted({r.get("events", 0) for r in results}),
        "wall_seconds": wall,
        "runs_per_second": args.runs / wall if wall else 0.0,
        "latency_ms": {
            kind: percentiles([r[kind] for r in results if kind in r])
            for kind in ("start", "first_event", "run")
        },
        "server_exit": server.returncode,
        "server_traceback": "Traceback" in stderr.decode(errors="replace"),
    }
    if args.json:
        print(json.dumps(report))
    else:
        print(
            f"{args.runs} runs on {args.backend}: {report['completed']} completed, "
            f"{report['errors']} errors, {wall:.2f} s ({report['runs_per_second']:.1f} runs/s)"
        )
        for kind, values in report["latency_ms"].items():
            cells = "  ".join(f"{k} {v:8.1f} ms" for k, v in values.items())
            print(f"  {kind:<12} {cells}")
        for sample in report["error_samples"]:
            print(f"  error: {sample}")
    return 0 if not errors and server.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
