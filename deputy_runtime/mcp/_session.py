"""One live connection to an MCP server, offering its tools as runtime Tools.

A session is an async context manager: entering it starts the server (stdio) or connects
(HTTP), does the MCP handshake and lists the tools, all within ``start_timeout``; leaving
it closes the connection and, for stdio, stops and reaps the process. Leaving always
finishes the cleanup, also when the caller is cancelled. A session is started once.

Like every anyio context manager holding a task group, a session must be entered and left
by the same task; :class:`~deputy_runtime.mcp.McpServerPool` hosts sessions in its own
task group for owners that start and stop them from different tasks.

Concurrent calls on one session are allowed (the protocol multiplexes them); a holder
that needs the server to itself takes :attr:`McpSession.lock`.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import importlib.metadata
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.abc
import anyio.lowlevel
import httpx2
import mcp.types as mcp_types
import msgspec
from mcp import ClientSession
from mcp.client.session import IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from ..errors import (
    McpCallTimeoutError,
    McpError,
    McpServerGoneError,
    McpStartError,
    McpToolError,
)
from ..tools import Tool
from ._bound import cut_chars, summarised
from ._config import McpHttp, McpStdio
from ._convert import result_text, result_value, tool_flags, tool_schema
from ._events import (
    McpEvent,
    McpEventSink,
    McpLogLevel,
    McpLogMessage,
    McpProgress,
    McpServerStarted,
    McpServerStopped,
    McpStderrLine,
    McpStopKind,
    McpToolCall,
    McpToolsChanged,
    McpToolUnavailable,
    emit_safely,
)
from ._names import mcp_tool_names
from ._oauth import oauth_auth
from ._output import OutputSchema
from ._prompts import McpPrompt, check_arguments, prompt_value, render
from ._reading import MAX_PAGES, READ_RESOURCE, contents_text, listing_value, resource_tools
from ._stdio import StdioTransport

if TYPE_CHECKING:
    from ._server import McpServer

__all__ = ["McpSession", "SessionState"]

_T = TypeVar("_T")
_R = TypeVar("_R")
_I = TypeVar("_I")

_CLIENT_INFO = mcp_types.Implementation(name="deputy-runtime", version="0.1.0")
# The SDK's own defaults: a server may keep a response stream open for minutes between
# events; a call's own deadline is ``call_timeout``, enforced per request.
_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


class SessionState(enum.Enum):
    """Where a session is in its life."""

    NEW = "new"
    STARTING = "starting"
    READY = "ready"
    #: The server went away (crash, protocol error); calls fail, close still cleans up.
    FAILED = "failed"
    CLOSED = "closed"


class McpSession:
    """A started server's connection and its tools. Get one from :meth:`McpServer.session`."""

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self.name = server.name
        self.limits = server.limits
        #: Held by whoever needs this server to itself (an exclusive holder).
        self.lock = anyio.Lock()
        self._state = SessionState.NEW
        self._client: ClientSession | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._background: anyio.abc.TaskGroup | None = None
        self._stop = anyio.Event()
        self._stdio: StdioTransport | None = None
        self._tools: tuple[Tool, ...] = ()
        self._specs: dict[str, _Spec] = {}
        self._offered: tuple[tuple[Tool, str], ...] = ()
        self._reading: tuple[Tool, ...] = ()
        self._capabilities: mcp_types.ServerCapabilities | None = None
        self._unavailable: dict[str, str] = {}
        # The per-call sinks of the calls in flight (see ``call``), by call number.
        self._call_sinks: dict[int, McpEventSink] = {}
        self._calls = 0
        self._changed = anyio.Event()
        self._tools_version = 0
        self._started_at = 0.0
        self._gone: str | None = None

    # -- state ---------------------------------------------------------------------

    @property
    def state(self) -> SessionState:
        """The current state; a READY session whose server went away reads FAILED."""
        if self._state is SessionState.READY and self._failure() is not None:
            return SessionState.FAILED
        return self._state

    @property
    def pid(self) -> int | None:
        """The stdio server's process id (``None`` over HTTP or before start)."""
        return None if self._stdio is None else self._stdio.pid

    @property
    def stderr_lines(self) -> tuple[str, ...]:
        """The server's last stderr lines, oldest first (at most ``limits.stderr_lines``)."""
        return () if self._stdio is None else tuple(self._stdio.stderr)

    @property
    def exit_code(self) -> int | None:
        """The stdio server's exit status once it has exited."""
        return None if self._stdio is None else self._stdio.exit_code

    def tools(self, on_event: McpEventSink | None = None) -> tuple[Tool, ...]:
        """The server's tools as runtime Tools (the latest list the server announced).

        Args:
            on_event: Also report each call's own events (its progress, the log messages
                the server sends while it runs, the call itself) to this sink, besides
                the server's ``on_event``: how a shared session's events reach the
                caller that made the call.

        Returns:
            One Tool per server tool, sorted by the server's tool names; each calls
            :meth:`call`. Empty before the session started.
        """
        if on_event is None:
            return self._tools
        return tuple(
            msgspec.structs.replace(tool, function=_caller(self, mcp_tool, tool.name, on_event))
            for tool, mcp_tool in self._offered
        )

    def unavailable_tools(self) -> dict[str, str]:
        """The server's tools this session does not offer, and why (runtime name -> why).

        A tool whose ``outputSchema`` is not a valid JSON Schema is left out (none of its
        results could be checked), and so is one that requires task-augmented execution
        (the installed SDK cannot make such calls). Each is reported as an
        :class:`McpToolUnavailable` event when the tool list is read.

        Returns:
            A new dict from the runtime tool name to the reason, empty when every listed
            tool is offered.
        """
        return dict(self._unavailable)

    @property
    def tools_version(self) -> int:
        """Increases by one every time the tool list is replaced after the first listing."""
        return self._tools_version

    async def wait_tools_changed(self, after: int) -> int:
        """Wait until :attr:`tools_version` is greater than ``after``; return it.

        Args:
            after: The version already seen (``0`` before any change).

        Returns:
            The new :attr:`tools_version`, greater than ``after``.
        """
        while self._tools_version <= after:
            await self._changed.wait()
        return self._tools_version

    def describe(self) -> dict[str, Any]:
        """Plain, JSON-encodable data for manifests and logs: server, state, pid, tools.

        Returns:
            The server's ``describe()`` fields plus ``state`` (its value), ``pid`` and
            ``tools`` (the runtime tool names).
        """
        return {
            **self.server.describe(),
            "state": self.state.value,
            "pid": self.pid,
            "tools": [tool.name for tool in self._tools],
        }

    def _failure(self) -> str | None:
        if self._gone is not None:
            return self._gone
        return None if self._stdio is None else self._stdio.failure

    # -- start ---------------------------------------------------------------------

    async def __aenter__(self) -> McpSession:
        if self._state is not SessionState.NEW:
            raise McpError(
                f"MCP session for {self.name!r} was already started; start a new session",
                server=self.name,
            )
        self._state = SessionState.STARTING
        self._started_at = time.perf_counter()
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        try:
            await tg.start(self._connection)
        except BaseException:
            self._state = SessionState.FAILED
            self._tg = None
            self._stop.set()
            with contextlib.suppress(Exception):  # the start error below says what failed
                await tg.__aexit__(None, None, None)
            raise
        self._state = SessionState.READY
        emit_safely(
            self.server.on_event,
            McpServerStarted(
                server=self.name,
                transport=self.server.config.transport,
                pid=self.pid,
                duration=time.perf_counter() - self._started_at,
                tools=len(self._tools),
            ),
        )
        self._report_unavailable()
        return self

    async def _connection(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """The transport and the SDK client, in a task of their own.

        The SDK's transports run helper tasks whose failure cancels the code inside them;
        kept in this task, such a failure ends only the connection (the session turns
        FAILED and its calls fail), never the body of the caller's ``async with``.
        """
        started = False
        error: str | None = None
        try:
            async with (
                self._transport() as (read, write),
                ClientSession(
                    read,
                    write,
                    message_handler=self._on_message,
                    logging_callback=self._on_log,
                    client_info=_CLIENT_INFO,
                ) as client,
            ):
                with anyio.fail_after(self.limits.start_timeout):
                    await client.initialize()
                    listing = await client.list_tools()
                self._capabilities = client.server_capabilities
                self._tools = self._build_tools(listing.tools)
                self._client = client
                async with anyio.create_task_group() as self._background:
                    started = True
                    task_status.started()
                    await self._stop.wait()
                    self._background.cancel_scope.cancel()
        except Exception as exc:
            if not started:
                start_error = self._start_error(exc)
                error = str(start_error)
                raise start_error from exc
            error = self._gone = self._gone or _describe(exc)
        except BaseException:
            if not started:
                error = "cancelled while starting"
            raise
        finally:
            self._client = None
            self._background = None
            self._report_stop(error)

    @asynccontextmanager
    async def _transport(self) -> AsyncIterator[Any]:
        config = self.server.config
        if isinstance(config, McpStdio):
            self._stdio = StdioTransport(self.name, config, self.limits, self._on_stderr)
            async with self._stdio.open() as streams:
                yield streams
            return
        assert isinstance(config, McpHttp)
        auth = None if config.oauth is None else oauth_auth(config.url, config.oauth)
        async with (
            httpx2.AsyncClient(
                headers=dict(config.headers), timeout=_HTTP_TIMEOUT, auth=auth
            ) as http,
            streamable_http_client(
                config.url, http_client=http, max_sse_event_size=self.limits.max_message_bytes
            ) as streams,
        ):
            yield streams

    def _start_error(self, exc: BaseException) -> McpStartError:
        """The error a failed start raises, with the server's last stderr lines."""
        exc = _leaf(exc)
        if isinstance(exc, McpStartError):
            return exc
        failure = self._failure()
        if isinstance(exc, TimeoutError):
            why = f"did not finish starting within start_timeout ({self.limits.start_timeout}s)"
        elif failure is not None:
            why = failure
        elif isinstance(exc, MCPError | ValidationError):
            why = f"failed the MCP handshake: {exc}"
        else:
            why = f"failed to start: {type(exc).__name__}: {exc}"
        tail = self.stderr_lines[-5:]
        more = "; last stderr lines: " + " | ".join(tail) if tail else ""
        return McpStartError(f"MCP server {self.name!r} {why}{more}", server=self.name, stderr=tail)

    # -- stop ----------------------------------------------------------------------

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection and stop the server; safe to call more than once.

        Returns once the connection has ended (for stdio: the process is reaped), also
        when the caller is cancelled meanwhile: the stop runs shielded with bounded waits.
        """
        tg, self._tg = self._tg, None
        if tg is None:
            return
        self._stop.set()
        try:
            await tg.__aexit__(None, None, None)
        finally:
            self._state = SessionState.CLOSED

    def _report_stop(self, error: str | None) -> None:
        failure = self._failure()
        stdio = self._stdio
        if error is None and failure is not None:
            error = failure
        if error is not None:
            kind = McpStopKind.FAILED
        elif stdio is not None and stdio.stop_kind is not None:
            kind = stdio.stop_kind
        else:
            kind = McpStopKind.CLOSED
        emit_safely(
            self.server.on_event,
            McpServerStopped(
                server=self.name,
                transport=self.server.config.transport,
                pid=self.pid,
                duration=time.perf_counter() - self._started_at,
                kind=kind,
                exit_code=self.exit_code,
                error=error,
            ),
        )

    # -- calls ---------------------------------------------------------------------

    async def call(
        self,
        mcp_tool: str,
        arguments: Mapping[str, Any],
        tool: str = "",
        on_event: McpEventSink | None = None,
    ) -> Any:
        """Call the server's tool ``mcp_tool``; return what the model should see.

        Every call, failed or not, is reported as an :class:`McpToolCall` event. The call
        carries a progress token, so the server can report :class:`McpProgress`; the log
        messages the server sends while calls are running are :class:`McpLogMessage`
        events.

        Args:
            mcp_tool: The server's own name of the tool.
            arguments: The tool's arguments, sent as they are.
            tool: The runtime tool name, for the event (``mcp_tool`` when empty).
            on_event: Where this call's events go besides the server's ``on_event``: its
                progress and call events, and the log messages that arrive while it runs
                (the protocol does not say which call a log message is about, so each
                call in flight with a sink gets it).

        Returns:
            The result's structured content when it has some (checked against the
            tool's ``outputSchema``), else its content as text; binary data described,
            never pasted, and at most the file tools' read cap in size.

        Raises:
            McpToolError: The result is an error (``isError``), the server refused the
                call, or the result is invalid (its structured content breaks the tool's
                ``outputSchema``: the message says where and what was expected).
            McpCallTimeoutError: No answer within ``call_timeout``.
            McpServerGoneError: The server is gone or the session is not open.
        """
        started = time.perf_counter()
        error: str | None = None
        spec = self._specs.get(mcp_tool)
        title = None if spec is None else spec.title
        self._calls += 1
        number = self._calls
        if on_event is not None:
            self._call_sinks[number] = on_event

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            cut = None if message is None else cut_chars(message, self.limits.stderr_line_chars)
            report = McpProgress(
                server=self.name,
                tool=tool or mcp_tool,
                mcp_tool=mcp_tool,
                progress=progress,
                total=total,
                message=cut,
                title=title,
            )
            self._emit(report, on_event)

        try:
            return await self._call(mcp_tool, dict(arguments), spec, on_progress)
        except McpError as exc:
            error = str(exc)
            raise
        except BaseException:
            error = "cancelled"
            raise
        finally:
            self._call_sinks.pop(number, None)
            done = McpToolCall(
                server=self.name,
                tool=tool or mcp_tool,
                mcp_tool=mcp_tool,
                title=title,
                duration=time.perf_counter() - started,
                error=error,
            )
            self._emit(done, on_event)

    def _emit(self, event: McpEvent, also: McpEventSink | None) -> None:
        emit_safely(self.server.on_event, event)
        if also is not None:
            emit_safely(also, event)

    async def _call(
        self, mcp_tool: str, arguments: dict[str, Any], spec: _Spec | None, progress: ProgressFnT
    ) -> Any:
        client = self._client
        failure = self._failure()
        if client is None or failure is not None:
            raise self._gone_error(mcp_tool, failure)
        request = mcp_types.CallToolRequest(
            params=mcp_types.CallToolRequestParams(name=mcp_tool, arguments=arguments)
        )
        try:
            # Sent as a plain request: the result is checked against the output schema
            # here, where the problem can be named briefly (see _output).
            result = await client.send_request(
                request,
                mcp_types.CallToolResult,
                request_read_timeout_seconds=self.limits.call_timeout,
                progress_callback=progress,
            )
            # The SDK hands each notification to a task of its own, spawned when it is
            # received. One checkpoint lets those received before the response run (each
            # finishes in its first step), so a call's progress and log events come
            # before its end and reach this call's sink.
            await anyio.lowlevel.checkpoint()
        except MCPError as exc:
            if exc.code == mcp_types.REQUEST_TIMEOUT:
                raise McpCallTimeoutError(
                    f"MCP tool {mcp_tool!r} on server {self.name!r} did not answer within "
                    f"call_timeout ({self.limits.call_timeout}s)",
                    server=self.name,
                    tool=mcp_tool,
                ) from None
            if exc.code == mcp_types.CONNECTION_CLOSED:
                raise self._gone_error(mcp_tool, self._failure()) from None
            raise McpToolError(
                f"MCP server {self.name!r} refused tool {mcp_tool!r}: "
                f"{cut_chars(exc.message, self.limits.stderr_line_chars)} (error {exc.code})",
                server=self.name,
                tool=mcp_tool,
            ) from None
        except (ValidationError, RuntimeError) as exc:
            raise McpToolError(
                f"MCP tool {mcp_tool!r} on server {self.name!r} returned an invalid result: "
                f"{cut_chars(str(exc), self.limits.stderr_line_chars)}",
                server=self.name,
                tool=mcp_tool,
            ) from None
        if result.is_error:
            raise McpToolError(
                result_text(result) or f"MCP tool {mcp_tool!r} reported an error",
                server=self.name,
                tool=mcp_tool,
            )
        if spec is not None and spec.output is not None:
            problem = (
                "it returned no structuredContent"
                if result.structured_content is None
                else spec.output.problem(result.structured_content)
            )
            if problem is not None:
                raise McpToolError(
                    f"MCP tool {mcp_tool!r} on server {self.name!r} returned a result that "
                    f"does not match its outputSchema: {problem}",
                    server=self.name,
                    tool=mcp_tool,
                )
        return result_value(result, self._read_tool())

    def _read_tool(self) -> str | None:
        """The runtime name of the tool that reads this server's resources, if offered."""
        return next((t.name for t in self._reading if t.name.endswith(READ_RESOURCE)), None)

    # -- resources and prompts ------------------------------------------------------

    @property
    def supports_resources(self) -> bool:
        """Whether the server advertised the ``resources`` capability."""
        return self._capabilities is not None and self._capabilities.resources is not None

    @property
    def supports_prompts(self) -> bool:
        """Whether the server advertised the ``prompts`` capability."""
        return self._capabilities is not None and self._capabilities.prompts is not None

    def resource_tools(self) -> tuple[Tool, ...]:
        """The read-only tools that list and read the server's resources.

        Returns:
            ``mcp__<server>__list_resources`` and ``mcp__<server>__read_resource`` when the
            server advertises resources (less any whose name a server tool has), else
            none.
        """
        return self._reading

    async def list_resources(self) -> Any:
        """The server's resources and resource templates as plain JSON data.

        Returns:
            ``{"resources": [{"uri", "name", ...}], "templates": [{"uriTemplate", ...}]}``
            (``"truncated": true`` after :data:`MAX_PAGES` pages), bounded like a tool
            result.

        Raises:
            McpToolError: The server refused, or does not offer resources.
            McpCallTimeoutError: A page took longer than ``call_timeout``.
            McpServerGoneError: The session is not connected.
        """
        resources = await self._pages(
            "resources/list",
            lambda c, p: c.list_resources(params=p),
            lambda r: r.resources,
        )
        templates = await self._pages(
            "resources/templates/list",
            lambda c, p: c.list_resource_templates(params=p),
            lambda r: r.resource_templates,
        )
        truncated = resources[1] or templates[1]
        return listing_value(resources[0], templates[0], truncated)

    async def read_resource(self, uri: str) -> str:
        """One resource's contents as the model sees them: text, binary described.

        Args:
            uri: The resource's uri.

        Returns:
            The text contents (several are each headed by their uri), binary contents
            as a line with mime type and size; at most the file tools' read cap.

        Raises:
            McpToolError: ``uri`` is not a non-empty string, or the server refused.
            McpCallTimeoutError: No answer within ``call_timeout``.
            McpServerGoneError: The session is not connected.
        """
        if not isinstance(uri, str) or not uri:
            raise McpToolError(
                f"MCP server {self.name!r}: read_resource needs a non-empty uri, got {uri!r}",
                server=self.name,
                tool=READ_RESOURCE,
            )
        result = await self._request("resources/read", lambda c: c.read_resource(uri))
        return contents_text(result)

    async def list_prompts(self) -> tuple[McpPrompt, ...]:
        """The server's prompts.

        Returns:
            One :class:`McpPrompt` per prompt, in the server's order (at most
            :data:`MAX_PAGES` pages of them).

        Raises:
            McpError: The server refused, or does not offer prompts.
            McpServerGoneError: The session is not connected.
        """
        prompts, _ = await self._pages(
            "prompts/list", lambda c, p: c.list_prompts(params=p), lambda r: r.prompts, McpError
        )
        return tuple(prompt_value(p) for p in prompts)

    async def get_prompt(self, name: str, arguments: Mapping[str, str] | None = None) -> str:
        """The server's prompt ``name`` rendered with ``arguments``, as one text.

        Usable as a definition's ``initial_prompt``:
        ``definition.replace(initial_prompt=await session.get_prompt("review"))``.

        Args:
            name: The prompt's name (see :meth:`list_prompts`).
            arguments: Its arguments (names to strings), checked before the request.

        Returns:
            The messages' text (see ``_prompts``), bounded like a tool result.

        Raises:
            McpError: No such prompt (the message lists the prompts), a bad, unknown or
                missing argument (named), or the server refused.
            McpServerGoneError: The session is not connected.
        """
        prompts = {p.name: p for p in await self.list_prompts()}
        prompt = prompts.get(name)
        if prompt is None:
            offered = ", ".join(sorted(prompts)) or "none"
            raise McpError(
                f"MCP server {self.name!r} has no prompt {name!r}; its prompts: {offered}",
                server=self.name,
            )
        sent = check_arguments(self.name, prompt, arguments)
        result = await self._request("prompts/get", lambda c: c.get_prompt(name, sent), McpError)
        return render(result)

    async def _request(
        self,
        method: str,
        send: Callable[[ClientSession], Awaitable[_T]],
        error: type[McpError] = McpToolError,
    ) -> _T:
        """One request other than a tool call, with a call's deadline and errors."""
        client = self._client
        failure = self._failure()
        if client is None or failure is not None:
            raise self._gone_error(method, failure)
        try:
            with anyio.fail_after(self.limits.call_timeout):
                return await send(client)
        except TimeoutError:
            raise McpCallTimeoutError(
                f"MCP server {self.name!r} did not answer {method} within call_timeout "
                f"({self.limits.call_timeout}s)",
                server=self.name,
                tool=method,
            ) from None
        except MCPError as exc:
            if exc.code == mcp_types.CONNECTION_CLOSED:
                raise self._gone_error(method, self._failure()) from None
            why = cut_chars(exc.message, self.limits.stderr_line_chars)
            raise _error(
                error,
                f"MCP server {self.name!r} refused {method}: {why} (error {exc.code})",
                self.name,
                method,
            ) from None
        except (ValidationError, RuntimeError) as exc:
            why = cut_chars(str(exc), self.limits.stderr_line_chars)
            raise _error(
                error,
                f"MCP server {self.name!r} sent an invalid {method} result: {why}",
                self.name,
                method,
            ) from None

    async def _pages(
        self,
        method: str,
        send: Callable[[ClientSession, mcp_types.PaginatedRequestParams | None], Awaitable[_R]],
        items: Callable[[_R], list[_I]],
        error: type[McpError] = McpToolError,
    ) -> tuple[list[_I], bool]:
        """Every page of a listing (at most MAX_PAGES); ``True`` when more were left."""
        out: list[_I] = []
        params: mcp_types.PaginatedRequestParams | None = None
        for _ in range(MAX_PAGES):
            page = await self._request(method, functools.partial(_page, send, params), error)
            out.extend(items(page))
            cursor = getattr(page, "next_cursor", None)
            if cursor is None:
                return out, False
            params = mcp_types.PaginatedRequestParams(cursor=cursor)
        return out, True

    def _gone_error(self, mcp_tool: str, failure: str | None) -> McpServerGoneError:
        if failure is None and self._state is SessionState.CLOSED:
            why = "the session is closed"
        else:
            why = failure or "the connection closed"
            if self._stdio is None:
                self._gone = why
        tail = self.stderr_lines[-3:]
        more = "; last stderr lines: " + " | ".join(tail) if tail else ""
        return McpServerGoneError(
            f"MCP server {self.name!r} is gone ({why}); tool {mcp_tool!r} did not complete{more}",
            server=self.name,
            tool=mcp_tool,
        )

    # -- tools ---------------------------------------------------------------------

    def _build_tools(self, listed: list[mcp_types.Tool]) -> tuple[Tool, ...]:
        names = mcp_tool_names(self.name, (t.name for t in listed))
        specs: dict[str, _Spec] = {}
        unavailable: dict[str, str] = {}
        tools: list[Tool] = []
        for entry in sorted(listed, key=lambda t: t.name):
            name = names[entry.name]
            spec = _spec(entry)
            if isinstance(spec, str):
                unavailable[name] = spec
                continue
            specs[entry.name] = spec
            tools.append(self._tool(entry, name, spec))
        self._specs, self._unavailable = specs, unavailable
        self._offered = tuple((t, m) for t, m in zip(tools, specs, strict=True))
        taken = {t.name for t in tools}
        self._reading = resource_tools(self, taken) if self.supports_resources else ()
        return tuple(tools)

    def _tool(self, listed: mcp_types.Tool, name: str, spec: _Spec) -> Tool:
        flags = tool_flags(listed.annotations)
        description = listed.description or ""
        if spec.title and spec.title != description:
            # The title is how the server names the tool to people; the model sees it too.
            description = f"{spec.title}: {description}" if description else spec.title
        return Tool(
            name=name,
            description=description or listed.name,
            parameters=tool_schema(listed.input_schema),
            function=_caller(self, listed.name, name),
            read_only=flags.read_only,
            destructive=flags.destructive,
            idempotent=flags.idempotent,
            open_world=flags.open_world,
        )

    def _report_unavailable(self) -> None:
        for tool, reason in self._unavailable.items():
            emit_safely(
                self.server.on_event,
                McpToolUnavailable(server=self.name, tool=tool, reason=reason),
            )

    async def refresh_tools(self) -> tuple[Tool, ...]:
        """List the server's tools again (within ``call_timeout``) and offer the new list.

        Increments :attr:`tools_version`, wakes :meth:`wait_tools_changed` and reports an
        :class:`McpToolsChanged` event.

        Returns:
            The new tools, as :meth:`tools` returns them from now on.

        Raises:
            McpServerGoneError: The session is not connected.
            TimeoutError: The listing took longer than ``call_timeout``.
        """
        client = self._client
        if client is None:
            raise self._gone_error("tools/list", self._failure())
        with anyio.fail_after(self.limits.call_timeout):
            listing = await client.list_tools()
        self._tools = self._build_tools(listing.tools)
        self._tools_version += 1
        self._changed.set()
        self._changed = anyio.Event()
        emit_safely(self.server.on_event, McpToolsChanged(server=self.name, tools=len(self._tools)))
        self._report_unavailable()
        return self._tools

    async def _refresh_quietly(self) -> None:
        try:
            await self.refresh_tools()
        except Exception:
            # A failing server shows in its next call and the old list stays; an error
            # escaping here would end the whole connection.
            return

    async def _on_message(self, message: IncomingMessage) -> None:
        background = self._background
        if isinstance(message, mcp_types.ToolListChangedNotification) and background is not None:
            # Not awaited here: this runs on the session's receive loop, which the
            # refresh's own response has to pass through.
            background.start_soon(self._refresh_quietly)

    async def _on_log(self, params: mcp_types.LoggingMessageNotificationParams) -> None:
        data = summarised(params.data)
        text = data if isinstance(data, str) else msgspec.json.encode(data).decode()
        event = McpLogMessage(
            server=self.name,
            level=McpLogLevel(params.level),
            logger=None if params.logger is None else cut_chars(params.logger, 200),
            data=cut_chars(text, self.limits.stderr_line_chars),
        )
        emit_safely(self.server.on_event, event)
        seen: set[int] = set()
        for sink in list(self._call_sinks.values()):
            if id(sink) not in seen:
                seen.add(id(sink))
                emit_safely(sink, event)

    def _on_stderr(self, pid: int | None, line: str) -> None:
        emit_safely(self.server.on_event, McpStderrLine(server=self.name, pid=pid, line=line))


class _Spec(msgspec.Struct, frozen=True):
    """What a call needs to know about one listed tool."""

    title: str | None
    output: OutputSchema | None


# Task-augmented calls (``execution.taskSupport``) exist in the installed SDK as types
# only: it sends no ``tasks/get`` or ``tasks/result`` and parses no CreateTaskResult, so a
# tool that requires a task cannot be called; one for which tasks are optional is called
# normally.
_TASKS_UNSUPPORTED = (
    "it requires task-augmented execution (execution.taskSupport 'required'), which the "
    f"installed MCP SDK (mcp {importlib.metadata.version('mcp')}) cannot call"
)


def _spec(listed: mcp_types.Tool) -> _Spec | str:
    """The tool's spec, or why the tool cannot be offered."""
    if listed.execution is not None and listed.execution.task_support == "required":
        return _TASKS_UNSUPPORTED
    title = listed.title or (listed.annotations.title if listed.annotations else None)
    output: OutputSchema | None = None
    if listed.output_schema is not None:
        compiled = OutputSchema.compile(listed.output_schema)
        if isinstance(compiled, str):
            return compiled
        output = compiled
    return _Spec(title=title, output=output)


def _caller(
    session: McpSession, mcp_tool: str, tool: str, on_event: McpEventSink | None = None
) -> Any:
    """The Tool function: the validated arguments, sent to the server as one call."""

    async def call(**arguments: Any) -> Any:
        return await session.call(mcp_tool, arguments, tool, on_event)

    call.__name__ = tool
    return call


def _page(
    send: Callable[[ClientSession, mcp_types.PaginatedRequestParams | None], Awaitable[_R]],
    params: mcp_types.PaginatedRequestParams | None,
    client: ClientSession,
) -> Awaitable[_R]:
    return send(client, params)


def _error(kind: type[McpError], message: str, server: str, method: str) -> McpError:
    if issubclass(kind, McpToolError):
        return kind(message, server=server, tool=method)
    return kind(message, server=server)


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    leaf = _leaf(exc)
    return f"the connection failed: {type(leaf).__name__}: {leaf}"
