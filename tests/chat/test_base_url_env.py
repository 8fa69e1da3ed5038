"""Where the OpenAI provider sends requests: ``base_url``, else ``OPENAI_BASE_URL``.

Read by the provider itself, so a CLI run, a Temporal worker and a host's own code built
in the same environment reach the same endpoint.
"""

from __future__ import annotations

import pytest

from deputy_runtime.chat import resolve_provider
from deputy_runtime.chat._openai import OpenAICompatibleProvider, OpenAIProvider


def test_openai_reads_the_endpoint_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", " http://127.0.0.1:9/v1 ")
    assert OpenAIProvider("gpt-x").base_url == "http://127.0.0.1:9/v1"
    assert resolve_provider("openai/gpt-x").base_url == "http://127.0.0.1:9/v1"  # type: ignore[attr-defined]
    # An explicit base_url wins over the environment.
    assert OpenAIProvider("gpt-x", base_url="http://127.0.0.1:8/v1").base_url == (
        "http://127.0.0.1:8/v1"
    )


def test_blank_or_unset_variable_is_the_public_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", "  ")
    assert OpenAIProvider("gpt-x").base_url == "https://api.openai.com/v1"
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert OpenAIProvider("gpt-x").base_url == "https://api.openai.com/v1"


def test_a_bad_variable_is_an_error_naming_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "ftp://gateway/v1")
    with pytest.raises(
        ValueError,
        match=r"base_url \(from OPENAI_BASE_URL\) must start with http\(s\)://, got 'ftp",
    ):
        OpenAIProvider("gpt-x", api_key="sk-test")


def test_the_generic_compatible_provider_never_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # Its endpoint is always explicit: a variable meant for OpenAI must not redirect it.
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    with pytest.raises(ValueError, match="base_url is required"):
        OpenAICompatibleProvider("m")
