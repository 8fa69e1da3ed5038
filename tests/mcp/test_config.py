"""Server configurations and the .mcp.json loader: every bad input names what is wrong."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from deputy_runtime.errors import McpConfigError, ToolDefinitionError
from deputy_runtime.mcp import McpHttp, McpLimits, McpServer, McpStdio, load_mcp_config
from deputy_runtime.mcp._mcpjson import expand_env
from deputy_runtime.tools import Tool


def write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / ".mcp.json"
    path.write_text(json.dumps(data))
    return path


def test_stdio_and_http_values_are_frozen_and_normalised() -> None:
    cfg = McpStdio(command="npx", args=["-y", "pkg"], env={"A": "1"}, cwd="/tmp")  # type: ignore[arg-type]
    assert cfg.args == ("-y", "pkg")
    assert cfg.transport == "stdio"
    with pytest.raises(AttributeError):
        cfg.command = "other"  # type: ignore[misc]
    http = McpHttp(url="https://example.test/mcp", headers={"Authorization": "Bearer x"})
    assert http.transport == "http"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"command": ""}, "McpStdio.command must not be empty"),
        ({"command": "x", "args": "a b"}, "McpStdio.args must be a list"),
        ({"command": "x", "args": ("ok", 3)}, "McpStdio.args[1] must be a string"),
        ({"command": "x", "env": {"1BAD": "v"}}, "McpStdio.env key '1BAD' is invalid"),
        ({"command": "x", "env": {"A": None}}, "McpStdio.env['A'] must be a string"),
        ({"command": "x\x00"}, "must not contain a NUL"),
    ],
)
def test_stdio_rejects_bad_fields(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(McpConfigError) as info:
        McpStdio(**kwargs)  # type: ignore[arg-type]
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"url": "ftp://x/mcp"}, "expected an http:// or https:// URL"),
        ({"url": "http:///mcp"}, "with a host"),
        ({"url": "http://x", "headers": {"Bad Name": "v"}}, "not a valid header name"),
        ({"url": "http://x", "headers": {"X": "a\r\nB: c"}}, "must not contain a line break"),
    ],
)
def test_http_rejects_bad_fields(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(McpConfigError) as info:
        McpHttp(**kwargs)  # type: ignore[arg-type]
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [("start_timeout", 0), ("call_timeout", -1), ("close_grace", True), ("max_message_bytes", 0)],
)
def test_limits_reject_non_positive(field: str, value: object) -> None:
    with pytest.raises(McpConfigError, match=f"McpLimits.{field} must be a positive"):
        McpLimits(**{field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["", "a__b", "_a", "a_", "has space", "x" * 33, "dot.ted"])
def test_server_names_are_checked(name: str) -> None:
    with pytest.raises(McpConfigError, match="McpServer name"):
        McpServer(name, McpStdio(command="x"))


def test_server_config_type_is_checked() -> None:
    with pytest.raises(McpConfigError, match="config must be McpStdio or McpHttp"):
        McpServer("ok", {"command": "x"})  # type: ignore[arg-type]


def test_load_reads_every_transport_in_file_order(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "mcpServers": {
                "context7": {"command": "npx", "args": ["-y", "@upstash/context7-mcp"]},
                "local": {"type": "stdio", "command": "srv", "env": {"K": "v"}, "cwd": "sub"},
                "api": {"type": "http", "url": "https://api.test/mcp", "headers": {"X-K": "1"}},
                "api2": {"type": "streamable-http", "url": "http://127.0.0.1:9/mcp"},
            }
        },
    )
    servers = load_mcp_config(path, env={})
    assert list(servers) == ["context7", "local", "api", "api2"]
    assert servers["context7"] == McpStdio(command="npx", args=("-y", "@upstash/context7-mcp"))
    local = servers["local"]
    assert isinstance(local, McpStdio)
    assert local.env == {"K": "v"}
    assert local.cwd == str(tmp_path / "sub")
    assert servers["api"] == McpHttp(url="https://api.test/mcp", headers={"X-K": "1"})
    assert isinstance(servers["api2"], McpHttp)


def test_load_expands_variables_like_claude_code(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "mcpServers": {
                "s": {
                    "command": "${BIN}/srv",
                    "args": ["--port", "${PORT:-8080}", "$NOT_EXPANDED"],
                    "env": {"TOKEN": "${TOKEN}"},
                },
                "h": {
                    "type": "http",
                    "url": "${URL}",
                    "headers": {"Authorization": "Bearer ${TOKEN}"},
                },
            }
        },
    )
    servers = load_mcp_config(path, env={"BIN": "/opt", "TOKEN": "t0k", "URL": "http://h.test/m"})
    assert servers["s"] == McpStdio(
        command="/opt/srv", args=("--port", "8080", "$NOT_EXPANDED"), env={"TOKEN": "t0k"}
    )
    assert servers["h"] == McpHttp(url="http://h.test/m", headers={"Authorization": "Bearer t0k"})


@pytest.mark.parametrize(
    ("servers", "message"),
    [
        ({"s": {"command": "${MISSING}"}}, "server 's': command: environment variable MISSING"),
        ({"s": {"type": "sse", "url": "http://x/sse"}}, "type 'sse' is not supported"),
        ({"s": {"type": "websocket", "url": "ws://x"}}, "type 'websocket' is unknown"),
        ({"s": {"args": []}}, "needs a 'command' (stdio) or a 'type' and 'url'"),
        ({"s": {"type": "http"}}, "type 'http' needs a 'url'"),
        ({"s": {"command": "x", "headersHelper": "y"}}, "unknown key(s) headersHelper"),
        ({"s": {"command": "x", "args": "a"}}, "args must be a list of strings"),
        ({"s": {"command": "x", "env": {"A": 1}}}, "env['A'] must be a string"),
        ({"s": "npx"}, "expected an object, got str"),
        ({"bad__name": {"command": "x"}}, "server 'bad__name': name 'bad__name' is invalid"),
        ({"s": {"type": "http", "url": "nope"}}, "McpHttp.url 'nope' is invalid"),
    ],
)
def test_load_errors_name_file_server_and_field(
    tmp_path: Path, servers: dict[str, object], message: str
) -> None:
    path = write(tmp_path, {"mcpServers": servers})
    with pytest.raises(McpConfigError) as info:
        load_mcp_config(path, env={})
    assert str(info.value).startswith(f"{path}: server ")
    assert message in str(info.value)
    assert info.value.path == path


def test_load_refuses_files_that_are_not_mcp_configs(tmp_path: Path) -> None:
    with pytest.raises(McpConfigError, match="cannot read"):
        load_mcp_config(tmp_path / "absent.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(McpConfigError, match=r"bad\.json: not valid JSON"):
        load_mcp_config(bad)
    with pytest.raises(McpConfigError, match='an "mcpServers" object, or the servers by name'):
        load_mcp_config(write(tmp_path, [{"command": "x"}]))
    with pytest.raises(McpConfigError, match='"mcpServers" must be an object'):
        load_mcp_config(write(tmp_path, {"mcpServers": []}))
    with pytest.raises(McpConfigError, match=r'unknown top-level key.*inputs beside "mcpServers"'):
        load_mcp_config(write(tmp_path, {"mcpServers": {}, "inputs": []}))
    with pytest.raises(McpConfigError, match="version is not a server object"):
        load_mcp_config(write(tmp_path, {"version": 1, "git": {"command": "git-mcp"}}))
    # A flat map whose entry is an object but no server says what a server needs.
    with pytest.raises(McpConfigError, match="server 'servers': needs a 'command'"):
        load_mcp_config(write(tmp_path, {"servers": {}}))


def test_load_reads_the_flat_shape_plugins_write(tmp_path: Path) -> None:
    wrapped = {"mcpServers": {"git": {"command": "git-mcp", "args": ["--repo", "."]}}}
    flat = wrapped["mcpServers"]
    one = load_mcp_config(write(tmp_path, wrapped), env={})
    (tmp_path / "flat").mkdir()
    other = load_mcp_config(write(tmp_path / "flat", flat), env={})
    assert one == other == {"git": McpStdio(command="git-mcp", args=("--repo", "."))}
    assert load_mcp_config(write(tmp_path, {}), env={}) == {}
    assert load_mcp_config(write(tmp_path, {"$schema": "x", "mcpServers": {}}), env={}) == {}


def test_plugin_root_is_the_files_folder_unless_the_environment_sets_it(
    tmp_path: Path,
) -> None:
    plugin = tmp_path / "my-plugin"
    plugin.mkdir()
    path = write(
        plugin,
        {"srv": {"command": "${CLAUDE_PLUGIN_ROOT}/bin/server", "args": ["${CLAUDE_PLUGIN_ROOT}"]}},
    )
    server = load_mcp_config(path, env={})["srv"]
    assert isinstance(server, McpStdio)
    assert server.command == f"{plugin.resolve()}/bin/server"
    assert server.args == (str(plugin.resolve()),)
    chosen = load_mcp_config(path, env={"CLAUDE_PLUGIN_ROOT": "/opt/p"})["srv"]
    assert isinstance(chosen, McpStdio)
    assert chosen.command == "/opt/p/bin/server"


# -- security rules, as properties ------------------------------------------------------

_SURROGATES: tuple[Literal["Cs"]] = ("Cs",)  # lone surrogates cannot be encoded
values = st.text(alphabet=st.characters(exclude_categories=_SURROGATES), max_size=40)


@given(st.dictionaries(st.from_regex(r"\A[A-Z_][A-Z0-9_]{0,8}\Z"), values, max_size=4), values)
def test_expansion_is_single_pass(env: dict[str, str], text: str) -> None:
    # A variable's value is inserted as it is: a value that itself looks like ${OTHER}
    # is never expanded again, so an environment cannot smuggle in another variable.
    names = list(env)
    template = "".join(f"<${{{n}}}>" for n in names) + text.replace("$", "")
    expanded = expand_env(template, env, "where")
    assert expanded == "".join(f"<{env[n]}>" for n in names) + text.replace("$", "")


@given(values, st.sampled_from(["\r", "\n", "\r\n"]), values)
def test_header_values_with_line_breaks_are_refused(before: str, brk: str, after: str) -> None:
    with pytest.raises(McpConfigError, match=r"must not contain a line break|NUL"):
        McpHttp(url="http://h.test/mcp", headers={"X-Token": before + brk + after})


@given(st.text(max_size=40))
@example("0\n")  # '$' would match before a trailing newline
def test_server_names_accepted_are_unambiguous_in_tool_names(name: str) -> None:
    try:
        McpServer(name, McpStdio(command="x"))
    except McpConfigError:
        return
    assert "__" not in name
    assert not name.startswith("_")
    assert not name.endswith("_")
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,32}", name)


def test_a_name_with_a_trailing_newline_is_refused_everywhere() -> None:
    # Names end at the end of the string, never before a final line break: a header
    # name "X-Token\n" would split the request, a tool or server name would reach the
    # model with a line break in it.
    with pytest.raises(McpConfigError, match="name"):
        McpServer("files\n", McpStdio(command="x"))
    with pytest.raises(McpConfigError):
        McpStdio(command="x", env={"TOKEN\n": "v"})
    with pytest.raises(McpConfigError):
        McpHttp(url="http://h.test/mcp", headers={"X-Token\n": "v"})
    with pytest.raises(ToolDefinitionError, match="invalid"):
        Tool(name="read\n", description="d", parameters={"type": "object"}, function=print)


secrets = st.from_regex(r"\Asecret-[A-Za-z0-9]{12}\Z")


@given(secrets, secrets, secrets)
def test_repr_and_describe_never_show_secrets(env_value: str, header: str, query: str) -> None:
    # Env values, header values, URL passwords and queries are where credentials live.
    stdio = McpStdio(command="srv", env={"API_KEY": env_value})
    http = McpHttp(
        url=f"https://user:{query}@h.test:8443/mcp?token={query}",
        headers={"Authorization": f"Bearer {header}"},
    )
    shown = [
        repr(stdio),
        str(stdio),
        repr(http),
        json.dumps(stdio.describe()),
        json.dumps(http.describe()),
        json.dumps(McpServer("s", stdio).describe()),
        json.dumps(McpServer("h", http).describe()),
    ]
    for text in shown:
        assert env_value not in text
        assert header not in text
        assert query not in text
    assert "API_KEY" in repr(stdio)
    assert "Authorization" in repr(http)
    assert http.describe()["url"] == "https://h.test:8443/mcp?***"
