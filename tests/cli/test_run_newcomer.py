"""``deputy-runtime run`` as a newcomer meets it: each mistake gets exit 2 and one clear line.

All in subprocesses, as a user runs the command; nothing is printed before the mistake is
ruled out (the ``Model:`` line comes only once arguments, plugins, the model and the
definitions are known to be good).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from deputy_runtime.chat import CLAUDE_CODE_ALIASES
from tests.chat.agent_server import AgentServer
from tests.cli._runhelp import REPO_ROOT, offline_env, run_cli, tool_free_agents

pytestmark = pytest.mark.slow

PYTHONISMS = re.compile(r"\bNone\b|=None|Traceback|importlib")


def _usage_error(done: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    for text in expected:
        assert text in done.stderr, done.stderr
    assert "Model:" not in done.stdout + done.stderr
    assert not PYTHONISMS.search(done.stderr), done.stderr


@pytest.fixture
def agents(tmp_path: Path) -> Path:
    return tool_free_agents(tmp_path / "agents", "alpha")


@pytest.mark.parametrize("task", ["", "   ", "\n\t"])
def test_an_empty_task_is_refused(tmp_path: Path, agents: Path, task: str) -> None:
    done = run_cli("run", "--agents", str(agents), task, cwd=tmp_path)
    _usage_error(done, "TASK is empty")


@pytest.mark.parametrize("value", ["-5", "0", "many"])
def test_a_bad_request_limit_names_the_flag(tmp_path: Path, agents: Path, value: str) -> None:
    done = run_cli("run", "--agents", str(agents), "--max-requests", value, "Do it", cwd=tmp_path)
    _usage_error(
        done, f"argument --max-requests: expected a whole number of at least 1, got '{value}'"
    )


@pytest.mark.parametrize(
    ("model", "suggestion"),
    [
        ("gpt-4o", "did you mean --model openai/gpt-4o?"),
        ("claude-sonnet-4-5", "did you mean --model anthropic/claude-sonnet-4-5?"),
        ("anthropc/claude-x", "did you mean --model anthropic/claude-x?"),
        ("OpenAl/gpt-4o", "did you mean --model openai/gpt-4o?"),
        ("sonnet", "did you mean --model anthropic/claude-"),
    ],
)
def test_a_mistyped_model_gets_a_suggestion(
    tmp_path: Path, agents: Path, model: str, suggestion: str
) -> None:
    done = run_cli("run", "--agents", str(agents), "--model", model, "Do it", cwd=tmp_path)
    _usage_error(done, f"--model {model!r}: no provider named", suggestion)


def test_trio_backend_without_trio_names_the_extra(tmp_path: Path, agents: Path) -> None:
    # trio is installed in the test environment (it is a test dependency), so the command
    # runs under a shim that makes it unimportable: ``sys.modules["trio"] = None`` makes
    # every ``import trio`` raise ImportError, exactly as on a machine without it.
    shim = (
        "import sys; sys.modules['trio'] = None; "
        "from deputy_runtime.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", shim, "run", "--backend", "trio", "--agents", str(agents), "Go"],
        cwd=tmp_path,
        env=offline_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    _usage_error(done, "pip install '.[trio]' from a checkout", "whl[trio]' from a wheel")
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    extras = (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^trio = \["trio>=', extras, re.M), "pyproject has no trio extra"


def test_definition_errors_come_before_the_model_line(tmp_path: Path) -> None:
    agents = tool_free_agents(tmp_path / "agents", "alpha")
    (agents / "broken.yaml").write_text("version: 1\nname: [\n", encoding="utf-8")
    done = run_cli("run", "--agents", str(agents), "Do it", cwd=tmp_path)
    assert done.returncode == 2
    assert "broken.yaml" in done.stderr
    assert "Model:" not in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (("--otlp", "ftp://collector"), "--otlp must be an http:// or https:// URL"),
        # Port 1 on loopback: nothing listens there, so the connection is refused.
        (("--redis", "redis://127.0.0.1:1/0"), "--redis: Cannot connect to Redis"),
    ],
)
def test_late_checked_options_still_come_before_the_model_line(
    tmp_path: Path, agents: Path, options: tuple[str, ...], message: str
) -> None:
    done = run_cli("run", "--agents", str(agents), *options, "Go", cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr
    assert done.stdout == ""  # nothing announced for a run that never started


def test_a_plugin_that_raises_shows_its_own_file_and_line(tmp_path: Path, agents: Path) -> None:
    plugin = tmp_path / "my_plugin.py"
    plugin.write_text(
        "import os\n\n\ndef setup():\n    raise RuntimeError('no config found')\n\n\nsetup()\n",
        encoding="utf-8",
    )
    done = run_cli("run", "--agents", str(agents), "--plugin", str(plugin), "Go", cwd=tmp_path)
    _usage_error(done, "RuntimeError: no config found", f"{plugin}:8 in <module>: setup()")
    assert f"{plugin}:5 in setup: raise RuntimeError('no config found')" in done.stderr
    assert "deputy_runtime" not in done.stderr  # only the plugin's frames


def test_a_plugin_with_a_syntax_error_shows_the_line(tmp_path: Path, agents: Path) -> None:
    plugin = tmp_path / "typo_plugin.py"
    plugin.write_text("x = 1\ndef broken(:\n", encoding="utf-8")
    done = run_cli("run", "--agents", str(agents), "--plugin", str(plugin), "Go", cwd=tmp_path)
    _usage_error(done, "SyntaxError", f"{plugin}:2: def broken(:")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("sonnet", "--model-alias 'sonnet': expected ALIAS=MODEL"),
        ("=openai/x", "expected ALIAS=MODEL"),
        ("sonnet=opnai/gpt-5", "no provider named 'opnai'; did you mean openai/gpt-5?"),
        ("sonnet=inherit", "leave the alias out"),
    ],
)
def test_a_bad_model_alias_is_refused(
    tmp_path: Path, agents: Path, value: str, expected: str
) -> None:
    done = run_cli("run", "--agents", str(agents), "--model-alias", value, "Go", cwd=tmp_path)
    _usage_error(done, expected)


def test_the_fanout_cap_of_the_test_model_is_said_and_can_be_lifted(tmp_path: Path) -> None:
    names = [f"agent{i:02d}" for i in range(10)]
    agents = tool_free_agents(tmp_path / "agents", *names)
    capped = run_cli("run", "--max-requests", "60", "--agents", str(agents), "Go", cwd=tmp_path)
    assert capped.returncode == 0, capped.stderr
    note = capped.stdout.splitlines()[1]
    assert note.startswith("Note: the test model delegates to at most 8 agents per turn")
    assert "2 of 10 will not run (agent08, agent09)" in note
    assert "--test-fanout 10" in note
    assert len(re.findall(r"delegation completed", capped.stdout)) == 8
    full = run_cli(
        *("run", "--max-requests", "60", "--test-fanout", "10", "--agents", str(agents), "Go"),
        cwd=tmp_path,
    )
    assert full.returncode == 0, full.stderr
    assert "Note:" not in full.stdout
    assert len(re.findall(r"delegation completed", full.stdout)) == 10
    other = run_cli(
        "run", "--model", "openai/x", "--test-fanout", "3", "--agents", str(agents), "Go"
    )
    _usage_error(other, "--test-fanout applies only to the offline test model")


def test_model_alias_options_and_plugin_aliases_reach_the_provider(tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    for name, model in (("writer", "sonnet"), ("planner", "opus"), ("quick", "haiku")):
        (agents / f"{name}.md").write_text(
            f"---\nname: {name}\ndescription: {name}.\nmodel: {model}\ntools: []\n"
            f"maxTurns: 2\n---\nYou are {name}.\n",
            encoding="utf-8",
        )
    plugin = tmp_path / "aliases_plugin.py"
    plugin.write_text(
        "model_aliases = {'opus': 'openai/from-plugin', 'sonnet': 'overridden'}\n",
        encoding="utf-8",
    )
    with AgentServer("openai") as server:
        env = offline_env(OPENAI_API_KEY="sk-loopback", OPENAI_BASE_URL=server.url + "/v1")
        done = run_cli(
            *("run", "--agents", str(agents), "--model", "openai/lead-model"),
            *("--plugin", str(plugin), "--model-alias", "sonnet=openai/gpt-5", "Go"),
            cwd=tmp_path,
            env=env,
        )
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert sorted(server.models) == [
        "from-plugin",
        "gpt-5",
        "lead-model",
        "lead-model",
        "lead-model",
    ]
    warning = re.search(r"quick: warning: model 'haiku' is a Claude Code alias", done.stdout)
    assert warning is not None, done.stdout


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("max_requests: 1.5", "or null, got the number 1.5"),
        ("permission_mode: admin", "or leave it out to inherit the lead's mode"),
    ],
)
def test_definition_errors_speak_the_file_format(tmp_path: Path, line: str, expected: str) -> None:
    agents = tool_free_agents(tmp_path / "agents", "alpha")
    path = agents / "alpha.yaml"
    key = line.split(":")[0]
    text = "\n".join(
        line if row.startswith(f"{key}:") else row for row in path.read_text().splitlines()
    )
    path.write_text(text + "\n", encoding="utf-8")
    done = run_cli("run", "--agents", str(agents), "Do it", cwd=tmp_path)
    _usage_error(done, "alpha.yaml", expected)


def test_a_lead_model_alias_resolves_on_anthropic_and_is_refused_elsewhere(
    tmp_path: Path, agents: Path
) -> None:
    # The CLI has no setting for the Anthropic endpoint, so a plugin re-registers the
    # built-in provider pointed at the loopback server (the provider class is the real one).
    plugin = tmp_path / "loopback_anthropic.py"
    plugin.write_text(
        "import os\n"
        "from deputy_runtime.chat import AnthropicProvider, register_provider\n"
        "register_provider('anthropic', lambda model, **kw: AnthropicProvider(\n"
        "    model=model, base_url=os.environ['LOOPBACK_URL'], api_key='k', **kw),\n"
        "    replace=True)\n",
        encoding="utf-8",
    )
    with AgentServer("anthropic") as server:
        env = offline_env(LOOPBACK_URL=server.url)
        env.pop("ANTHROPIC_DEFAULT_OPUS_MODEL", None)
        done = run_cli(
            *("run", "--agents", str(agents), "--plugin", str(plugin)),
            *("--model", "anthropic/opus", "Go"),
            cwd=tmp_path,
            env=env,
        )
    assert done.returncode == 0, (done.stdout, done.stderr)
    resolved = CLAUDE_CODE_ALIASES["opus"][0]
    assert done.stdout.splitlines()[0] == (
        f"Model: anthropic/{resolved} (from --model anthropic/opus, a Claude Code alias)"
    )
    assert set(server.models) == {resolved}  # the lead and its inheriting subagent
    elsewhere = run_cli("run", "--agents", str(agents), "--model", "openai/sonnet", "Go")
    _usage_error(elsewhere, "'sonnet' is a Claude Code alias, which provider 'openai' does not")
