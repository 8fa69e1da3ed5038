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

    Names are case-insensitive and ``-`` equals ``_``.

    Args:
        name: The provider name, the part of a model spec before ``/``.
        factory: Builds a :class:`~deputy_runtime.chat.Provider` from ``model=`` and the
            extra keyword arguments given to :func:`chat`.
        default_model: The model a bare ``chat("name")`` uses; without it a model is
            required.
        replace: Allow replacing a registered provider (built-ins included).

    Raises:
        ValueError: ``name`` is empty or contains ``/``, or it is already registered and
            ``replace`` is false.
        TypeError: ``factory`` is not callable.
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
    """Remove a provider from the registry.

    Args:
        name: The provider name (case-insensitive, ``-`` equals ``_``).

    Raises:
        KeyError: No provider of that name is registered.
    """
    del _registry[_normalise(name)]


def provider_names() -> tuple[str, ...]:
    """The registered provider names.

    Returns:
        The names, sorted.
    """
    return tuple(sorted(_registry))


def is_provider_name(name: str) -> bool:
    """Whether ``name`` is a registered provider.

    Args:
        name: The part of a model spec before ``/``.

    Returns:
        True when :func:`chat` would find a provider of that name.
    """
    return _normalise(name) in _registry


def parse_model_spec(spec: str) -> tuple[str, str | None]:
    """Split ``"provider/model"`` on the first ``/``.

    The model keeps any further slashes (``"ollama/library/llama3"``).

    Args:
        spec: A model spec such as ``"openai/gpt-4.1-mini"`` or a bare ``"test"``.

    Returns:
        ``(provider, model)``; the model is ``None`` for a bare provider name.

    Raises:
        ValueError: ``spec`` is empty, or has nothing before or after its ``/``.
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
    """Build the provider a model spec names.

    Args:
        spec: ``"provider/model"``, or a bare provider name that has a default model.
        **kwargs: Passed to the provider's factory (``base_url``, ``api_key``, ...).

    Returns:
        A new provider instance.

    Raises:
        UnknownProviderError: The provider is not registered; the message lists the known
            ones.
        ValueError: ``spec`` is malformed, or names no model and the provider has no
            default model.
    """
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
    """Build a :class:`Chat` for a model spec, e.g. ``chat("anthropic/claude-sonnet-4-5")``.

    Args:
        spec: ``"provider/model"`` (split on the first ``/``), or a bare provider name that
            has a default model (``"test"``, ``"scripted"``).
        system_prompt: The system prompt; several strings are joined with blank lines.
        tools: Tools the model may call in :meth:`Chat.chat_async`'s tool loop.
        max_tool_rounds: Tool rounds one exchange may run before
            :class:`~deputy_runtime.errors.ToolLoopLimitError`.
        params: Model parameters sent with every request (``temperature``, ...).
        **kwargs: Passed to the provider's factory (``base_url``, ``api_key``, ``script``
            for ``scripted``, ...).

    Returns:
        A new Chat with an empty history.

    Raises:
        UnknownProviderError: The provider is not registered.
        ValueError: ``spec`` is malformed or names no model where one is needed.
    """
    provider = resolve_provider(spec, **kwargs)
    return Chat(
        provider,
        system_prompt,
        tools=tools,
        max_tool_rounds=max_tool_rounds,
        params=params,
    )
