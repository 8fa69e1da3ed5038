"""resolve_model: Claude Code aliases, host maps and other vendors' ids, never sent raw."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deputy_runtime.chat import (
    CLAUDE_CODE_ALIASES,
    ModelSource,
    TestProvider,
    chat,
    is_model_alias,
    model_alias_map,
    resolve_model,
    suggest_model_spec,
)

ALIASES = ["sonnet", "opus", "haiku", "fable", "best", "opusplan", "sonnet[1m]", "opus[1m]"]
NO_ENV: dict[str, str] = {}


@pytest.mark.parametrize(
    ("alias", "expected"),
    [
        ("sonnet", CLAUDE_CODE_ALIASES["sonnet"][0]),
        ("Opus", CLAUDE_CODE_ALIASES["opus"][0]),
        ("haiku", CLAUDE_CODE_ALIASES["haiku"][0]),
        ("fable", CLAUDE_CODE_ALIASES["fable"][0]),
        ("best", CLAUDE_CODE_ALIASES["opus"][0]),
        ("sonnet[1m]", CLAUDE_CODE_ALIASES["sonnet"][0]),
        ("opus[1m]", CLAUDE_CODE_ALIASES["opus"][0]),
        ("opusplan", CLAUDE_CODE_ALIASES["sonnet"][0]),
    ],
)
def test_anthropic_lead_resolves_aliases_to_the_table(alias: str, expected: str) -> None:
    choice = resolve_model(alias, "anthropic", environ=NO_ENV)
    assert choice.source is ModelSource.LEAD_PROVIDER
    assert choice.model == expected
    assert choice.warning is None


def test_opusplan_plans_with_opus() -> None:
    choice = resolve_model("opusplan", "anthropic", environ=NO_ENV, plan_mode=True)
    assert choice.model == CLAUDE_CODE_ALIASES["opus"][0]


@pytest.mark.parametrize("family", ["sonnet", "opus", "haiku"])
def test_environment_overrides_the_table_as_in_claude_code(family: str) -> None:
    variable = CLAUDE_CODE_ALIASES[family][1]
    assert variable == f"ANTHROPIC_DEFAULT_{family.upper()}_MODEL"
    choice = resolve_model(family, "anthropic", environ={variable: " claude-pinned-1 "})
    assert choice.model == "claude-pinned-1"
    # A blank variable is not a model: the table applies.
    blank = resolve_model(family, "anthropic", environ={variable: "  "})
    assert blank.model == CLAUDE_CODE_ALIASES[family][0]


@pytest.mark.parametrize("provider", ["openai", "openai_compatible", "ollama", "test", "mine"])
@pytest.mark.parametrize("alias", ALIASES)
def test_unmapped_alias_elsewhere_inherits_with_a_warning(provider: str, alias: str) -> None:
    choice = resolve_model(alias, provider, environ=NO_ENV)
    assert choice.source is ModelSource.LEAD
    assert choice.model is None
    assert choice.warning is not None
    assert repr(alias) in choice.warning
    assert repr(provider) in choice.warning
    assert f"--model-alias {alias}=" in choice.warning


def test_host_map_wins_for_any_provider() -> None:
    aliases = model_alias_map({"Sonnet": "openai/gpt-5", "haiku": "small-model"})
    mapped = resolve_model("sonnet", "anthropic", aliases=aliases, environ=NO_ENV)
    assert (mapped.source, mapped.model) == (ModelSource.SPEC, "openai/gpt-5")
    # The lead's own provider: the lead's client (base URL, key) is reused.
    same = resolve_model("sonnet", "openai", aliases=aliases)
    assert (same.source, same.model) == (ModelSource.LEAD_PROVIDER, "gpt-5")
    bare = resolve_model("HAIKU", "openai", aliases=aliases)
    assert (bare.source, bare.model, bare.warning) == (
        ModelSource.LEAD_PROVIDER,
        "small-model",
        None,
    )


@pytest.mark.parametrize("model", ["inherit", "default", " Inherit "])
def test_inherit_and_default_are_the_lead(model: str) -> None:
    for provider in ("openai", "anthropic", "test"):
        choice = resolve_model(model, provider, aliases={"inherit": "x"})
        assert choice == resolve_model("inherit", "openai")
        assert choice.source is ModelSource.LEAD
        assert choice.warning is None


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        ("claude-sonnet-4-20250514", "openai"),
        ("claude-3-5-haiku-latest", "openai_compatible"),
        ("claude-opus-4-1", "ollama"),
        ("gpt-4o", "anthropic"),
        ("o3-mini", "anthropic"),
    ],
)
def test_another_vendors_id_inherits_with_a_warning(model: str, provider: str) -> None:
    choice = resolve_model(model, provider)
    assert choice.source is ModelSource.LEAD
    assert choice.warning is not None
    assert "another vendor" in choice.warning
    # ... unless the host maps it.
    mapped = resolve_model(model, provider, aliases=model_alias_map({model: "served-id"}))
    assert (mapped.model, mapped.warning) == ("served-id", None)


@pytest.mark.parametrize(
    ("model", "provider", "expected"),
    [
        (
            "claude-sonnet-4-20250514",
            "anthropic",
            (ModelSource.LEAD_PROVIDER, "claude-sonnet-4-20250514"),
        ),
        ("gpt-4o", "openai", (ModelSource.LEAD_PROVIDER, "gpt-4o")),
        ("gpt-4o", "openai_compatible", (ModelSource.LEAD_PROVIDER, "gpt-4o")),
        ("llama3", "ollama", (ModelSource.LEAD_PROVIDER, "llama3")),
        ("anthropic/claude-x", "openai", (ModelSource.SPEC, "anthropic/claude-x")),
        ("openai/gpt-5", "openai", (ModelSource.LEAD_PROVIDER, "gpt-5")),
        ("ollama/library/llama3", "openai", (ModelSource.SPEC, "ollama/library/llama3")),
        ("org/model-x", "openai", (ModelSource.LEAD_PROVIDER, "org/model-x")),
    ],
)
def test_everything_else_keeps_its_meaning(
    model: str, provider: str, expected: tuple[ModelSource, str]
) -> None:
    choice = resolve_model(model, provider)
    assert (choice.source, choice.model) == expected
    assert choice.warning is None


@pytest.mark.parametrize(
    ("aliases", "message"),
    [
        ({"": "x"}, "non-blank string"),
        ({"sonnet": " "}, r"model_aliases\['sonnet'\]"),
        ({"sonnet": "inherit"}, "leave the alias out"),
        ({"sonnet": 3}, r"model_aliases\['sonnet'\]"),
    ],
)
def test_bad_alias_maps_name_the_entry(aliases: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        model_alias_map(aliases)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="mapping"):
        model_alias_map(["sonnet=x"])  # type: ignore[arg-type]


@given(
    model=st.sampled_from(ALIASES).map(
        lambda a: "".join(c.upper() if i % 2 else c for i, c in enumerate(a))
    ),
    provider=st.sampled_from(["openai", "openai_compatible", "ollama", "test", "anthropic"]),
)
def test_an_alias_is_never_passed_on_raw(model: str, provider: str) -> None:
    """Whatever the case or provider, the chosen model id is never the alias itself."""
    assert is_model_alias(model)
    choice = resolve_model(model, provider, environ=NO_ENV)
    assert choice.model is None or not is_model_alias(choice.model)
    assert (choice.warning is None) == (provider == "anthropic")


CORPUS = Path(__file__).resolve().parent.parent / "definitions" / "corpus" / "valid"


@pytest.mark.parametrize("provider", ["openai", "openai_compatible", "anthropic", "test"])
def test_real_agent_files_models_are_never_sent_raw(provider: str) -> None:
    """The markdown corpus (real Claude Code agent files): no alias reaches any provider."""
    models = [
        match.group(1).strip()
        for path in sorted(CORPUS.glob("*.md"))
        if (match := re.search(r"^model:(.*)$", path.read_text(encoding="utf-8"), re.M))
    ]
    assert {"sonnet", "opus", "haiku", "inherit"} <= set(models)
    for model in models:
        choice = resolve_model(model, provider, environ=NO_ENV)
        if choice.source is ModelSource.LEAD_PROVIDER:
            assert choice.model is not None
            assert not is_model_alias(choice.model)
            if provider != "anthropic":
                assert not choice.model.startswith("claude-"), model
        if is_model_alias(model):
            assert (choice.warning is None) == (provider == "anthropic")


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("gpt-4o", "openai/gpt-4o"),
        ("o3-mini", "openai/o3-mini"),
        ("claude-sonnet-4-5", "anthropic/claude-sonnet-4-5"),
        ("Sonnet", f"anthropic/{CLAUDE_CODE_ALIASES['sonnet'][0]}"),
        ("anthropc/claude-x", "anthropic/claude-x"),
        ("OpenAl/gpt-4o", "openai/gpt-4o"),
        ("opena", "openai"),
        ("openai/gpt-4o", None),  # nothing to correct
        ("test", None),
        ("nope/x", None),  # nothing close enough to guess
        ("zzz", None),
    ],
)
def test_suggestions_for_mistyped_model_specs(spec: str, expected: str | None) -> None:
    assert suggest_model_spec(spec) == expected


def test_the_test_models_fanout_is_configurable_and_checked() -> None:
    provider = TestProvider(fanout=3)
    assert provider.with_model("other").fanout == 3
    assert chat("test", fanout=2).provider.fanout == 2  # type: ignore[attr-defined]
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ValueError, match="fanout must be a whole number of at least 1"):
            TestProvider(fanout=bad)  # type: ignore[arg-type]
