"""Helpers for the service tests: a real ``deputy-runtime serve`` process on 127.0.0.1.

:func:`start_server` picks a free port, starts the server with a token in its
environment and polls ``/healthz`` until it answers (bounded); :meth:`Server.stop` sends
SIGTERM and returns the exit status and stderr. Output goes to files, not pipes, so a
chatty server can never block on a full pipe.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

PLUGIN = Path(__file__).resolve().parent / "serve_plugin.py"
TOKEN = "test-token-0123456789abcdef"
OTHER_TOKEN = "other-token-0123456789abcdef"
_START_SECONDS = 60.0

_DEFINITION = """\
version: 1
name: {name}
description: {name} agent used by the service tests.
prompt: You are the {name} agent.
tools: []
model: inherit
skills: []
disallowed_tools: null
memory: null
mcp_servers: null
initial_prompt: null
max_requests: 3
permission_mode: readonly
"""


def agents_dir(directory: Path, *names: str) -> Path:
    """Write tool-free YAML definitions (usable in owned mode); return the directory."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / f"{name}.yaml").write_text(_DEFINITION.format(name=name), encoding="utf-8")
    return directory


def free_port() -> int:
    """A port nothing listens on right now (the kernel's choice)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def offline_env(**extra: str) -> dict[str, str]:
    """The environment without model keys (so the offline test model is used)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL")
    }
    env.pop("DEPUTY_RUNTIME_TOKEN", None)
    env.update(extra)
    return env


class Server:
    """A running ``deputy-runtime serve`` process."""

    def __init__(self, process: subprocess.Popen[bytes], port: int, stderr: Path) -> None:
        self.process = process
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.stderr_path = stderr

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def client(self, token: str | None = TOKEN, timeout: float = 30.0) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def stop(self, timeout: float = 60.0) -> tuple[int, str]:
        """SIGTERM, then wait; returns the exit status and everything on stderr."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            status = self.process.wait(timeout=timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
        return status, self.stderr()


def start_server(
    tmp_path: Path,
    *args: str,
    env: dict[str, str] | None = None,
    token: str | None = TOKEN,
    name: str = "server",
) -> Server:
    """Start ``deputy-runtime serve ARGS`` on a free port; return once /healthz answers."""
    port = free_port()
    stderr = tmp_path / f"{name}.stderr"
    environment = env if env is not None else offline_env()
    if token is not None:
        environment = {**environment, "DEPUTY_RUNTIME_TOKEN": token}
    argv = [sys.executable, "-m", "deputy_runtime", "serve", "--port", str(port), *args]
    with stderr.open("wb") as err:
        process = subprocess.Popen(
            argv, cwd=tmp_path, env=environment, stdout=subprocess.DEVNULL, stderr=err
        )
    server = Server(process, port, stderr)
    deadline = time.monotonic() + _START_SECONDS
    while True:
        if process.poll() is not None:
            raise AssertionError(f"serve exited with {process.returncode}: {server.stderr()}")
        try:
            if httpx.get(f"{server.url}/healthz", timeout=2.0).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise AssertionError(f"serve did not answer /healthz: {server.stderr()}")
        time.sleep(0.05)  # polling a condition (readiness), not a timing assumption


def sse_messages(lines: Iterator[str]) -> Iterator[dict[str, str]]:
    """Parse server-sent events: one dict (``id``, ``event``, ``data``) per message."""
    message: dict[str, str] = {}
    for line in lines:
        if not line:
            if message:
                yield message
            message = {}
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            message[field] = message.get(field, "") + value if field == "data" else value
    if message:
        yield message
