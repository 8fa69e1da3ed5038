"""Context windows and request-size estimates (the chat layer's window accounting)."""

from __future__ import annotations

import math

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from deputy_runtime.chat import (
    CONTEXT_WINDOWS,
    CONTEXT_WINDOWS_CHECKED,
    ContentText,
    ModelRequest,
    ScriptedProvider,
    TestProvider,
    Turn,
    WindowMeter,
    context_window,
    estimate_tokens,
)


class Named:
    """A host provider: only what ``context_window`` reads (a name and a model)."""

    def __init__(self, name: str, model: str, window: object = None) -> None:
        self.name = name
        self.model = model
        if window is not None:
            self.context_window = window


@pytest.mark.parametrize(
    ("name", "model", "window"),
    [
        ("openai", "gpt-4o-mini", 128_000),
        ("openai", "gpt-4.1-mini", 1_047_576),
        ("openai", "gpt-5-nano", 400_000),
        ("openai", "o3", 200_000),
        ("anthropic", "claude-sonnet-4-5", 200_000),
        ("openai", "some-new-model", None),
        ("ollama", "llama3.1", None),
        ("openai_compatible", "gpt-4o", None),
    ],
)
def test_the_table_by_provider_and_longest_model_prefix(
    name: str, model: str, window: int | None
) -> None:
    assert context_window(Named(name, model)) == window  # type: ignore[arg-type]


def test_the_table_is_dated_and_well_formed() -> None:
    assert CONTEXT_WINDOWS_CHECKED.count("-") == 2
    for entries in CONTEXT_WINDOWS.values():
        for prefix, tokens in entries:
            assert prefix
            assert type(tokens) is int
            assert tokens > 0


def test_a_providers_own_window_wins_over_the_table() -> None:
    assert context_window(Named("openai", "gpt-4o", 5000)) == 5000  # type: ignore[arg-type]
    assert context_window(ScriptedProvider([], context_window=123)) == 123
    assert context_window(ScriptedProvider([], context_window=123).with_model("m")) == 123
    assert context_window(TestProvider(context_window=77).with_model("other")) == 77
    assert context_window(TestProvider()) is None


@pytest.mark.parametrize(
    ("value", "error", "text"),
    [
        (0, ValueError, "between 1 and"),
        (True, TypeError, "must be an int number of tokens or None, got True"),
        (1.5, TypeError, "got 1.5"),
    ],
)
def test_bad_provider_windows_are_refused(value: object, error: type[Exception], text: str) -> None:
    with pytest.raises(error, match=text) as info:
        ScriptedProvider([], context_window=value)  # type: ignore[arg-type]
    assert str(info.value).startswith("ScriptedProvider.context_window must be")
    with pytest.raises(error, match=text):
        TestProvider(context_window=value)  # type: ignore[arg-type]


def request(text: str) -> ModelRequest:
    return ModelRequest("system", (Turn("user", (ContentText(text),)),))


@given(st.text(max_size=500))
def test_the_estimate_is_json_characters_over_four(text: str) -> None:
    req = request(text)
    assert estimate_tokens(req) == math.ceil(len(msgspec.json.encode(req)) / 4)


def test_calibration_only_raises_the_estimate() -> None:
    meter = WindowMeter()
    small, big = request("a" * 400), request("a" * 4000)
    plain = estimate_tokens(big)
    assert meter.estimate(big) == plain
    meter.reported(1)  # a provider reporting fewer tokens (or a fixed fake count)
    assert meter.estimate(big) == plain
    meter.estimate(small)
    meter.reported(3 * estimate_tokens(small))  # it counts three times the estimate
    assert meter.ratio == 3.0
    assert meter.estimate(big) == math.ceil(3 * plain)
    meter.reported(0)  # no count reported: nothing changes
    assert meter.ratio == 3.0


def test_the_http_providers_use_the_table_unless_given_a_window() -> None:
    from deputy_runtime.chat import AnthropicProvider, OllamaProvider, OpenAIProvider

    # Built with a key and no client: construction sends nothing.
    openai = OpenAIProvider("gpt-4o", api_key="k")
    assert context_window(openai) == 128_000
    assert context_window(openai.with_model("gpt-4.1")) == 1_047_576
    assert context_window(AnthropicProvider("claude-opus-4-1", api_key="k")) == 200_000
    assert context_window(OllamaProvider("llama3.1")) is None
    wide = AnthropicProvider("claude-sonnet-4-5", api_key="k", context_window=1_000_000)
    assert context_window(wide) == 1_000_000
    # Set for one model, not for another: a with_model copy goes back to the table.
    assert context_window(wide.with_model("claude-haiku-4-5")) == 200_000
    assert context_window(OllamaProvider("llama3.1", context_window=8192)) == 8192
    with pytest.raises(ValueError, match=r"OpenAIProvider.context_window must be between 1"):
        OpenAIProvider("gpt-4o", api_key="k", context_window=-5)
