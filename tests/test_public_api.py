"""The public API is deliberate: every public module's ``__all__`` is pinned here.

A name added to or removed from an ``__all__`` fails this test until the list below is
updated in the same change, so the public surface only changes on purpose. A package's
``__init__`` may also make a few building blocks importable for the package's own use
(listed in ``INTERNAL``); anything else public in its namespace is an accident. Every
exported name has a docstring, so the generated API reference has no blank entries.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUNTIME_DIR = ROOT / "deputy_runtime" / "runtime"

EXPECTED_ALL = {
    "deputy_runtime": [
        "Agent",
        "AgentDefinition",
        "AgentResult",
        "AgentUsage",
        "AnthropicProvider",
        "AuthenticationError",
        "BadRequestError",
        "BudgetExceeded",
        "BudgetLedger",
        "BudgetLedgerError",
        "Chat",
        "CheckpointError",
        "CheckpointStore",
        "CommandHookError",
        "Compaction",
        "CompactionEnd",
        "CompactionStart",
        "ContextWindowExceeded",
        "CoordinationError",
        "CoordinationUnavailableError",
        "DELEGATE_TOOL_NAME",
        "DefinitionError",
        "DefinitionFileError",
        "DelegationBindingError",
        "DelegationContext",
        "DelegationEnd",
        "DelegationPolicy",
        "DelegationResources",
        "DelegationStart",
        "DelegationStatus",
        "DeputyError",
        "Event",
        "EventLogWriter",
        "ExclusiveResource",
        "FileCheckpointStore",
        "FileToolLimits",
        "HTTPProvider",
        "HookDecision",
        "HookEvent",
        "HookInput",
        "HookMatcher",
        "Hooks",
        "HumanInputUnavailable",
        "InProcessLeases",
        "InProcessLedger",
        "InvalidUsageError",
        "LeadAgent",
        "Lease",
        "LeaseBackend",
        "MODE_TRANSITIONS",
        "McpCallTimeoutError",
        "McpConfigError",
        "McpError",
        "McpLogEvent",
        "McpProgressEvent",
        "McpSamplingEvent",
        "McpServerEvent",
        "McpServerGoneError",
        "McpStartError",
        "McpToolError",
        "ModelRequestEvent",
        "ModelResponseEvent",
        "OllamaProvider",
        "OpenAICompatibleProvider",
        "OpenAIProvider",
        "OwnedResources",
        "ParallelResult",
        "PermissionAllow",
        "PermissionCeilingError",
        "PermissionDeny",
        "PermissionEvent",
        "PermissionMode",
        "PermissionModeWideningError",
        "Permissions",
        "PermissionsError",
        "Provider",
        "ProviderError",
        "ProviderTimeoutError",
        "QuestionEvent",
        "RateLimitError",
        "RequestLimitExceeded",
        "ResourceBusyError",
        "ResourceMode",
        "ResponseLimits",
        "ResponseTooLargeError",
        "RetryPolicy",
        "RunActiveError",
        "RunStart",
        "STOP_REASONS",
        "SamplingError",
        "SandboxUnavailableError",
        "ScriptError",
        "ScriptedProvider",
        "SharedResources",
        "Skill",
        "SkillError",
        "StopEvent",
        "StopReason",
        "SubagentRecord",
        "TestProvider",
        "TextDelta",
        "Tool",
        "ToolArgumentError",
        "ToolDefinitionError",
        "ToolEnd",
        "ToolLoopLimitError",
        "ToolStart",
        "UnknownProviderError",
        "UsageEvent",
        "UsageLimitExceeded",
        "UsageLimits",
        "UsageNode",
        "UsageValueError",
        "WarningEvent",
        "agent_definition",
        "agent_definition_from_markdown",
        "agent_definition_read",
        "agent_definition_to_markdown",
        "agent_definition_write",
        "agent_definitions",
        "ask_user",
        "ask_user_tool",
        "chat",
        "claude_agent_definitions",
        "decode_event",
        "delegation_status",
        "encode_event",
        "register_provider",
        "skill_load",
        "tool",
        "tools_file",
        "usage_tree",
    ],
    "deputy_runtime.chat": [
        "ALIASES_CHECKED",
        "AnthropicProvider",
        "AssistantTurn",
        "CANCELLED_TOOL_CALL_ERROR",
        "CLAUDE_CODE_ALIASES",
        "CONTEXT_WINDOWS",
        "CONTEXT_WINDOWS_CHECKED",
        "Chat",
        "Content",
        "ContentText",
        "ContentThinking",
        "ContentToolRequest",
        "ContentToolResult",
        "DEFAULT_MAX_TOOL_ROUNDS",
        "DEFAULT_SCRIPTED_USAGE",
        "DEFAULT_TEST_USAGE",
        "HTTPProvider",
        "ModelChoice",
        "ModelRequest",
        "ModelSource",
        "OllamaProvider",
        "OpenAICompatibleProvider",
        "OpenAIProvider",
        "Provider",
        "ProviderFactory",
        "ResponseLimits",
        "RetryPolicy",
        "Role",
        "ScriptedProvider",
        "StreamDelta",
        "TestProvider",
        "ToolLoopLimitError",
        "ToolSpec",
        "Turn",
        "UnknownProviderError",
        "Usage",
        "agent_name_scope",
        "chat",
        "context_window",
        "current_agent_name",
        "current_request_headers",
        "decode_turns",
        "encode_turns",
        "estimate_tokens",
        "example_arguments",
        "is_model_alias",
        "is_provider_name",
        "model_alias_map",
        "parse_model_spec",
        "provider_names",
        "register_provider",
        "reply",
        "request_headers_scope",
        "resolve_model",
        "resolve_provider",
        "stream_request",
        "suggest_model_spec",
        "tool_call",
        "tool_calls",
        "unregister_provider",
    ],
    "deputy_runtime.definitions": [
        "AGENT_DEFINITION_SCHEMA",
        "AgentDefinition",
        "DefinitionCollection",
        "DefinitionProblem",
        "DefinitionWarning",
        "McpToolName",
        "PluginFolder",
        "Severity",
        "ValidationReport",
        "agent_definition",
        "agent_definition_from_markdown",
        "agent_definition_read",
        "agent_definition_schema",
        "agent_definition_to_markdown",
        "agent_definition_write",
        "agent_definitions",
        "claude_agent_definitions",
        "collect_agent_definitions",
        "find_plugins",
        "missing_mcp_server_message",
        "split_tool_names",
        "validate_definitions",
    ],
    "deputy_runtime.errors": [
        "AuthenticationError",
        "BadRequestError",
        "BudgetExceeded",
        "BudgetLedgerError",
        "CheckpointError",
        "CommandHookError",
        "ContextWindowExceeded",
        "CoordinationError",
        "CoordinationUnavailableError",
        "DefinitionError",
        "DefinitionFileError",
        "DelegationBindingError",
        "DeputyError",
        "HumanInputUnavailable",
        "InvalidUsageError",
        "McpCallTimeoutError",
        "McpConfigError",
        "McpError",
        "McpServerGoneError",
        "McpStartError",
        "McpToolError",
        "PermissionCeilingError",
        "PermissionModeWideningError",
        "PermissionsError",
        "ProviderError",
        "ProviderTimeoutError",
        "RateLimitError",
        "RequestLimitExceeded",
        "ResourceBusyError",
        "ResponseTooLargeError",
        "RunActiveError",
        "SamplingError",
        "SandboxUnavailableError",
        "ScriptError",
        "SkillError",
        "ToolArgumentError",
        "ToolDefinitionError",
        "ToolLoopLimitError",
        "UnknownProviderError",
        "UsageLimitExceeded",
        "UsageValueError",
    ],
    "deputy_runtime.runtime": [
        "Agent",
        "AgentResult",
        "AgentUsage",
        "BindRequest",
        "BudgetLedger",
        "CHECKPOINT_VERSION",
        "CallerRun",
        "Checkpoint",
        "CheckpointStore",
        "Compaction",
        "CompactionEnd",
        "CompactionJob",
        "CompactionStart",
        "CompactionStrategy",
        "DELEGATE_TOOL_NAME",
        "DelegationContext",
        "DelegationCoordinator",
        "DelegationEnd",
        "DelegationPolicy",
        "DelegationResources",
        "DelegationStart",
        "DelegationStatus",
        "DropToolResults",
        "Event",
        "EventLogWriter",
        "ExclusiveResource",
        "FileCheckpointStore",
        "HookDecision",
        "HookEvent",
        "HookInput",
        "HookMatcher",
        "Hooks",
        "IN_PROCESS_LEASES",
        "InProcessLeases",
        "InProcessLedger",
        "LeadAgent",
        "Lease",
        "LeaseBackend",
        "LeaseLedger",
        "MODE_TRANSITIONS",
        "McpLogEvent",
        "McpProgressEvent",
        "McpSamplingEvent",
        "McpServerEvent",
        "ModelRequestEvent",
        "ModelResponseEvent",
        "OwnedResources",
        "PERMISSION_MODES",
        "ParallelResult",
        "PermissionAllow",
        "PermissionDeny",
        "PermissionEvent",
        "PermissionMode",
        "Permissions",
        "QuestionEvent",
        "ResourceMode",
        "RunStart",
        "STOP_REASONS",
        "SharedResources",
        "StopEvent",
        "StopReason",
        "SubagentRecord",
        "SummarizeOldest",
        "TextDelta",
        "ToolEnd",
        "ToolStart",
        "UsageEvent",
        "UsageLimits",
        "UsageNode",
        "WarningEvent",
        "current_caller",
        "decode_checkpoint",
        "decode_event",
        "delegation_status",
        "encode_checkpoint",
        "encode_event",
        "usage_tree",
    ],
    "deputy_runtime.command_hooks": [
        "CommandHook",
        "DEFAULT_HOOK_TIMEOUT",
        "claude_tool_name",
        "command_hooks",
    ],
    "deputy_runtime.skills": [
        "Skill",
        "skill_load",
        "skills_prompt_section",
        "skills_tool",
    ],
    "deputy_runtime.temporal": [
        "ANSWER_UPDATE",
        "AgentSpec",
        "AskedQuestion",
        "DEFAULT_TASK_QUEUE",
        "DelegationLimits",
        "DeputyActivities",
        "DevServer",
        "EVENTS_QUERY",
        "ExclusiveResourceSpec",
        "INTERRUPT_SIGNAL",
        "LEAD_PERMISSIONS_SIGNAL",
        "LeadInput",
        "LeadOutput",
        "LeadWorkflow",
        "LoopCheckpoint",
        "ModelCall",
        "MsgspecPayloadConverter",
        "OwnedResourceFactory",
        "OwnedResourceRecord",
        "OwnedResourceSpec",
        "PENDING_QUESTIONS_QUERY",
        "ParallelDelegateWorkflow",
        "ParallelInput",
        "ParallelOutput",
        "PendingQuestion",
        "PermissionSpec",
        "SET_PERMISSION_MODE_UPDATE",
        "SubagentInput",
        "SubagentOutput",
        "SubagentWorkflow",
        "TemporalBridge",
        "TemporalUnavailableError",
        "ToolCall",
        "agent_spec",
        "answer_question",
        "child_permissions",
        "current_delegation",
        "data_converter",
        "deputy_worker",
        "follow_run",
        "free_port",
        "lead_input",
        "parallel_delegate",
        "parallel_result",
        "pending_questions",
        "permission_spec",
        "raise_on_exceed",
        "run_in_asyncio_thread",
        "start_lead",
        "temporal_cli_path",
        "workflow_runner",
    ],
    "deputy_runtime.tools": [
        "BashLimits",
        "BashRules",
        "BashSandbox",
        "BashTools",
        "FileToolLimits",
        "SearchBackend",
        "SearchResult",
        "Tool",
        "WebLimits",
        "WebRules",
        "ask_user",
        "ask_user_tool",
        "invoke_tool",
        "schema_validator",
        "tool",
        "tools_bash",
        "tools_file",
        "tools_file_extra",
        "tools_web",
    ],
    "deputy_runtime.mcp": [
        "MCP_MODES",
        "McpCaller",
        "McpConfig",
        "McpEvent",
        "McpEventSink",
        "McpHttp",
        "McpLimits",
        "McpLogLevel",
        "McpLogMessage",
        "McpOAuth",
        "McpProgress",
        "McpPrompt",
        "McpPromptArgument",
        "McpResource",
        "McpServer",
        "McpServerPool",
        "McpServerStarted",
        "McpServerStopped",
        "McpSession",
        "McpStderrLine",
        "McpStdio",
        "McpStopKind",
        "McpToolCall",
        "McpToolUnavailable",
        "McpToolsChanged",
        "SessionState",
        "expand_mcp_names",
        "load_mcp_config",
        "mcp_tool_names",
        "parse_mcp_config",
    ],
    "deputy_runtime.redis": [
        "Amounts",
        "BudgetLedgerError",
        "CoordinationError",
        "CoordinationUnavailableError",
        "Lease",
        "LeaseLike",
        "LedgerState",
        "LostReason",
        "RedisBudget",
        "RedisCheckpointStore",
        "RedisConnection",
        "RedisCoordinator",
        "RedisLeases",
    ],
    "deputy_runtime.service": [
        "RunRequest",
        "RunStatus",
        "ServiceConfig",
    ],
    "deputy_runtime.tracing": [
        "configure",
        "continue_trace",
        "disable",
        "extract_traceparent",
        "inject_traceparent",
        "is_enabled",
    ],
}

#: Names a package's __init__ imports for the package's own use: importable, not public.
INTERNAL = {
    "deputy_runtime": [],
    "deputy_runtime.chat": [
        "UsageCounts",
        "WindowMeter",
        "add_costs",
        "complete_streaming",
        "plain_value",
        "reset_current_agent",
        "running_async_library",
        "set_current_agent",
        "tool_error_text",
        "turns_tokens",
        "user_turn_after",
        "window_value",
    ],
    "deputy_runtime.definitions": [
        "CLAUDE_CODE_TOOLS",
        "FORMAT_BY_SUFFIX",
        "MAX_BODY_LINES",
        "MAX_DESCRIPTION_LENGTH",
        "REGISTRY_KEY_PATTERN",
        "ParsedMarkdown",
        "ProblemLog",
        "YAMLProblem",
        "build_definition",
        "candidate_names",
        "definition_format",
        "definition_from_yaml",
        "install_atomically",
        "load_yaml",
        "markdown_text",
        "parse_markdown",
        "parse_mcp_name",
        "read_definition_text",
        "surrounding_whitespace",
        "whitespace_losses",
    ],
    "deputy_runtime.runtime": [
        "ALWAYS_FORWARDED",
        "ASK_USER_TOOL_NAME",
        "BLANK_TASK_TEXT",
        "Brief",
        "CUT_OFF_TEXT",
        "DELEGATE_DESCRIPTION",
        "INTERRUPTED_TEXT",
        "LIMIT_STOP_REASONS",
        "Meter",
        "NOT_RUN_TEXT",
        "OutputContract",
        "Reservation",
        "TOOL_CALL_LIMIT_TEXT",
        "batch_limits",
        "batch_reason",
        "chat_reply",
        "chat_span",
        "check_batch",
        "check_run_id",
        "cost_unknown_text",
        "delegate_parameters",
        "delegate_placeholder",
        "delegation_cap_text",
        "exhausted",
        "fair_share",
        "fanout_blocker",
        "first_message",
        "hook_refusal",
        "hook_warning",
        "invalid_arguments_text",
        "judge",
        "normalize_tool_name",
        "permission_denied_text",
        "raise_for_limit",
        "record_outcome",
        "refill_field",
        "reserve_share",
        "responder_requests",
        "routing_section",
        "run_limit_text",
        "shortfall_text",
        "tool_span",
        "unknown_agent_text",
        "with_output_section",
    ],
    "deputy_runtime.tools": [
        "TOOL_NAME_PATTERN",
        "inline_refs",
        "struct_validator",
        "tool_validator",
    ],
}

#: Names every module may have without exporting them.
MACHINERY = {"TYPE_CHECKING", "annotations"}


@pytest.mark.parametrize("module_name", sorted(EXPECTED_ALL))
def test_all_is_pinned(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert sorted(module.__all__) == EXPECTED_ALL[module_name]
    assert len(set(module.__all__)) == len(module.__all__), "a name is listed twice"


@pytest.mark.parametrize("module_name", sorted(EXPECTED_ALL))
def test_every_exported_name_exists(module_name: str) -> None:
    module = importlib.import_module(module_name)
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert not missing


@pytest.mark.parametrize("module_name", sorted(INTERNAL))
def test_a_package_exposes_nothing_else(module_name: str) -> None:
    module = importlib.import_module(module_name)
    public = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name not in MACHINERY
    }
    assert sorted(public - set(module.__all__)) == sorted(INTERNAL[module_name])


def test_top_level_reexports_are_the_same_objects() -> None:
    import deputy_runtime

    for module_name in EXPECTED_ALL:
        module = importlib.import_module(module_name)
        for name in set(module.__all__) & set(deputy_runtime.__all__):
            assert getattr(module, name) is getattr(deputy_runtime, name), (module_name, name)


def test_every_event_and_error_class_is_exported_at_the_top_level() -> None:
    import deputy_runtime
    from deputy_runtime import errors, runtime

    events = {
        name
        for name in runtime.__all__
        if inspect.isclass(getattr(runtime, name))
        and getattr(runtime, name).__module__.endswith("._events")
        and name not in {"EventLogWriter"}
    }
    assert {"RunStart", "StopEvent", "DelegationStart", "ToolStart"} <= events
    assert events <= set(deputy_runtime.__all__)
    assert set(errors.__all__) <= set(deputy_runtime.__all__)
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.DeputyError), name


def test_importing_the_package_does_not_import_httpx() -> None:
    """The HTTP providers load on first access, so the CLI's offline commands stay light."""
    code = (
        "import sys, deputy_runtime, deputy_runtime.chat\n"
        "assert 'httpx' not in sys.modules, 'httpx imported eagerly'\n"
        "from deputy_runtime import OpenAIProvider, RetryPolicy\n"
        "from deputy_runtime.chat import AnthropicProvider\n"
        "assert 'httpx' in sys.modules\n"
        "assert deputy_runtime.OpenAIProvider is OpenAIProvider\n"
        "print(OpenAIProvider.__name__, RetryPolicy.__name__, AnthropicProvider.__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["OpenAIProvider", "RetryPolicy", "AnthropicProvider"]


def test_an_unknown_attribute_is_still_an_attribute_error() -> None:
    import deputy_runtime
    import deputy_runtime.chat as chat_package  # noqa: F401 - the subpackage, via sys.modules

    with pytest.raises(AttributeError, match="no attribute 'NoSuchProvider'"):
        _ = deputy_runtime.NoSuchProvider  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="no attribute 'NoSuchProvider'"):
        _ = sys.modules["deputy_runtime.chat"].NoSuchProvider


# -- docstrings ---------------------------------------------------------------------------


def _source_of(module_name: str) -> Path:
    spec = importlib.util.find_spec(module_name)
    assert spec is not None
    assert spec.origin is not None
    return Path(spec.origin)


def _resolve(module_name: str, base: str, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    package = base if _source_of(module_name).name == "__init__.py" else base.rpartition(".")[0]
    parts = package.split(".")
    if node.level > 1:
        parts = parts[: -(node.level - 1)]
    return ".".join([*parts, node.module] if node.module else parts)


def _data_definition(module_name: str, name: str) -> tuple[Path, bool]:
    """Where the data name ``name`` is assigned, and whether it is documented there.

    Documented means a ``#:`` comment on the line(s) just above the assignment or a string
    literal just below it (the two forms documentation tools read).
    """
    path = _source_of(module_name)
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    lines = text.splitlines()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    target = _resolve(module_name, module_name, node)
                    return _data_definition(target, alias.name)
    for index, node in enumerate(tree.body):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if not any(isinstance(t, ast.Name) and t.id == name for t in targets):
            continue
        above = lines[node.lineno - 2].strip() if node.lineno >= 2 else ""
        following = tree.body[index + 1] if index + 1 < len(tree.body) else None
        below = (
            isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        )
        return path, above.startswith("#:") or below
    raise AssertionError(f"{module_name}.{name}: no assignment found")


def _documented(module_name: str, name: str) -> tuple[Path, bool]:
    value = getattr(importlib.import_module(module_name), name)
    if inspect.isclass(value) or inspect.isroutine(value):
        doc = vars(value).get("__doc__") if inspect.isclass(value) else value.__doc__
        origin = inspect.getsourcefile(value) or ""
        return Path(origin), bool(doc and doc.strip())
    return _data_definition(module_name, name)


def _undocumented(in_runtime: bool) -> list[str]:
    found = []
    for module_name, names in EXPECTED_ALL.items():
        for name in names:
            path, ok = _documented(module_name, name)
            if not ok and path.is_relative_to(RUNTIME_DIR) == in_runtime:
                found.append(f"{module_name}.{name} (defined in {path.relative_to(ROOT)})")
    return sorted(set(found))


def test_every_exported_name_has_a_docstring() -> None:
    missing = _undocumented(in_runtime=False)
    assert not missing, "no docstring:\n" + "\n".join(missing)


def test_every_exported_runtime_name_has_a_docstring() -> None:
    missing = _undocumented(in_runtime=True)
    assert not missing, "no docstring:\n" + "\n".join(missing)


def _google_sections_missing(function: object) -> list[str]:
    """What a public function's docstring lacks for a generated reference."""
    function = inspect.unwrap(function)  # type: ignore[arg-type]
    doc = inspect.getdoc(function) or ""
    missing = []
    signature = inspect.signature(function)  # type: ignore[arg-type]
    section: list[str] = []
    if "\nArgs:\n" in doc:
        for line in doc.split("\nArgs:\n", 1)[1].splitlines():
            if line and not line[0].isspace():
                break  # the next section
            section.append(line)
    documented = {
        line.strip().split(":", 1)[0]
        for line in textwrap.dedent("\n".join(section)).splitlines()
        if line and not line[0].isspace() and ":" in line
    }
    for parameter in signature.parameters.values():
        prefix = {"VAR_POSITIONAL": "*", "VAR_KEYWORD": "**"}.get(parameter.kind.name, "")
        if f"{prefix}{parameter.name}" not in documented:
            missing.append(f"Args: {prefix}{parameter.name}")
    returns = signature.return_annotation not in (None, "None", inspect.Signature.empty)
    if returns and "Returns:" not in doc:
        missing.append("Returns:")
    return missing


def test_public_functions_document_args_and_returns() -> None:
    """Google-style ``Args:`` (every parameter) and ``Returns:`` sections on every public
    function outside the runtime, so the API reference lists each parameter."""
    problems = []
    for module_name, names in EXPECTED_ALL.items():
        module = importlib.import_module(module_name)
        for name in names:
            value = getattr(module, name)
            if not inspect.isfunction(value):
                continue
            source = Path(inspect.getsourcefile(inspect.unwrap(value)) or "")
            if source.is_relative_to(RUNTIME_DIR):
                continue
            missing = _google_sections_missing(value)
            if missing:
                problems.append(f"{module_name}.{name}: {', '.join(missing)}")
    assert not problems, "\n".join(sorted(set(problems)))


def test_the_section_check_reads_google_style() -> None:
    def documented(path: str, *names: str, strict: bool = False, **extra: object) -> int:
        """Count things.

        Args:
            path: Where.
            *names: Which.
            strict: How.
                Continued on a second line.
            **extra: Anything else.

        Returns:
            The count.
        """
        return 0

    def bare(path: str, strict: bool = False) -> int:
        """Count things at ``path``; ``strict`` is mentioned but not in an Args section."""
        return 0

    assert _google_sections_missing(documented) == []
    assert _google_sections_missing(bare) == ["Args: path", "Args: strict", "Returns:"]


def test_public_methods_document_args_and_returns() -> None:
    """The same for the methods of every public class outside the runtime."""
    problems, seen = [], set()
    for module_name, names in EXPECTED_ALL.items():
        module = importlib.import_module(module_name)
        for name in names:
            cls = getattr(module, name)
            if not inspect.isclass(cls) or cls in seen:
                continue
            seen.add(cls)
            if Path(inspect.getsourcefile(cls) or "").is_relative_to(RUNTIME_DIR):
                continue
            for attribute, member in vars(cls).items():
                own = getattr(member, "__qualname__", "").startswith(f"{cls.__qualname__}.")
                if attribute.startswith("_") or not inspect.isfunction(member) or not own:
                    continue
                missing = [m for m in _google_sections_missing(member) if m != "Args: self"]
                if missing:
                    problems.append(f"{cls.__module__}.{cls.__qualname__}.{attribute}: {missing}")
    assert not problems, "\n".join(sorted(problems))
