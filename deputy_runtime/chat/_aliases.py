"""Which model a subagent's ``model`` field names, given the lead's provider.

Claude Code agent files say ``model: sonnet``, ``opus`` or ``haiku`` far more often than a
full model id. Those words are not model ids: no provider accepts them. This module turns
a definition's ``model`` into a :class:`ModelChoice`, never passing an alias on raw:

1. ``inherit`` and ``default`` (Claude Code's "no override"): the lead's own model.
2. The host's alias map (``LeadAgent(model_aliases=...)``, ``--model-alias``), for any
   provider: its value is ``provider/model`` or a model id on the lead's provider.
3. With an Anthropic lead, a Claude Code alias resolves as Claude Code resolves it:
   ``ANTHROPIC_DEFAULT_<FAMILY>_MODEL`` if set, else :data:`CLAUDE_CODE_ALIASES`.
4. Under any other lead, an unmapped alias, or a model id that is plainly another vendor's
   (``claude-...`` on a non-Anthropic provider, ``gpt-...`` on Anthropic), runs on the
   lead's model with a warning for the host.
5. Anything else as before: ``provider/model`` when the prefix is a registered provider,
   else that model id on the lead's provider.
"""

from __future__ import annotations

import difflib
import enum
import os
import re
from collections.abc import Mapping

import msgspec

from ._registry import is_provider_name, parse_model_spec, provider_names

__all__ = [
    "ALIASES_CHECKED",
    "CLAUDE_CODE_ALIASES",
    "ModelChoice",
    "ModelSource",
    "is_model_alias",
    "model_alias_map",
    "resolve_model",
    "suggest_model_spec",
]

#: The day :data:`CLAUDE_CODE_ALIASES` was last compared with Claude Code's model
#: configuration documentation (code.claude.com/docs/en/model-config).
ALIASES_CHECKED = "2026-12-03"

#: Claude Code family alias -> the Anthropic API model id it resolves to (first-party API),
#: and the environment variable that overrides it, as in Claude Code.
CLAUDE_CODE_ALIASES: Mapping[str, tuple[str, str]] = {
    "sonnet": ("claude-sonnet-5", "ANTHROPIC_DEFAULT_SONNET_MODEL"),
    "opus": ("claude-opus-4-8", "ANTHROPIC_DEFAULT_OPUS_MODEL"),
    "haiku": ("claude-haiku-4-5", "ANTHROPIC_DEFAULT_HAIKU_MODEL"),
    "fable": ("claude-fable-5", "ANTHROPIC_DEFAULT_FABLE_MODEL"),
}

# Aliases that stand for a family under another name. ``best`` is Fable where an
# organisation has access to it and Opus otherwise; the runtime cannot see access, so it
# takes the family every account has. ``opusplan`` plans with Opus and executes with
# Sonnet: a subagent in plan mode gets Opus, any other gets Sonnet. The ``[1m]`` forms
# select a 1M-token context window through a beta header this runtime does not send, so
# they run on the family's model with its standard window.
_FAMILY_OF = {
    "best": "opus",
    "sonnet[1m]": "sonnet",
    "opus[1m]": "opus",
    "fable[1m]": "fable",
}
_PLAN_ALIAS = "opusplan"
_INHERIT = frozenset({"inherit", "default"})

# Model ids that belong to one vendor: sent to another vendor's API they can only fail.
_VENDOR_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("anthropic", re.compile(r"^claude-", re.IGNORECASE)),
    ("openai", re.compile(r"^(gpt-|chatgpt-|o[1-9](-|$))", re.IGNORECASE)),
)
_VENDOR_PROVIDERS = {"anthropic": "anthropic", "openai": "openai"}


class ModelSource(enum.Enum):
    """Where a subagent's model comes from."""

    LEAD = "lead"  # a fresh copy of the lead's chat
    LEAD_PROVIDER = "lead_provider"  # another model id on the lead's provider (and client)
    SPEC = "spec"  # a ``provider/model`` spec on a provider of its own


class ModelChoice(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """The resolved model: ``model`` is the id (LEAD_PROVIDER) or spec (SPEC), else None.

    ``warning``, when set, is a sentence for the host: the definition asked for something
    the lead's provider cannot serve, so the subagent runs on the lead's model instead.
    """

    source: ModelSource
    model: str | None = None
    warning: str | None = None


def is_model_alias(model: str) -> bool:
    """Whether ``model`` is a Claude Code alias (``sonnet``, ``opusplan``, ``opus[1m]``...).

    Args:
        model: A definition's ``model`` field (case and surrounding spaces ignored).

    Returns:
        True when ``model`` is one of Claude Code's aliases, in any of its forms.
    """
    key = model.strip().lower()
    return key in CLAUDE_CODE_ALIASES or key in _FAMILY_OF or key == _PLAN_ALIAS


def model_alias_map(aliases: Mapping[str, str] | None) -> dict[str, str]:
    """Validate a host alias map: non-blank string keys and values; keys compared lowercased.

    A value may be ``provider/model`` or a model id on the lead's provider; it is not itself
    resolved again, so a map cannot loop.

    Args:
        aliases: Alias -> model, or ``None`` for none.

    Returns:
        The map with lowercased, stripped keys.

    Raises:
        TypeError: ``aliases`` is not a mapping of str to str.
        ValueError: A key or value is blank, or a value asks to inherit; the error names
            the entry.
    """
    if aliases is None:
        return {}
    if not isinstance(aliases, Mapping):
        raise TypeError(f"model_aliases must be a mapping of str to str, got {type(aliases)}")
    out: dict[str, str] = {}
    for key, value in aliases.items():
        if not isinstance(key, str) or not key.strip():
            raise ValueError(f"model_aliases: every key must be a non-blank string, got {key!r}")
        if not isinstance(value, str) or not value.strip():
            raise ValueError(
                f"model_aliases[{key!r}] must be a non-blank model id or 'provider/model'"
            )
        if value.strip().lower() in _INHERIT:
            raise ValueError(
                f"model_aliases[{key!r}] = {value!r}: map to a model; to run on the lead's "
                "model, leave the alias out of the map (it then inherits, with a warning)"
            )
        out[key.strip().lower()] = value.strip()
    return out


def resolve_model(
    model: str,
    lead_provider: str,
    *,
    aliases: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    plan_mode: bool = False,
) -> ModelChoice:
    """Resolve a definition's ``model`` for a lead whose provider is ``lead_provider``.

    The rules are in the module docstring and on the "Models of subagents" page.

    Args:
        model: The definition's ``model`` field.
        lead_provider: The name of the lead's provider (``"openai"``, ``"anthropic"``, ...).
        aliases: A host alias map that :func:`model_alias_map` accepts.
        environ: Where ``ANTHROPIC_DEFAULT_*_MODEL`` is read; ``os.environ`` by default.
        plan_mode: Whether the subagent runs in plan mode (for ``opusplan``).

    Returns:
        The choice: inherit the lead's chat, a model id on the lead's provider, or a
        ``provider/model`` spec, with a warning when the request could not be honoured.
    """
    key = model.strip().lower()
    lead_provider = lead_provider.strip().lower()
    if key in _INHERIT:
        return ModelChoice(source=ModelSource.LEAD)
    if aliases and key in aliases:
        return _target(aliases[key], lead_provider)
    family = _family(key, plan_mode)
    if family is not None:
        if lead_provider == "anthropic":
            default, variable = CLAUDE_CODE_ALIASES[family]
            env = os.environ if environ is None else environ
            chosen = env.get(variable, "").strip() or default
            return ModelChoice(source=ModelSource.LEAD_PROVIDER, model=chosen)
        return ModelChoice(
            source=ModelSource.LEAD,
            warning=(
                f"model {model.strip()!r} is a Claude Code alias with no mapping for provider "
                f"{lead_provider!r}: running on the lead's model instead (map it with "
                f"model_aliases or --model-alias {key}=provider/model)"
            ),
        )
    spec_provider, spec_model = _split(model)
    if spec_provider is not None and spec_model is not None:
        if spec_provider == lead_provider:
            return ModelChoice(source=ModelSource.LEAD_PROVIDER, model=spec_model)
        return ModelChoice(source=ModelSource.SPEC, model=model.strip())
    vendor = _vendor(model)
    if vendor is not None and lead_provider in _VENDOR_PROVIDERS.values():
        if _VENDOR_PROVIDERS[vendor] != lead_provider:
            return ModelChoice(source=ModelSource.LEAD, warning=_foreign(model, lead_provider))
    elif vendor == "anthropic" and lead_provider != "anthropic":
        return ModelChoice(source=ModelSource.LEAD, warning=_foreign(model, lead_provider))
    return ModelChoice(source=ModelSource.LEAD_PROVIDER, model=model.strip())


def _target(value: str, lead_provider: str) -> ModelChoice:
    provider, model = _split(value)
    if provider is None or model is None:
        return ModelChoice(source=ModelSource.LEAD_PROVIDER, model=value)
    if provider == lead_provider:
        return ModelChoice(source=ModelSource.LEAD_PROVIDER, model=model)
    return ModelChoice(source=ModelSource.SPEC, model=value)


def _family(key: str, plan_mode: bool) -> str | None:
    if key in CLAUDE_CODE_ALIASES:
        return key
    if key == _PLAN_ALIAS:
        return "opus" if plan_mode else "sonnet"
    return _FAMILY_OF.get(key)


def _split(value: str) -> tuple[str | None, str | None]:
    """``(provider, model)`` when ``value`` is ``provider/model`` on a registered provider."""
    if "/" not in value:
        return None, None
    provider, model = parse_model_spec(value)
    if model is None or not is_provider_name(provider):
        return None, None
    return provider.strip().lower().replace("-", "_"), model


def _vendor(model: str) -> str | None:
    for vendor, pattern in _VENDOR_PATTERNS:
        if pattern.match(model.strip()):
            return vendor
    return None


def _foreign(model: str, lead_provider: str) -> str:
    return (
        f"model {model.strip()!r} is another vendor's model id, which provider "
        f"{lead_provider!r} cannot serve: running on the lead's model instead (map it with "
        f"model_aliases or --model-alias {model.strip()}=provider/model)"
    )


def suggest_model_spec(spec: str) -> str | None:
    """What a mistyped ``provider/model`` spec probably meant.

    A bare model id gets its vendor's provider (``gpt-4o`` -> ``openai/gpt-4o``, a Claude Code
    alias -> its ``anthropic/`` model id); an unknown provider gets the closest registered
    name (``anthropc/x`` -> ``anthropic/x``). A bare word close to a provider name gets that
    name.

    Args:
        spec: The spec as given (``--model``).

    Returns:
        The suggested spec, or ``None`` if the spec looks fine.
    """
    text = spec.strip()
    if not text:
        return None
    provider, slash, model = text.partition("/")
    if is_provider_name(provider):
        return None
    names = provider_names()
    if not slash:
        if is_model_alias(text):
            choice = resolve_model(text, "anthropic")
            return f"anthropic/{choice.model}"
        vendor = _vendor(text)
        if vendor is not None:
            return f"{_VENDOR_PROVIDERS[vendor]}/{text}"
        close = difflib.get_close_matches(text.lower(), names, n=1, cutoff=0.75)
        return close[0] if close else None
    close = difflib.get_close_matches(provider.lower().replace("-", "_"), names, n=1, cutoff=0.75)
    return f"{close[0]}/{model}" if close else None
