"""Building a lead from command-line choices: shared by ``run`` and ``serve``.

Model selection (``--model``, else a configured provider's key, else the offline
``test`` model), plugins (``--plugin``: providers, a delegation policy, model aliases),
``--model-alias`` options and the definitions directory are read here, so both commands
accept and refuse exactly the same things with the same messages. Every mistake raises
:class:`UsageError`, whose message names the option or file.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from ..chat import (
    Chat,
    TestProvider,
    chat,
    is_model_alias,
    is_provider_name,
    model_alias_map,
    parse_model_spec,
    provider_names,
    resolve_model,
    suggest_model_spec,
)
from ..definitions import AgentDefinition, agent_definitions
from ..errors import DeputyError
from ..runtime import DelegationPolicy, LeadAgent, Permissions, UsageLimits
from ..tools import Tool, tools_file

__all__ = [
    "BASE_URL_VARIABLES",
    "DEFAULT_MODELS",
    "LEAD_PROMPT",
    "LEAD_TOOLS",
    "OFFLINE_MODEL",
    "Plugin",
    "UsageError",
    "alias_options",
    "build_lead",
    "check_backend",
    "check_target",
    "fanout_note",
    "file_tools",
    "lead_alias",
    "load_definitions",
    "load_plugin",
    "make_chat",
    "select_model",
]

#: Environment variable -> model used when only that provider's key is configured.
DEFAULT_MODELS: tuple[tuple[str, str], ...] = (
    ("OPENAI_API_KEY", "openai/gpt-4.1-mini"),
    ("ANTHROPIC_API_KEY", "anthropic/claude-sonnet-4-5"),
)
OFFLINE_MODEL = "test"
LEAD_TOOLS = ("read_file", "list_files", "grep_files")  # read-only: the lead delegates
LEAD_PROMPT = (
    "You are the lead agent. Split the user's task into self-contained parts, delegate "
    "each part to the sub-agent that fits it best (independent parts in the same turn, "
    "so they run in parallel), then combine their answers into one reply."
)
# After the first Ctrl-C, runs get this long to stop at a boundary before being cancelled.


class UsageError(Exception):
    """Bad arguments, definitions or plugins: reported on stderr, exit status 2."""


def select_model(explicit: str | None, environ: Mapping[str, str]) -> tuple[str, str]:
    """The model spec to use and the sentence that announces it."""
    if explicit:
        return explicit, f"Model: {explicit} (from --model)"
    for variable, spec in DEFAULT_MODELS:
        if environ.get(variable, "").strip():
            return spec, f"Model: {spec} ({variable} is set; pass --model to choose another)"
    return OFFLINE_MODEL, (
        f"Model: {OFFLINE_MODEL} - the offline, deterministic test provider, NOT a real model "
        "(set OPENAI_API_KEY or ANTHROPIC_API_KEY, or pass --model provider/model)"
    )


def lead_alias(spec: str, announcement: str) -> tuple[str, str]:
    """``--model anthropic/sonnet``: the lead's own model is an alias too; resolve it.

    On another provider an alias names no model at all, which is refused.
    """
    provider, _, model = spec.partition("/")
    if not model or not is_model_alias(model):
        return spec, announcement
    if provider.strip().lower() != "anthropic":
        raise UsageError(
            f"--model {spec!r}: {model.strip()!r} is a Claude Code alias, which provider "
            f"{provider.strip()!r} does not serve; name one of its models, or use "
            f"--model {suggest_model_spec(model)}"
        )
    resolved = f"anthropic/{resolve_model(model, 'anthropic').model}"
    return resolved, f"Model: {resolved} (from --model {spec}, a Claude Code alias)"


def check_backend(backend: str) -> None:
    """Refuse ``--backend trio`` up front when trio is not installed (it is an extra)."""
    if backend != "trio":
        return
    try:
        import trio  # noqa: F401
    except ImportError:
        raise UsageError(
            "--backend trio needs the trio package, which is not installed; install the "
            "extra with: pip install 'deputy-runtime[trio]'"
        ) from None


def alias_options(values: Sequence[str]) -> dict[str, str]:
    """``--model-alias ALIAS=MODEL`` options as a validated map (later ones win)."""
    pairs: dict[str, str] = {}
    for value in values:
        alias, equals, target = value.partition("=")
        if not equals or not alias.strip() or not target.strip():
            raise UsageError(
                f"--model-alias {value!r}: expected ALIAS=MODEL, e.g. --model-alias "
                "sonnet=openai/gpt-5 (MODEL is provider/model or a model id on the lead's "
                "provider)"
            )
        check_target(f"--model-alias {value!r}", target.strip())
        pairs[alias.strip()] = target.strip()
    try:
        return model_alias_map(pairs)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"--model-alias: {exc}") from exc


def check_target(label: str, target: str) -> None:
    """A mapped model naming an unknown provider is refused with the closest name."""
    if "/" not in target or is_provider_name(parse_model_spec(target)[0]):
        return
    suggestion = suggest_model_spec(target)
    if suggestion is not None:
        raise UsageError(
            f"{label}: no provider named {target.partition('/')[0]!r}; did you mean {suggestion}?"
        )


def fanout_note(lead_chat: Chat, agents: Sequence[str]) -> str | None:
    """Say which agents the offline test model leaves out (it fans out to a capped number)."""
    provider = lead_chat.provider
    if not isinstance(provider, TestProvider) or len(agents) <= provider.fanout:
        return None
    fanout = provider.fanout
    skipped = agents[fanout:]
    return (
        f"Note: the test model delegates to at most {fanout} agents per turn, so "
        f"{len(skipped)} of {len(agents)} will not run ({', '.join(skipped)}); pass "
        f"--test-fanout {len(agents)} to run them all."
    )


#: Provider -> environment variable naming its endpoint, as the official OpenAI SDK reads it
#: (``https://host/v1``), so OpenAI-compatible gateways work from the CLI.
BASE_URL_VARIABLES = {"openai": "OPENAI_BASE_URL"}


def make_chat(spec: str, *, explicit: bool = True, fanout: int | None = None) -> Chat:
    label = f"--model {spec!r}" if explicit else f"the default model {spec!r}"
    provider = spec.partition("/")[0].strip().lower()
    if not is_provider_name(provider):
        suggestion = suggest_model_spec(spec)
        if suggestion is not None:
            hint = f"; did you mean --model {suggestion}?"
        else:
            hint = (
                "; a model is provider/model, e.g. openai/gpt-4.1-mini (known providers: "
                f"{', '.join(provider_names())})"
            )
        raise UsageError(f"{label}: no provider named {spec.partition('/')[0]!r}{hint}")
    kwargs: dict[str, Any] = {}
    variable = BASE_URL_VARIABLES.get(provider)
    if variable and os.environ.get(variable, "").strip():
        kwargs["base_url"] = os.environ[variable].strip()
    if fanout is not None:
        if provider != OFFLINE_MODEL:
            raise UsageError(
                f"--test-fanout applies only to the offline test model, not {spec!r}; leave it out"
            )
        kwargs["fanout"] = fanout
    try:
        return chat(spec, system_prompt=LEAD_PROMPT, **kwargs)
    except (DeputyError, ValueError, TypeError) as exc:
        raise UsageError(f"{label}: {exc}") from exc


def load_definitions(directory: str, registry: Mapping[str, Any]) -> dict[str, AgentDefinition]:
    path = Path(directory)
    if not path.is_dir():
        raise UsageError(
            f"--agents {directory!r} is not a directory; point it at a directory of "
            "definition files (*.yaml, *.md), e.g. --agents examples/agents"
        )
    try:
        found = agent_definitions(path, tools=registry, markdown=True)
    except DeputyError as exc:
        raise UsageError(str(exc)) from exc
    if not found:
        raise UsageError(f"--agents {directory!r} holds no definition files (*.yaml, *.yml, *.md)")
    return found


def file_tools(directory: Path) -> dict[str, Tool]:
    """The built-in file tools confined to ``directory``: the registry definitions name from."""
    return {t.name: t for t in tools_file(directory)}


def build_lead(
    lead_chat: Chat,
    definitions: Mapping[str, AgentDefinition],
    registry: Mapping[str, Tool],
    *,
    working_dir: Path,
    permission_mode: str,
    max_requests: int,
    max_total_tokens: int | None = None,
    policy: DelegationPolicy | None,
    aliases: Mapping[str, str],
) -> LeadAgent:
    """A lead over ``definitions`` with the read-only file tools and the given ceilings."""
    try:
        limits = UsageLimits(max_requests=max_requests, max_total_tokens=max_total_tokens)
        permissions = Permissions(mode=permission_mode)  # type: ignore[arg-type]
        return LeadAgent(
            lead_chat,
            definitions,
            tools=[registry[name] for name in LEAD_TOOLS],
            permissions=permissions,
            usage_limits=limits,
            working_dir=working_dir,
            delegation_policy=policy,
            model_aliases=aliases,
        )
    except (DeputyError, ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from exc


class Plugin:
    """What a plugin contributes: a delegation policy and model aliases."""

    __slots__ = ("aliases", "policy")

    def __init__(self, policy: DelegationPolicy | None, aliases: dict[str, str]) -> None:
        self.policy = policy
        self.aliases = aliases


def load_plugin(target: str) -> Plugin:
    """Import a plugin module (dotted name or .py file); read what it contributes.

    A plugin runs before the model is resolved, so it can ``register_provider``. If it
    defines ``delegation_policy`` (a DelegationPolicy, or a function returning one), the
    lead uses it; ``model_aliases`` (a dict) maps definitions' model aliases, with
    ``--model-alias`` options winning. A plugin that raises is reported with its own
    frames only (file, line, code), not the importer's.
    """
    path: Path | None = None
    try:
        if target.endswith(".py") or os.sep in target:
            path = Path(target)
            if not path.is_file():
                raise UsageError(f"--plugin {target!r}: no such file")
            spec = importlib.util.spec_from_file_location(f"deputy_plugin_{path.stem}", path)
            if spec is None or spec.loader is None:
                raise UsageError(f"--plugin {target!r}: not an importable Python file")
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
        policy = getattr(module, "delegation_policy", None)
        if policy is not None and not isinstance(policy, DelegationPolicy) and callable(policy):
            policy = policy()
    except UsageError:
        raise
    except Exception as exc:
        raise UsageError(f"--plugin {target!r} failed: {_plugin_error(exc)}") from exc
    if policy is not None and not isinstance(policy, DelegationPolicy):
        raise UsageError(
            f"--plugin {target!r}: delegation_policy must be a DelegationPolicy or a "
            f"function returning one, got {type(policy).__name__}"
        )
    return Plugin(policy, _plugin_aliases(target, module))


def _plugin_aliases(target: str, module: ModuleType) -> dict[str, str]:
    aliases = getattr(module, "model_aliases", None)
    if aliases is None:
        return {}
    try:
        checked = model_alias_map(aliases)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"--plugin {target!r}: {exc}") from exc
    for alias, model in checked.items():
        check_target(f"--plugin {target!r}: model_aliases[{alias!r}]", model)
    return checked


def _plugin_error(exc: BaseException) -> str:
    """``Type: message`` and the plugin's own frames (file:line and code), newest last.

    Frames of the import machinery and of this package are left out: they say nothing
    about the plugin. A syntax error has no plugin frame; its file and line are its own.
    """
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{text}\n  {exc.filename}:{exc.lineno}: {(exc.text or '').strip()}"
    package = str(Path(__file__).resolve().parent.parent)
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith("<")
        and "importlib" not in frame.filename
        and not str(Path(frame.filename).resolve()).startswith(package)
    ]
    lines = [f"  {f.filename}:{f.lineno} in {f.name}: {(f.line or '').strip()}" for f in frames]
    return "\n".join([text, *lines[-5:]])
