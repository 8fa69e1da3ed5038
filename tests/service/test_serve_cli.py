"""``deputy-runtime serve`` refuses to start without a token, and where it must not listen."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.service.serving import agents_dir, offline_env, start_server

pytestmark = pytest.mark.slow


def serve(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    agents = agents_dir(tmp_path / "agents", "quick_a")
    argv = [sys.executable, "-m", "deputy_runtime", "serve", "--agents", str(agents), *args]
    return subprocess.run(
        argv, cwd=tmp_path, env=offline_env(**env), capture_output=True, text=True, timeout=60
    )


def test_without_a_token_it_refuses_to_start(tmp_path: Path) -> None:
    done = serve(tmp_path)
    assert done.returncode == 2
    assert "no token: set DEPUTY_RUNTIME_TOKEN or pass --token-file FILE" in done.stderr
    assert "Traceback" not in done.stderr


def test_insecure_no_auth_is_refused_off_loopback(tmp_path: Path) -> None:
    done = serve(tmp_path, "--insecure-no-auth", "--host", "0.0.0.0")
    assert done.returncode == 2
    assert "--insecure-no-auth is allowed only on a loopback address" in done.stderr


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        ((), {"DEPUTY_RUNTIME_TOKEN": "short"}, "DEPUTY_RUNTIME_TOKEN: a token must be at least"),
        (("--token-file", "missing.txt"), {}, "--token-file 'missing.txt': cannot read it"),
        (("--port", "70000"), {}, "expected a port from 1 to 65535"),
        (("--rate", "0"), {}, "expected a number above 0"),
    ],
)
def test_bad_options_are_refused_by_name(
    tmp_path: Path, args: tuple[str, ...], env: dict[str, str], expected: str
) -> None:
    done = serve(tmp_path, *args, **env)
    assert done.returncode == 2
    assert expected in done.stderr
    assert "Traceback" not in done.stderr


def test_an_empty_token_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "tokens").write_text("# nobody yet\n\n", encoding="utf-8")
    done = serve(tmp_path, "--token-file", "tokens")
    assert done.returncode == 2
    assert "--token-file 'tokens' holds no token" in done.stderr


def test_a_token_file_others_can_read_is_warned_about(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("short\n", encoding="utf-8")
    tokens.chmod(0o644)
    done = serve(tmp_path, "--token-file", "tokens")
    assert "warning: --token-file 'tokens' can be read by other users" in done.stderr
    assert done.returncode == 2  # the short token is still refused, after the warning
    assert "--token-file 'tokens' line 1: a token must be at least 16" in done.stderr
    tokens.chmod(0o600)
    assert "can be read by other users" not in serve(tmp_path, "--token-file", "tokens").stderr


def test_insecure_no_auth_on_loopback_serves_without_a_token(tmp_path: Path) -> None:
    agents = agents_dir(tmp_path / "agents", "quick_a")
    server = start_server(tmp_path, "--agents", str(agents), "--insecure-no-auth", token=None)
    try:
        response = httpx.get(f"{server.url}/agents", timeout=30)
    finally:
        status, stderr = server.stop()
    assert response.status_code == 200
    assert [a["name"] for a in response.json()["agents"]] == ["quick_a"]
    assert "serving without authentication" in stderr
    # model selection as for `run`: no key in the environment, so the offline model
    assert "Model: test - the offline, deterministic test provider, NOT a real model" in stderr
    assert status == 0, stderr


def test_a_missing_agents_directory_is_refused_as_validate_refuses_it(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "deputy_runtime", "serve", "--insecure-no-auth"]
    done = subprocess.run(
        [*argv, "--agents", "nowhere"],
        cwd=tmp_path,
        env=offline_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == (
        "deputy-runtime serve: --agents 'nowhere' does not exist; point --agents at a"
        " directory of definition files, e.g. --agents examples/agents\n"
    )


def test_plugin_tools_and_definition_warnings_at_startup(tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "notes.md").write_text(
        "---\nname: notes\ndescription: Use when: notes are due\ntools: search_web\n---\n"
        "Write notes.\n",
        encoding="utf-8",
    )
    (tmp_path / "search_plugin.py").write_text(
        "from deputy_runtime import tool\n\n\n@tool(read_only=True)\n"
        'def search_web(query: str) -> str:\n    """Search the web."""\n'
        "    return query\n\n\ntools = [search_web]\n",
        encoding="utf-8",
    )
    server = start_server(
        tmp_path,
        *("--agents", "agents", "--plugin", "search_plugin.py", "--insecure-no-auth"),
        token=None,
    )
    try:
        response = httpx.get(f"{server.url}/agents", timeout=30)
    finally:
        status, stderr = server.stop()
    assert response.status_code == 200
    assert [a["name"] for a in response.json()["agents"]] == ["notes"]
    lines = stderr.splitlines()
    warning = f"{Path('agents') / 'notes.md'}:3: warning: the value of 'description' contains"
    assert lines[0].startswith(warning), stderr
    assert lines[1].startswith("Model: test"), stderr
    assert "DefinitionWarning" not in stderr
    assert status == 0, stderr
