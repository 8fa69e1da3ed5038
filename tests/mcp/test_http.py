"""A real SDK server over streamable HTTP on 127.0.0.1, started in a subprocess."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from deputy_runtime.errors import McpStartError, McpToolError
from deputy_runtime.mcp import (
    McpEvent,
    McpHttp,
    McpLimits,
    McpServer,
    McpServerStarted,
    McpServerStopped,
    McpStopKind,
    McpToolsChanged,
)
from deputy_runtime.tools import invoke_tool
from tests.mcp._mcp_helpers import free_port, http_server, of_type

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def http_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with http_server(tmp_path_factory.mktemp("http")) as (url, _process):
        yield url


async def test_tools_over_streamable_http(http_url: str, tmp_path: Path) -> None:
    events: list[McpEvent] = []
    server = McpServer("web", McpHttp(url=http_url), on_event=events.append)
    async with server.session() as session:
        assert session.pid is None
        tools = {t.name: t for t in session.tools()}
        assert "mcp__web__append" in tools
        first = await invoke_tool(tools["mcp__web__tracked_write"], {"pause": 0})
        second = await invoke_tool(tools["mcp__web__tracked_write"], {"pause": 0})
        assert second["calls"] == first["calls"] + 1
        before = session.tools_version
        name = f"added_{before}_{id(session)}"
        await invoke_tool(tools["mcp__web__grow"], {"name": name})
        with anyio.fail_after(30):
            await session.wait_tools_changed(before)
        assert f"mcp__web__{name}" in {t.name for t in session.tools()}
    (started,) = of_type(events, McpServerStarted)
    (stopped,) = of_type(events, McpServerStopped)
    assert (started.transport, started.pid) == ("http", None)
    assert (stopped.kind, stopped.error) == (McpStopKind.CLOSED, None)
    assert of_type(events, McpToolsChanged)


async def test_an_unreachable_http_server_is_a_start_error() -> None:
    server = McpServer(
        "nowhere",
        McpHttp(url=f"http://127.0.0.1:{free_port()}/mcp"),
        limits=McpLimits(start_timeout=10),
    )
    with pytest.raises(McpStartError, match="'nowhere'"):
        async with server.session():
            pass


async def test_a_server_that_dies_mid_session_fails_calls_not_the_callers_task(
    tmp_path: Path,
) -> None:
    events: list[McpEvent] = []
    with http_server(tmp_path) as (url, process):
        server = McpServer("dying", McpHttp(url=url), on_event=events.append)
        async with server.session() as session:
            assert await session.call("tracked_write", {"pause": 0}) is not None
            process.kill()
            process.wait()
            # The call fails as a tool error; the body of this `async with` goes on.
            with pytest.raises(McpToolError):
                await session.call("tracked_write", {"pause": 0})
            reached_end_of_body = True
    assert reached_end_of_body
    (stopped,) = of_type(events, McpServerStopped)
    assert stopped.kind is McpStopKind.FAILED
