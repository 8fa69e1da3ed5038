"""``chat("provider/model")``: resolve a model spec through a provider registry.

The registry maps a provider name to a factory ``factory(model, **kwargs) -> Provider``.
Built-in providers are registered by module path and imported only when first used, so
``import deputy_runtime`` never pays for the HTTP providers. Hosts add their own with
:func:`register_provider`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..errors import UnknownProviderError
from ..tools import Tool
from ._chat import DEFAULT_MAX_TOOL_ROUNDS, Chat
from ._types import Provider

__all__ = [
    "ProviderFactory",
    "chat",
    "is_provider_name",
    "parse_model_spec",
    "provider_names",
    "register_provider",
    "resolve_provider",
    "unregister_provider",
]

#: Builds a provider for a model name; extra keyword arguments come from ``chat(...)``.
ProviderFactory = Callable[..., Provider]


class _Entry:
    __slots__ = ("default_model", "factory", "target")

    def __init__(
        self,
        factory: ProviderFactory | None,
        target: tuple[str, str] | None,
        default_model: str | None,
    ) -> None:
        self.factory = factory
        self.target = target  # (module, attribute) of a lazily imported built-in
        self.default_model = default_model

    def load(self) -> ProviderFactory:
        if self.factory is None:
            assert self.target is not None
            module, attribute = self.target
            cls = getattr(importlib.import_module(module), attribute)
            self.factory = _class_factory(cls)
        return self.factory


def _class_factory(cls: Any) -> ProviderFactory:
    def factory(model: str, **kwargs: Any) -> Provider:
        provider: Provider = cls(model=model, **kwargs)
        return provider

    return factory


_PKG = "deputy_runtime.chat"
_registry: dict[str, _Entry] = {
    "openai": _Entry(None, (f"{_PKG}._openai", "OpenAIProvider"), None),
    "openai_compatible": _Entry(None, (f"{_PKG}._openai", "OpenAICompatibleProvider"), None),
    "ollama": _Entry(None, (f"{_PKG}._openai", "OllamaProvider"), None),
    "anthropic": _Entry(None, (f"{_PKG}._anthropic", "AnthropicProvider"), None),
    "scripted": _Entry(None, (f"{_PKG}._scripted", "ScriptedProvider"), "scripted"),
    "test": _Entry(None, (f"{_PKG}._testprovider", "TestProvider"), "test"),
}


def _normalise(name: str) -> str:
    return name.strip().lower().replace("-", "_")


def register_provider(
    name: str,
    factory: ProviderFactory,
    *,
    default_model: str | None = None,
    replace: bool = False,
) -> None:
    """Make ``chat("name/model")`` call ``factory(model=model, **kwargs)``.

    Names are case-insensitive and ``-`` equals ``_``. ``default_model`` is used for a
    bare ``chat("name")``; without it a model is required. Replacing an existing
    provider (built-ins included) needs ``replace=True``.
    """
    if not isinstance(name, str) or not name.strip() or "/" in name:
        raise ValueError(f"provider name must be a non-empty string without '/', got {name!r}")
    if not callable(factory):
        raise TypeError(f"provider factory for {name!r} must be callable")
    key = _normalise(name)
    if key in _registry and not replace:
        raise ValueError(f"provider {key!r} is already registered; pass replace=True to replace it")
    _registry[key] = _Entry(factory, None, default_model)


def unregister_provider(name: str) -> None:
    """Remove a provider from the registry (``KeyError`` if it is not registered)."""
    del _registry[_normalise(name)]


def provider_names() -> tuple[str, ...]:
    """The registered provider names, sorted."""
    return tuple(sorted(_registry))


def is_provider_name(name: str) -> bool:
    """Whether ``name`` (the part of a model spec before ``/``) is a registered provider."""
    return _normalise(name) in _registry


def parse_model_spec(spec: str) -> tuple[str, str | None]:
    """Split ``"provider/model"`` on the first ``/``: ``("provider", "model")``.

    The model keeps any further slashes (``"ollama/library/llama3"``); a bare
    ``"provider"`` gives ``None`` for the model.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"model spec must be a non-empty 'provider/model' string, got {spec!r}")
    provider, slash, model = spec.strip().partition("/")
    if not provider:
        raise ValueError(f"model spec {spec!r} has no provider name before '/'")
    if slash and not model:
        raise ValueError(f"model spec {spec!r} has no model name after '/'")
    return provider, (model if slash else None)


def resolve_provider(spec: str, **kwargs: Any) -> Provider:
    """Build the provider for ``"provider/model"``; ``kwargs`` go to its factory."""
    name, model = parse_model_spec(spec)
    entry = _registry.get(_normalise(name))
    if entry is None:
        raise UnknownProviderError(
            f"unknown provider {name!r} in model spec {spec!r}; known providers: "
            f"{', '.join(provider_names())}"
        )
    if model is None:
        model = entry.default_model
        if model is None:
            raise ValueError(
                f"model spec {spec!r} names no model; use '{name}/<model>' "
                f"(provider {name!r} has no default model)"
            )
    return entry.load()(model=model, **kwargs)


def chat(
    spec: str,
    *,
    system_prompt: str | Sequence[str] | None = None,
    tools: Iterable[Tool] = (),
    max_tool_rounds: int = DEFAULT_MAX_TOOL_ROUNDS,
    params: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Chat:
    """A :class:`Chat` for ``"provider/model"``, e.g. ``chat("anthropic/claude-x")``.

    ``system_prompt``, ``tools``, ``max_tool_rounds`` and ``params`` configure the Chat;
    every other keyword argument goes to the provider's factory (``base_url``,
    ``api_key``, ``script`` for ``scripted``, ...).
    """
    provider = resolve_provider(spec, **kwargs)
    return Chat(
        provider,
        system_prompt,
        tools=tools,
        max_tool_rounds=max_tool_rounds,
        params=params,
    )
