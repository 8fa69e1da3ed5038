"""``deputy-runtime mcp-serve`` driven by the MCP SDK's own client, as Claude Code would.

Every test starts the command as a real subprocess and talks to it with
``mcp.ClientSession``, over stdio or over streamable HTTP, on each anyio backend (the
server runs on the same backend as the client). The delegations run on the offline
``test`` model; the structured-result test uses ``verdict_plugin.py``, a model that
answers the ``judge`` agent in JSON (the test model answers in prose, which no schema
accepts). Waits are on conditions (a progress event, a port accepting, a process gone),
each bounded by ``fail_after`` so a broken server fails the test instead of hanging it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent

from tests.cli._runhelp import cli, offline_env, run_cli

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

HERE = Path(__file__).resolve().parent
VERDICT_PLUGIN = HERE / "verdict_plugin.py"
HANG_SERVER = HERE / "hang_server.py"
SHELL_PLUGIN = HERE / "shell_plugin.py"
TOKEN = "mcp-serve-test-token-0123456789"
_WAIT = 60  # seconds any one wait may take before the test fails

_HELPER = """\
version: 1
name: helper
description: Helps with small questions about the working directory.
prompt: You help.
tools: []
max_requests: 3
permission_mode: readonly
"""
_CHECKER = _HELPER.replace("helper", "checker").replace("Helps with", "Checks")
_JUDGE = """\
version: 2
name: judge
description: Judges whether a claim holds.
prompt: You judge claims.
tools: []
max_requests: 3
permission_mode: readonly
output_schema:
  type: object
  properties:
    verdict: {type: string, enum: [holds, fails]}
    reason: {type: string}
  required: [verdict, reason]
"""
_WAITER = """\
version: 1
name: waiter
description: Waits on the hang server.
prompt: You wait.
tools: [mcp__hang__wait]
max_requests: 3
permission_mode: readonly
"""


def _agents(root: Path, **files: str) -> Path:
    directory = root / "agents"
    directory.mkdir()
    for name, text in files.items():
        (directory / f"{name}.yaml").write_text(text, encoding="utf-8")
    return directory


def _text(result: CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, TextContent))


class _Progress:
    """The delegation events a call's progress notifications carried, decoded."""

    def __init__(self) -> None:
        self.values: list[float] = []
        self.events: list[dict[str, Any]] = []
        self.waiting: tuple[str, anyio.Event] | None = None

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.values.append(progress)
        assert message is not None
        event = json.loads(message)
        self.events.append(event)
        if self.waiting is not None and event.get("tool_name") == self.waiting[0]:
            self.waiting[1].set()

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]


@asynccontextmanager
async def stdio_session(
    cwd: Path, backend: str, *args: str, env: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """The command started by the SDK's stdio client, its session initialized."""
    params = StdioServerParameters(
        command=sys.executable,
        args=cli("mcp-serve", "--backend", backend, *args)[1:],
        env=env if env is not None else offline_env(),
        cwd=cwd,
    )
    with (cwd / "server.log").open("w", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            with anyio.fail_after(_WAIT):
                await session.initialize()
            yield session


async def test_stdio_offers_the_lead_and_each_agent_and_runs_them(
    tmp_path: Path, anyio_backend: str
) -> None:
    agents = _agents(tmp_path, helper=_HELPER, checker=_CHECKER)
    async with stdio_session(
        tmp_path, anyio_backend, "--agents", str(agents), "--model", "test"
    ) as session:
        with anyio.fail_after(_WAIT):
            listed = await session.list_tools()
            tools = {t.name: t for t in listed.tools}
            assert list(tools) == ["run_lead", "checker", "helper"]
            assert tools["helper"].description == (
                "Helps with small questions about the working directory."
            )
            assert tools["helper"].input_schema["required"] == ["task"]
            assert tools["helper"].output_schema is None
            assert "checker, helper" in (tools["run_lead"].description or "")

            progress = _Progress()
            result = await session.call_tool(
                "helper", {"task": "What is here?"}, progress_callback=progress
            )
            assert not result.is_error, _text(result)
            # The subagent's own answer (the test model repeats the brief it was handed),
            # not the lead's summary of its tool results.
            assert _text(result).startswith("Test reply to: ")
            assert "deputy_delegation_v1" in _text(result)
            starts, ends = progress.of("delegation_start"), progress.of("delegation_end")
            assert [e["agent_name"] for e in starts] == ["helper"]
            assert [(e["agent_name"], e["status"]) for e in ends] == [("helper", "completed")]
            assert progress.values == sorted(progress.values)  # progress only grows

            progress = _Progress()
            result = await session.call_tool(
                "run_lead", {"task": "Look around."}, progress_callback=progress
            )
            assert not result.is_error, _text(result)
            ended = {(e["agent_name"], e["status"]) for e in progress.of("delegation_end")}
            assert ended == {("checker", "completed"), ("helper", "completed")}


async def test_bad_arguments_and_unknown_tools_are_tool_errors(
    tmp_path: Path, anyio_backend: str
) -> None:
    agents = _agents(tmp_path, helper=_HELPER)
    async with stdio_session(
        tmp_path, anyio_backend, "--agents", str(agents), "--tools", "agents"
    ) as session:
        with anyio.fail_after(_WAIT):
            assert [t.name for t in (await session.list_tools()).tools] == ["helper"]
            blank = await session.call_tool("helper", {"task": "  "})
            assert blank.is_error
            assert _text(blank) == "arguments: 'task' must be a non-empty string, got '  '"
            extra = await session.call_tool("helper", {"task": "x", "mode": "full"})
            assert extra.is_error
            assert _text(extra) == "arguments: unexpected 'mode'; only 'task'"
            unknown = await session.call_tool("run_lead", {"task": "x"})
            assert unknown.is_error
            assert _text(unknown) == "no tool named 'run_lead'; this server has: helper"


async def test_a_structured_agent_answers_with_structured_content(
    tmp_path: Path, anyio_backend: str
) -> None:
    agents = _agents(tmp_path, judge=_JUDGE)
    async with stdio_session(
        tmp_path,
        anyio_backend,
        "--agents",
        str(agents),
        "--plugin",
        str(VERDICT_PLUGIN),
        "--model",
        "verdict",
    ) as session:
        with anyio.fail_after(_WAIT):
            tools = {t.name: t for t in (await session.list_tools()).tools}
            schema = tools["judge"].output_schema
            assert schema is not None
            assert schema["required"] == ["verdict", "reason"]
            result = await session.call_tool("judge", {"task": "The sky is blue."})
            assert not result.is_error, _text(result)
            structured = result.structured_content
            assert structured is not None
            assert structured["verdict"] == "holds"
            assert structured["reason"].startswith("judged: ")
            assert json.loads(_text(result)) == structured


async def test_a_call_past_the_servers_budget_is_refused(
    tmp_path: Path, anyio_backend: str
) -> None:
    """One agent call takes three requests (the lead's two, the helper's one): after the
    first, one of ``--total-requests 4`` is left, too little for a lead (its first request
    and the one it keeps for its answer), so the next call is refused before it runs."""
    agents = _agents(tmp_path, helper=_HELPER)
    async with stdio_session(
        tmp_path, anyio_backend, "--agents", str(agents), "--total-requests", "4"
    ) as session:
        with anyio.fail_after(_WAIT):
            first = await session.call_tool("helper", {"task": "one"})
            assert not first.is_error, _text(first)
            progress = _Progress()
            second = await session.call_tool(
                "run_lead", {"task": "two"}, progress_callback=progress
            )
            assert second.is_error
            assert _text(second) == (
                "refused: the server's budget is spent (requests 3 of 4 used, 1 left; a call "
                "needs at least 2; --total-requests 4); no further call can run until the "
                "server is restarted"
            )
            assert progress.events == []  # refused before anything ran


def _pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie counts as gone: it runs nothing)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _hang_setup(tmp_path: Path) -> tuple[Path, Path]:
    """The waiter agent and an owned ``hang`` server in ``.mcp.json``; (agents, pid dir)."""
    agents = _agents(tmp_path, waiter=_WAITER)
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    hang = {"command": sys.executable, "args": [str(HANG_SERVER)], "env": {"PID_DIR": str(pid_dir)}}
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"hang": hang}}), "utf-8")
    return agents, pid_dir


async def _cancel_mid_call(session: ClientSession, pid_dir: Path) -> None:
    """Cancel a waiter call once its subagent is inside the hanging MCP call; the owned
    MCP server the delegation started must then go, and the server go on serving."""
    progress = _Progress()
    waiting = anyio.Event()
    progress.waiting = ("mcp__hang__wait", waiting)
    with anyio.fail_after(_WAIT):
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                await session.call_tool("waiter", {"task": "wait"}, progress_callback=progress)

            tg.start_soon(call)
            await waiting.wait()
            tg.cancel_scope.cancel()
        pids = [int(p.name) for p in pid_dir.iterdir()]
        assert len(pids) == 1
        started = [e for e in progress.of("mcp_server") if e["action"] == "start"]
        assert [e["pid"] for e in started] == pids
        while _pid_alive(pids[0]):
            await anyio.sleep(0.05)
        assert [t.name for t in (await session.list_tools()).tools] == ["run_lead", "waiter"]


async def test_a_cancelled_call_stops_its_mcp_server(tmp_path: Path, anyio_backend: str) -> None:
    agents, pid_dir = _hang_setup(tmp_path)
    async with stdio_session(
        tmp_path, anyio_backend, "--agents", str(agents), "--mcp-mode", "hang=owned"
    ) as session:
        await _cancel_mid_call(session, pid_dir)


async def test_a_cancelled_http_call_stops_its_mcp_server(
    tmp_path: Path, anyio_backend: str
) -> None:
    agents, pid_dir = _hang_setup(tmp_path)
    args = ("--agents", str(agents), "--mcp-mode", "hang=owned", "--backend", anyio_backend)
    with http_server(tmp_path, *args, env=offline_env()) as (port, log):
        await _accepting(port, log)
        async with (
            streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write),
            ClientSession(read, write) as session,
        ):
            with anyio.fail_after(_WAIT):
                await session.initialize()
            await _cancel_mid_call(session, pid_dir)
    assert "WARNING: serving without authentication (loopback only)" in log.read_text()


_SLEEPER = """\
version: 1
name: sleeper
description: Starts a long command in the background.
prompt: You start commands.
tools: [bash]
max_requests: 3
permission_mode: full
"""


def _processes_running(argv: list[str]) -> list[int]:
    """The live processes whose command line is exactly ``argv``."""
    wanted = ("\0".join(argv) + "\0").encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes() == wanted and _pid_alive(int(entry.name)):
                    found.append(int(entry.name))
            except OSError:
                continue  # it ended while we looked
    return found


async def test_a_cancelled_call_kills_its_background_commands(
    tmp_path: Path, anyio_backend: str
) -> None:
    """A subagent starts ``sleep`` with ``bash`` in the background, then its model hangs;
    the client cancels the call, and the sleep is gone with it (the call's own shell),
    while the server goes on serving."""
    agents = _agents(tmp_path, sleeper=_SLEEPER)
    seconds = str(600_000 + os.getpid() % 100_000)  # an unusual sleep, to find it by
    env = offline_env(SHELL_PLUGIN_SECONDS=seconds)
    args = ("--agents", str(agents), "--plugin", str(SHELL_PLUGIN), "--model", "shellish")
    async with stdio_session(
        tmp_path, anyio_backend, *args, "--permission-mode", "full", env=env
    ) as session:
        progress = _Progress()
        started = anyio.Event()
        progress.waiting = ("bash", started)
        with anyio.fail_after(_WAIT):
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    await session.call_tool("sleeper", {"task": "go"}, progress_callback=progress)

                tg.start_soon(call)
                await started.wait()  # the bash call began; wait for its sleep to run
                while not _processes_running(["sleep", seconds]):
                    await anyio.sleep(0.05)
                tg.cancel_scope.cancel()
            while _processes_running(["sleep", seconds]):
                await anyio.sleep(0.05)
            assert [t.name for t in (await session.list_tools()).tools] == ["run_lead", "sleeper"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def http_server(cwd: Path, *args: str, env: dict[str, str]) -> Iterator[tuple[int, Path]]:
    """``mcp-serve --http`` on a free loopback port; stopped with SIGTERM after."""
    port = _free_port()
    log = cwd / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            cli("mcp-serve", "--http", f"127.0.0.1:{port}", *args),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            yield port, log
        finally:
            process.terminate()
            try:
                process.wait(timeout=_WAIT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    assert process.returncode == 0, log.read_text()


async def _accepting(port: int, log: Path) -> None:
    """Wait until the port accepts connections."""
    with anyio.fail_after(_WAIT):
        while True:
            try:
                stream = await anyio.connect_tcp("127.0.0.1", port)
            except OSError:
                await anyio.sleep(0.05)
                continue
            await stream.aclose()
            return


async def test_streamable_http_with_a_token(tmp_path: Path, anyio_backend: str) -> None:
    agents = _agents(tmp_path, helper=_HELPER)
    env = offline_env(DEPUTY_RUNTIME_TOKEN=TOKEN)
    args = ("--agents", str(agents), "--backend", anyio_backend, "--total-requests", "4")
    with http_server(tmp_path, *args, env=env) as (port, log):
        await _accepting(port, log)
        url = f"http://127.0.0.1:{port}/mcp"
        with anyio.fail_after(_WAIT):
            async with httpx2.AsyncClient() as anonymous:
                refused = await anonymous.post(url, json={})
            assert refused.status_code == 401
            assert refused.headers["www-authenticate"].startswith("Bearer")
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with (
                httpx2.AsyncClient(headers=headers) as http,
                streamable_http_client(url, http_client=http) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                assert [t.name for t in (await session.list_tools()).tools] == [
                    "run_lead",
                    "helper",
                ]
                progress = _Progress()
                result = await session.call_tool(
                    "helper", {"task": "What is here?"}, progress_callback=progress
                )
                assert not result.is_error, _text(result)
                assert [e["status"] for e in progress.of("delegation_end")] == ["completed"]
                again = await session.call_tool("helper", {"task": "again"})
                assert again.is_error
                assert "the server's budget is spent" in _text(again)
    assert "listening on http://127.0.0.1:" in log.read_text()


def test_http_refuses_a_public_address_without_a_token(tmp_path: Path) -> None:
    agents = _agents(tmp_path, helper=_HELPER)
    env = {k: v for k, v in offline_env().items() if k != "DEPUTY_RUNTIME_TOKEN"}
    done = run_cli("mcp-serve", "--agents", str(agents), "--http", "0.0.0.0:8766", env=env)
    assert done.returncode == 2
    assert done.stderr == (
        "deputy-runtime mcp-serve: --http 0.0.0.0: serving without a token is allowed only "
        "on a loopback address; set DEPUTY_RUNTIME_TOKEN or pass --token-file FILE to "
        "listen there\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--http", "localhost"),
            "--http 'localhost': expected HOST:PORT with a port from 1 to 65535, e.g. "
            "--http 127.0.0.1:8766 (or [::1]:8766)",
        ),
        (
            ("--token-file", "tokens.txt"),
            "--token-file applies only with --http (stdio needs no token)",
        ),
    ],
)
def test_bad_options_are_named(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    agents = _agents(tmp_path, helper=_HELPER)
    done = run_cli("mcp-serve", "--agents", str(agents), *args)
    assert done.returncode == 2
    assert done.stderr == f"deputy-runtime mcp-serve: {message}\n"


def test_an_agent_named_run_lead_is_refused(tmp_path: Path) -> None:
    agents = _agents(tmp_path, run_lead=_HELPER.replace("name: helper", "name: run_lead"))
    done = run_cli("mcp-serve", "--agents", str(agents))
    assert done.returncode == 2
    assert done.stderr.endswith(
        "agent 'run_lead': its tool name clashes with the run_lead tool; rename the agent "
        "or pass --tools agents\n"
    )


_HOOK_PLUGIN = """\
from deputy_runtime import HookDecision, Hooks
from deputy_runtime.runtime import HookEvent

hooks = Hooks()


def deny(event):
    return HookDecision.deny("listing is not allowed through mcp-serve")


hooks.add(HookEvent.PreToolUse, deny, matcher="list_files")
"""
_LISTER = """\
version: 1
name: lister
description: Lists the working directory.
prompt: You list files.
tools: [list_files]
max_requests: 3
permission_mode: readonly
"""
_WRITER = """\
version: 1
name: writer
description: Writes notes.
prompt: You write notes.
tools: [write_file]
max_requests: 3
permission_mode: standard
"""


async def test_the_ceiling_and_the_plugins_hooks_apply(tmp_path: Path, anyio_backend: str) -> None:
    agents = _agents(tmp_path, lister=_LISTER, writer=_WRITER)
    plugin = tmp_path / "deny_plugin.py"
    plugin.write_text(_HOOK_PLUGIN, encoding="utf-8")
    args = ("--agents", str(agents), "--plugin", str(plugin), "--permission-mode", "readonly")
    async with stdio_session(tmp_path, anyio_backend, *args) as session:
        with anyio.fail_after(_WAIT):
            progress = _Progress()
            listed = await session.call_tool("lister", {"task": "list"}, progress_callback=progress)
            assert not listed.is_error, _text(listed)
            # The subagent's answer quotes its one tool result: the hook's denial.
            assert _text(listed) == (
                "Summary of 1 tool result(s):\n- list_files failed: Denied by hook: listing "
                "is not allowed through mcp-serve"
            )
            ended = [(e["agent_name"], e["status"]) for e in progress.of("delegation_end")]
            assert ended == [("lister", "completed")]
            written = await session.call_tool("writer", {"task": "write"})
            assert written.is_error
            assert _text(written).startswith(
                "writer did not complete (status failed, stop reason setup_error: Sub-agent "
                "permission mode cannot change under the lead policy: Lead mode readonly "
                "cannot delegate with mode standard."
            )
    assert not (tmp_path / "notes.txt").exists()
