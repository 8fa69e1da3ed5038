"""Building a lead from command-line choices: shared by ``run`` and ``serve``.

Model selection (``--model``, else a configured provider's key, else the offline
``test`` model), plugins (``--plugin``: providers, a delegation policy, model aliases,
tools and skills), ``--model-alias`` options and the definitions directory are read here,
so both commands accept and refuse exactly the same things with the same messages. The
definitions directory, plugins and tool and skill registries are checked and built by
the functions ``validate`` and ``list`` use (:mod:`.definitions`), so a file that passes
``validate`` loads here. Every mistake raises :class:`UsageError`, whose message names
the option or file.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

import msgspec

from .._extras import install_hint
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
from ..definitions import (
    AgentDefinition,
    DefinitionProblem,
    PluginFolder,
    agent_definitions,
    find_plugins,
)
from ..errors import DeputyError
from ..runtime import (
    BudgetLedger,
    DelegationPolicy,
    ExclusiveResource,
    Hooks,
    LeadAgent,
    LeaseBackend,
    Permissions,
    ResourceMode,
    SharedResources,
    UsageLimits,
)
from ..skills import Skill
from ..tools import BashTools, Tool
from .definitions import (
    McpSetupError,
    PluginError,
    definitions_path_problem,
    host_shell,
    host_skill_registry,
    host_tool_registry,
    import_plugin,
    plugin_failure,
    read_mcp_servers,
)

__all__ = [
    "DEFAULT_MODELS",
    "LEAD_PROMPT",
    "LEAD_TOOLS",
    "OFFLINE_MODEL",
    "Definitions",
    "Plugin",
    "Plugins",
    "RedisSetup",
    "UsageError",
    "alias_options",
    "attach_mcp_servers",
    "build_lead",
    "check_agents",
    "check_backend",
    "check_model_name",
    "check_target",
    "fanout_note",
    "lead_alias",
    "load_definitions",
    "load_mcp_servers",
    "load_plugin",
    "load_plugins",
    "make_chat",
    "mcp_mode_options",
    "print_warnings",
    "redis_setup",
    "select_model",
    "with_lease_backend",
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
            f"extra with: {install_hint('trio')}"
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


def check_model_name(spec: str, *, explicit: bool = True) -> str:
    """The provider name of ``spec``, refused when no provider has it (with a suggestion).

    Also what a durable run checks before it starts: its workers build the provider, but
    a model nobody can resolve is a mistake of the command line, found here.

    Raises:
        UsageError: No provider is registered under that name.
    """
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
    return provider


def make_chat(spec: str, *, explicit: bool = True, fanout: int | None = None) -> Chat:
    """The lead's chat on ``spec``, refused by name when it cannot work.

    Raises:
        UsageError: No provider has that name, ``fanout`` is given for another model than
            the offline one, the provider refuses its options, or its API key is missing.
    """
    label = f"--model {spec!r}" if explicit else f"the default model {spec!r}"
    provider = check_model_name(spec, explicit=explicit)
    kwargs: dict[str, Any] = {}
    if fanout is not None:
        if provider != OFFLINE_MODEL:
            raise UsageError(
                f"--test-fanout applies only to the offline test model, not {spec!r}; leave it out"
            )
        kwargs["fanout"] = fanout
    try:
        built = chat(spec, system_prompt=LEAD_PROMPT, **kwargs)
    except (DeputyError, ValueError, TypeError) as exc:
        raise UsageError(f"{label}: {exc}") from exc
    if isinstance(getattr(built.provider, "missing_api_key", None), str):
        # Found now, not after the run started: its first request would fail.
        variable = getattr(built.provider, "api_key_variable", None) or "its API key"
        raise UsageError(
            f"{label} needs an API key: set {variable} in the environment, or choose "
            "another --model (the offline test model needs none: --model test)"
        )
    return built


def check_agents(directory: str) -> None:
    """Refuse an ``--agents`` path that cannot be read as definitions, before reading
    anything: one that does not exist or holds no definition files (the messages of
    ``validate`` and ``list``), or a file."""
    reason = definitions_path_problem(directory)
    if reason is not None:
        # The path is the --agents default or the user's own: say which flag picks it.
        named = repr(directory)
        if reason.startswith(named):
            reason = reason[len(named) :].lstrip()
        raise UsageError(
            f"--agents {named} {reason}; point --agents at a directory of "
            "definition files, e.g. --agents examples/agents"
        )
    if not Path(directory).is_dir():
        raise UsageError(
            f"--agents {directory!r} is a file; point it at a directory of definition "
            "files (*.yaml, *.yml, *.md), e.g. --agents examples/agents"
        )


class Definitions:
    """The definitions of an ``--agents`` directory, the warnings reading them gave, and
    the Claude Code plugins it holds (when it is a plugin root, a folder of plugins or a
    marketplace)."""

    __slots__ = ("definitions", "plugins", "warnings")

    def __init__(
        self,
        definitions: dict[str, AgentDefinition],
        warnings: Sequence[DefinitionProblem],
        plugins: Sequence[PluginFolder] = (),
    ) -> None:
        self.definitions = definitions
        self.warnings = tuple(warnings)
        self.plugins = tuple(plugins)


def load_definitions(
    directory: str, tools: Mapping[str, Tool], skills: Mapping[str, Skill | str]
) -> Definitions:
    """Read every definition in ``directory`` (all or none, as ``run`` needs them).

    Warnings (a file accepted with caveats) are collected, not issued as Python
    warnings, so the command can print them in its own format.
    """
    check_agents(directory)
    warnings: list[DefinitionProblem] = []
    try:
        found = agent_definitions(
            directory, tools=tools, skills=skills, markdown=True, on_warning=warnings.append
        )
        plugins = find_plugins(Path(directory)) or ()
    except DeputyError as exc:
        raise UsageError(str(exc)) from exc
    return Definitions(found, warnings, plugins)


def print_warnings(warnings: Sequence[DefinitionProblem], stream: TextIO) -> None:
    """One ``file:line: warning: message`` line per definition warning."""
    for problem in warnings:
        print(problem, file=stream)
    stream.flush()


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
    shared_budget: BudgetLedger | None = None,
    hooks: Hooks | None = None,
    human_input: Callable[[Any, Any], Any] | None = None,
) -> LeadAgent:
    """A lead over ``definitions`` with the read-only file tools and the given ceilings
    (``hooks``: the plugins' hooks, which see every subagent's tool calls;
    ``human_input``: how a delegation's ``ask_user`` reaches a person, unless a plugin's
    policy says)."""
    if human_input is not None and (policy is None or policy.human_input is None):
        policy = (
            DelegationPolicy(human_input=human_input)
            if policy is None
            else _rebuilt(policy, policy.resource_modes, human_input)
        )
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
            shared_budget=shared_budget,
            hooks=hooks,
        )
    except (DeputyError, ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from exc


class Plugin:
    """What one plugin contributes: its module, a delegation policy and model aliases."""

    __slots__ = ("aliases", "module", "policy")

    def __init__(
        self, module: ModuleType, policy: DelegationPolicy | None, aliases: dict[str, str]
    ) -> None:
        self.module = module
        self.policy = policy
        self.aliases = aliases


def load_plugin(target: str) -> Plugin:
    """Import a plugin module (dotted name or .py file); read what it contributes.

    A plugin runs before the model is resolved, so it can ``register_provider``. If it
    defines ``delegation_policy`` (a DelegationPolicy, or a function returning one), the
    lead uses it; ``model_aliases`` (a dict) maps definitions' model aliases, with
    ``--model-alias`` options winning. Its ``tools`` and ``skills`` are read by
    :func:`load_plugins`. A plugin that raises is reported with its own frames only
    (file, line, code), not the importer's.
    """
    try:
        module = import_plugin(target)
    except PluginError as exc:
        raise UsageError(str(exc)) from exc
    policy = getattr(module, "delegation_policy", None)
    if policy is not None and not isinstance(policy, DelegationPolicy) and callable(policy):
        try:
            policy = policy()
        except Exception as exc:
            raise UsageError(
                f"--plugin {target!r}: delegation_policy() failed: {plugin_failure(exc)}"
            ) from exc
    if policy is not None and not isinstance(policy, DelegationPolicy):
        raise UsageError(
            f"--plugin {target!r}: delegation_policy must be a DelegationPolicy or a "
            f"function returning one, got {type(policy).__name__}"
        )
    return Plugin(module, policy, _plugin_aliases(target, module))


class Plugins:
    """What all ``--plugin`` modules contribute together.

    ``policy`` is the last plugin's delegation policy; ``aliases`` merges their model
    aliases (later plugins win); ``tools`` is the registry definitions name their tools
    from (the file tools confined to the working directory, the shell tools, then every
    plugin's ``tools``) and ``skills`` merges the plugins' ``skills``, exactly as
    ``validate`` resolves names; ``modules`` are the imported plugins, in order;
    ``shell`` owns the shell tools (the command opens it around the run, so background
    commands end with it).
    """

    __slots__ = ("aliases", "modules", "policy", "shell", "skills", "tools")

    def __init__(
        self,
        policy: DelegationPolicy | None,
        aliases: dict[str, str],
        tools: dict[str, Tool],
        skills: dict[str, Skill | str],
        modules: tuple[ModuleType, ...] = (),
        shell: BashTools | None = None,
    ) -> None:
        self.modules = modules
        self.policy = policy
        self.aliases = aliases
        self.tools = tools
        self.skills = skills
        self.shell = shell


def load_plugins(targets: Sequence[str], working_dir: Path) -> Plugins:
    """Import every plugin once, in order, and build the tool and skill registries."""
    policy: DelegationPolicy | None = None
    aliases: dict[str, str] = {}
    modules: list[ModuleType] = []
    for target in targets:
        loaded = load_plugin(target)
        policy = loaded.policy or policy
        aliases.update(loaded.aliases)
        modules.append(loaded.module)
    try:
        shell = host_shell(working_dir)
        tools = host_tool_registry(modules, working_dir, shell)
        skills = host_skill_registry(modules)
    except PluginError as exc:
        raise UsageError(str(exc)) from exc
    return Plugins(policy, aliases, tools, skills, tuple(modules), shell)


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


#: The lifecycles ``--mcp-mode NAME=MODE`` accepts (default ``shared``).
MCP_MODE_NAMES = ("owned", "shared", "exclusive")


def load_mcp_servers(config: str | None, cwd: Path) -> dict[str, Any]:
    """The MCP servers of ``--mcp-config FILE``, else of ``.mcp.json`` in ``cwd`` if any.

    Returns:
        Each server's name mapped to its configuration (empty without a file).
    """
    try:
        return read_mcp_servers(config, cwd)
    except McpSetupError as exc:
        raise UsageError(str(exc)) from exc


def mcp_mode_options(values: Sequence[str], servers: Mapping[str, Any]) -> dict[str, str]:
    """``--mcp-mode NAME=MODE`` options as a map; NAME must be a configured server."""
    modes: dict[str, str] = {}
    for value in values:
        name, equals, mode = (part.strip() for part in value.partition("="))
        if not equals or not name or mode not in MCP_MODE_NAMES:
            raise UsageError(
                f"--mcp-mode {value!r}: expected NAME=MODE with MODE one of "
                f"{', '.join(MCP_MODE_NAMES)}, e.g. --mcp-mode files=owned"
            )
        if name not in servers:
            known = ", ".join(servers) or "none (no .mcp.json found)"
            raise UsageError(
                f"--mcp-mode {value!r}: no MCP server named {name!r}; configured: {known}"
            )
        modes[name] = mode
    return modes


def attach_mcp_servers(
    policy: DelegationPolicy | None,
    servers: Mapping[str, Any],
    modes: Mapping[str, str],
    *,
    lease_backend: LeaseBackend | None = None,
) -> DelegationPolicy | None:
    """``policy`` with every configured server attached (``McpResource``) in its mode.

    A server the plugin's policy already attaches keeps the plugin's mode; naming it in
    ``--mcp-mode`` too is refused. Exclusive servers keep their leases in
    ``lease_backend`` (``--redis``) when given. The lead must be opened
    (``async with lead:``) for the servers to run.
    """
    if not servers:
        return policy
    from .. import mcp  # the SDK is an extra: imported only when servers are configured

    base = policy if policy is not None else DelegationPolicy()
    kept = tuple(m for m in base.resource_modes if not isinstance(m, SharedResources))
    attached = {getattr(m, "mcp_server", None) for m in kept}
    for name in modes:
        if name in attached:
            raise UsageError(
                f"--mcp-mode {name}=...: the plugin's delegation_policy already attaches "
                f"MCP server {name!r} with its own mode; drop the option"
            )
    added = tuple(
        _mcp_resource(mcp, name, config, modes.get(name, "shared"), lease_backend)
        for name, config in servers.items()
        if name not in attached
    )
    try:
        return msgspec.structs.replace(
            base,
            resource_mode="shared",
            resource_key=None,
            resources=None,
            lease_backend=None,
            resource_modes=(*kept, *added),
        )
    except DeputyError as exc:
        raise UsageError(str(exc)) from exc


def _mcp_resource(
    mcp: Any, name: str, config: Any, mode: str, lease_backend: LeaseBackend | None
) -> Any:
    server = mcp.McpServer(name, config)
    if mode == "exclusive" and lease_backend is not None:
        return mcp.McpResource(server, mode=mode, backend=lease_backend)
    return mcp.McpResource(server, mode=mode)


class RedisSetup:
    """``--redis``: the lease backend and shared budget, opened inside the event loop.

    The command opens them (:meth:`opened`) around the run or the server and closes them
    after it; the leads only use them. With ``--shared-budget`` both live on one
    connection, so an exclusive delegation takes its lease and reservation in one round
    trip and gives both back in one.
    """

    __slots__ = ("_opener", "budget", "leases", "url")

    def __init__(self, url: str, budget_name: str | None, namespace: str):
        try:
            from ..redis import RedisCoordinator, RedisLeases
        except ImportError as exc:
            raise UsageError(f"--redis: {exc}") from None
        self.url = url
        try:
            if budget_name is None:
                leases = RedisLeases(url, namespace=namespace)
                self.leases: LeaseBackend = leases
                self.budget: BudgetLedger | None = None
                self._opener: Any = leases
            else:
                # The budget's size is its own (``deputy-runtime budget create``): a run
                # draws from it as it is, and a budget that does not exist is refused.
                coordinator = RedisCoordinator(
                    url, budget_name=budget_name, limits=None, namespace=namespace
                )
                self.leases = coordinator.leases
                self.budget = coordinator.budget
                self._opener = coordinator
        except ValueError as exc:
            text = str(exc)
            if text.startswith("namespace"):
                option = "--redis-namespace"
            elif text.startswith("name"):
                option = "--shared-budget"
            else:
                option = "--redis"
            raise UsageError(f"{option}: {text}") from None

    @asynccontextmanager
    async def opened(self) -> AsyncIterator[None]:
        """Open the connection (and the budget) for the block; close it after.

        Raises:
            UsageError: Redis cannot be reached or refuses the budget (one line).
        """
        from ..errors import BudgetLedgerError, CoordinationError

        async with AsyncExitStack() as stack:
            try:
                await stack.enter_async_context(self._opener)
            except BudgetLedgerError as exc:
                raise UsageError(f"--shared-budget: {_budget_problem(exc, self.url)}") from None
            except CoordinationError as exc:
                first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise UsageError(f"--redis: {first}") from None
            yield


def _budget_problem(exc: Exception, url: str) -> str:
    """The ledger's refusal with the ``--redis`` URL filled into its create hint."""
    return str(exc).replace("--redis URL", f"--redis {url}")


def redis_setup(
    url: str | None, budget_name: str | None, namespace: str | None
) -> RedisSetup | None:
    """The ``--redis``/``--shared-budget``/``--redis-namespace`` options, checked.

    The shared budget must exist (``deputy-runtime budget create``) and keeps its own
    limits, whatever each run's ``--max-requests`` is.
    """
    if url is None:
        if budget_name is not None:
            raise UsageError("--shared-budget needs --redis URL (where the budget is kept)")
        if namespace is not None:
            raise UsageError("--redis-namespace needs --redis URL")
        return None
    return RedisSetup(url, budget_name, namespace or "deputy")


def with_lease_backend(
    policy: DelegationPolicy | None, backend: LeaseBackend
) -> DelegationPolicy | None:
    """``policy`` with every exclusive resource's leases kept in ``backend``."""
    if policy is None:
        return None
    modes: list[ResourceMode] = []
    for mode in policy.resource_modes:
        if isinstance(mode, ExclusiveResource):
            mode = ExclusiveResource(mode.key, wait=mode.wait, backend=backend)
        modes.append(mode)
    return _rebuilt(policy, tuple(modes), policy.human_input)


def _rebuilt(
    policy: DelegationPolicy,
    modes: tuple[ResourceMode, ...],
    human_input: Callable[[Any, Any], Any] | None,
) -> DelegationPolicy:
    """``policy`` with these resource modes and human input (a policy's modes already
    hold any lease backend, so it is built from them, not from ``resource_mode``)."""
    return DelegationPolicy(
        resource_modes=modes,
        human_input=human_input,
        observers=policy.observers,
        chat=policy.chat,
        max_seconds=policy.max_seconds,
        max_delegations=policy.max_delegations,
    )
