"""Per-request overhead of the HTTP providers vs a bare httpx POST of the same bytes.

    python benchmarks/chat_client.py [--requests N] [--rounds R] [--backend asyncio|trio] [--json]

A small keep-alive HTTP/1.1 server on 127.0.0.1 (a thread with a raw socket, answering
every request with one pre-built recorded response) serves both contenders in the same
run, over one shared ``httpx.AsyncClient``:

- **bare**: ``client.post(url, content=<the exact bytes the provider sends>, headers=...)``
  and read the body. No serialisation, no parsing, no retry logic.
- **provider**: ``provider.complete(request)``: build the wire JSON from turns and tools,
  POST it through the retry loop, decode the response into a typed ``AssistantTurn``.

Cases are recorded exchanges: a Chat Completions tool round (history with two tool results)
and an Anthropic tool round. Requests alternate bare/provider one by one, so load from
other processes hits both alike; the reported figure is the median over rounds of
(provider time / bare time). Target: within 1.3x.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests" / "chat"))

import anyio  # noqa: E402
import httpx  # noqa: E402

from deputy_runtime.chat._anthropic import AnthropicProvider  # noqa: E402
from deputy_runtime.chat._http import HTTPProvider  # noqa: E402
from deputy_runtime.chat._openai import OpenAIProvider  # noqa: E402

TARGET = 1.3


class _FixedServer:
    """Answers every HTTP/1.1 request on a connection with the same response bytes."""

    def __init__(self, body: bytes) -> None:
        self.response = (
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n\r\n%s" % (len(body), body)
        )
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buf = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(buf) < length:
                    buf += conn.recv(65536)
                buf = buf[length:]
                conn.sendall(self.response)

    def close(self) -> None:
        self.sock.close()


def _cases() -> list[tuple[str, type[HTTPProvider], dict[str, Any]]]:
    from loopback import anthropic_request, load_exchanges, openai_request

    cc = next(
        e
        for e in load_exchanges("chat_completions.jsonl")
        if e["source"].endswith("openai-tool.yml") and e["index"] == 1
    )
    an = next(
        e
        for e in load_exchanges("anthropic_messages.jsonl")
        if e["source"].endswith("anthropic-tool.yml") and e["index"] == 1
    )
    return [
        ("openai chat completions, tool round", OpenAIProvider, cc | {"build": openai_request}),
        ("anthropic messages, tool round", AnthropicProvider, an | {"build": anthropic_request}),
    ]


async def _measure(
    cls: type[HTTPProvider], exchange: dict[str, Any], requests: int, rounds: int
) -> dict[str, Any]:
    recorded = exchange["request"]["json"]
    request = exchange["build"](recorded)
    server = _FixedServer(json.dumps(exchange["response"]["json"]).encode())
    try:
        async with httpx.AsyncClient() as client:
            provider = cls(
                recorded["model"], api_key="bench", base_url=server.url + "/v1", client=client
            )
            body = provider._encode(request, stream=False)
            url = provider.base_url + provider._path
            headers = provider._session._headers

            async def bare() -> None:
                response = await client.post(url, content=body, headers=headers)
                response.read()
                assert response.status_code == 200

            async def ours() -> None:
                turn = await provider.complete(request)
                assert turn.usage.requests == 1

            for fn in (bare, ours):  # warm up connections and code paths
                for _ in range(200):
                    await fn()
            ratios, bare_us, ours_us = [], [], []
            clock = time.perf_counter
            for _ in range(rounds):
                # Alternate request by request so load spikes from other processes hit
                # both contenders alike.
                t_bare = t_ours = 0.0
                for _ in range(requests):
                    start = clock()
                    await bare()
                    middle = clock()
                    await ours()
                    t_bare += middle - start
                    t_ours += clock() - middle
                ratios.append(t_ours / t_bare)
                bare_us.append(t_bare / requests * 1e6)
                ours_us.append(t_ours / requests * 1e6)
    finally:
        server.close()
    return {
        "request_bytes": len(body),
        "bare_us": round(statistics.median(bare_us), 1),
        "provider_us": round(statistics.median(ours_us), 1),
        "ratio": round(statistics.median(ratios), 3),
        "ratio_min": round(min(ratios), 3),
        "ratio_max": round(max(ratios), 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=500, help="requests per round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument("--json", action="store_true", help="print JSON only")
    args = parser.parse_args()
    results = {}
    for label, cls, exchange in _cases():
        results[label] = anyio.run(
            _measure, cls, exchange, args.requests, args.rounds, backend=args.backend
        )
    report = {"backend": args.backend, "target": TARGET, "cases": results}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"per-request client overhead vs bare httpx POST ({args.backend}, same run)")
        for label, r in results.items():
            verdict = "ok" if r["ratio"] <= TARGET else "OVER TARGET"
            print(
                f"  {label:40s} bare {r['bare_us']:7.1f} us  provider {r['provider_us']:7.1f} us"
                f"  ratio {r['ratio']:.3f} ({r['ratio_min']:.3f}-{r['ratio_max']:.3f})  {verdict}"
            )
    return 0 if all(r["ratio"] <= TARGET for r in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
