"""A model whose provider needs a key nobody set is refused before the run starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from deputy_runtime.chat._anthropic import AnthropicProvider
from deputy_runtime.chat._openai import OllamaProvider, OpenAIProvider
from tests.cli._runhelp import EXAMPLE_AGENTS, offline_env, run_cli

pytestmark = pytest.mark.slow  # spawns the CLI


@pytest.mark.parametrize(
    ("model", "variable"),
    [("openai/gpt-4.1-mini", "OPENAI_API_KEY"), ("anthropic/claude-sonnet-4", "ANTHROPIC_API_KEY")],
)
@pytest.mark.parametrize("json_flag", [(), ("--json",)])
def test_run_without_the_key_is_exit_2_before_anything_runs(
    tmp_path: Path, model: str, variable: str, json_flag: tuple[str, ...]
) -> None:
    done = run_cli(
        "run", "--agents", str(EXAMPLE_AGENTS), "--model", model, *json_flag, "Go",
        cwd=tmp_path, env=offline_env(),
    )  # fmt: skip
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""  # no Model: line, no table: nothing started
    assert f"--model {model!r} needs an API key: set {variable} in the environment" in (done.stderr)
    assert "--model test" in done.stderr
    assert "Traceback" not in done.stderr


def test_providers_say_whether_a_key_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    openai = OpenAIProvider("gpt-x")
    assert openai.api_key_variable == "OPENAI_API_KEY"
    assert openai.missing_api_key == "openai: no API key: pass api_key= or set OPENAI_API_KEY"
    assert OpenAIProvider("gpt-x", api_key="sk-x").missing_api_key is None
    assert AnthropicProvider("claude-x").missing_api_key is not None
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-x")
    assert AnthropicProvider("claude-x").missing_api_key is None
    assert OllamaProvider("llama3").missing_api_key is None  # a local server needs none
