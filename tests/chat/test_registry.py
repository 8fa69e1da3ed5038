"""chat("provider/model") resolution and the provider registry."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from deputy_runtime.chat import (
    Chat,
    ScriptedProvider,
    TestProvider,
    UnknownProviderError,
    chat,
    is_provider_name,
    parse_model_spec,
    provider_names,
    register_provider,
    resolve_provider,
    unregister_provider,
)
from deputy_runtime.errors import DeputyError
from deputy_runtime.tools import Tool

pytestmark = pytest.mark.anyio

BUILT_INS = {"anthropic", "ollama", "openai", "openai_compatible", "scripted", "test"}


@pytest.fixture
def custom() -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """Register a recording provider factory as ``my-host`` and remove it afterwards."""
    calls: list[tuple[str, dict[str, Any]]] = []

    def factory(model: str, **kwargs: Any) -> ScriptedProvider:
        calls.append((model, kwargs))
        return ScriptedProvider(["from host"], name="my_host", model=model)

    register_provider("My-Host", factory)
    try:
        yield calls
    finally:
        unregister_provider("my_host")


def test_spec_splits_on_the_first_slash() -> None:
    assert parse_model_spec("openai/gpt-4.1") == ("openai", "gpt-4.1")
    assert parse_model_spec("ollama/library/llama3:8b") == ("ollama", "library/llama3:8b")
    assert parse_model_spec("test") == ("test", None)
    for bad, why in [("", "non-empty"), ("/m", "no provider"), ("openai/", "no model")]:
        with pytest.raises(ValueError, match=why):
            parse_model_spec(bad)


def test_built_ins_are_listed() -> None:
    assert set(provider_names()) >= BUILT_INS
    assert list(provider_names()) == sorted(provider_names())
    assert is_provider_name("OpenAI-Compatible")
    assert not is_provider_name("gpt-4.1")


def test_unknown_provider_lists_the_known_ones() -> None:
    with pytest.raises(UnknownProviderError) as info:
        chat("nosuch/model")
    message = str(info.value)
    assert "'nosuch'" in message
    assert "'nosuch/model'" in message
    for name in BUILT_INS:
        assert name in message
    assert isinstance(info.value, DeputyError)
    assert isinstance(info.value, ValueError)


def test_offline_providers_resolve_with_default_models() -> None:
    test_chat = chat("test")
    assert isinstance(test_chat.provider, TestProvider)
    assert test_chat.provider.model == "test"
    assert chat("test/deterministic").provider.model == "deterministic"
    scripted = chat("scripted", script=["hi"], system_prompt="sys")
    assert isinstance(scripted.provider, ScriptedProvider)
    assert scripted.get_system_prompt() == "sys"


def test_a_bare_provider_without_default_model_is_an_error(
    custom: list[tuple[str, dict[str, Any]]],
) -> None:
    with pytest.raises(ValueError, match="names no model; use 'my_host/<model>'"):
        chat("my_host")
    assert custom == []


async def test_custom_factory_gets_model_and_provider_kwargs(
    custom: list[tuple[str, dict[str, Any]]],
) -> None:
    echo = Tool("echo", "Echo.", {"type": "object", "properties": {}}, lambda: "e")
    c = chat(
        "MY_HOST/org/model-x",
        base_url="http://127.0.0.1:9",
        system_prompt="be nice",
        tools=[echo],
        params={"temperature": 0},
        max_tool_rounds=3,
    )
    assert custom == [("org/model-x", {"base_url": "http://127.0.0.1:9"})]
    assert isinstance(c, Chat)
    assert c.get_model() == "org/model-x"
    assert c.get_tools() == [echo]
    assert c.params == {"temperature": 0}
    assert c.max_tool_rounds == 3
    assert await c.chat_async("hi") == "from host"
    assert resolve_provider("my-host/y").model == "y"


def test_registering_twice_needs_replace(custom: list[tuple[str, dict[str, Any]]]) -> None:
    def other(model: str, **kwargs: Any) -> TestProvider:
        return TestProvider(model=model)

    with pytest.raises(ValueError, match="already registered"):
        register_provider("my_host", other)
    register_provider("my_host", other, replace=True, default_model="dflt")
    assert isinstance(chat("my_host").provider, TestProvider)
    assert chat("my_host").provider.model == "dflt"
    with pytest.raises(ValueError, match="without '/'"):
        register_provider("a/b", other)
    with pytest.raises(TypeError, match="callable"):
        register_provider("x", "not callable")  # type: ignore[arg-type]


def test_http_providers_load_lazily_without_network() -> None:
    openai_module = pytest.importorskip("deputy_runtime.chat._openai")
    provider = resolve_provider("openai_compatible/local-model", base_url="http://127.0.0.1:1")
    assert isinstance(provider, openai_module.OpenAICompatibleProvider)
    assert provider.model == "local-model"
