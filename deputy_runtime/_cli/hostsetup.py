"""The set-up ``run``, ``run --temporal``, ``serve`` and ``worker`` share, written once.

Each of them reads the same things from the command line in the same order: the
``--agents`` directory is checked, the ``--plugin`` modules are imported (providers,
aliases, a delegation policy, tools, skills, hooks), the definitions are read against
the plugins' registries, the plugin folders under ``--agents`` give their hooks, skills
and MCP servers, and (for the commands that run a lead) the model is chosen. Doing it in
one function means a mistake is refused by every command with the same message, and an
option honoured by one is honoured (or refused by name) by the others.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from .._ids import new_id
from ..errors import CheckpointError
from ..runtime import FileCheckpointStore, HookEvent, Hooks, decode_checkpoint
from ..skills import Skill
from .hookplugins import plugin_hooks
from .leadsetup import (
    Definitions,
    Plugins,
    UsageError,
    alias_options,
    check_agents,
    lead_alias,
    load_definitions,
    load_mcp_servers,
    load_plugins,
    mcp_mode_options,
    print_warnings,
    select_model,
)
from .pluginfolders import FolderParts, folder_parts, merge_hooks, merge_servers

__all__ = [
    "CheckpointSetup",
    "HostSetup",
    "ModelChoice",
    "checkpoint_setup",
    "host_setup",
    "model_choice",
    "task_text",
]


class HostSetup:
    """The plugins, definitions and plugin-folder parts of one command's invocation.

    ``hooks`` are the plugin modules' hooks followed by the plugin folders' command hooks
    (``hook_count`` counts their matchers); ``skills`` are the plugin modules' skills and
    the plugin folders' ``skills/*/SKILL.md``, the names definitions resolve against.
    """

    __slots__ = ("cwd", "folders", "hook_count", "hooks", "loaded", "plugins", "skills")

    def __init__(
        self,
        cwd: Path,
        plugins: Plugins,
        loaded: Definitions,
        folders: FolderParts,
        hooks: Hooks,
        hook_count: int,
        skills: dict[str, Skill | str],
    ) -> None:
        self.cwd = cwd
        self.plugins = plugins
        self.loaded = loaded
        self.folders = folders
        self.hooks = hooks
        self.hook_count = hook_count
        self.skills = skills

    def print_warnings(self, stream: TextIO | None = None) -> None:
        """The definition files' and plugin folders' warnings, one line each."""
        out = stream if stream is not None else sys.stderr
        print_warnings(self.loaded.warnings, out)
        for line in self.folders.warnings:
            print(line, file=out)

    def mcp_servers(self, args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, str]]:
        """The MCP servers (``--mcp-config`` or ``./.mcp.json``, plus the plugin folders')
        and each one's resource mode (the folders' defaults, then ``--mcp-mode``)."""
        config = getattr(args, "mcp_config", None)
        servers = merge_servers(
            load_mcp_servers(config, self.cwd),
            self.folders.servers,
            f"--mcp-config {config!r}" if config else str(self.cwd / ".mcp.json"),
        )
        modes = {
            **self.folders.modes,
            **mcp_mode_options(getattr(args, "mcp_mode", None) or (), servers),
        }
        return servers, modes


def host_setup(args: argparse.Namespace, cwd: Path | None = None) -> HostSetup:
    """Check ``--agents``, import ``--plugin``, read the definitions and plugin folders.

    Raises:
        UsageError: Any of them is wrong (the message names the option or the file).
    """
    here = cwd if cwd is not None else Path.cwd()
    check_agents(args.agents)
    plugins = load_plugins(getattr(args, "plugin", None) or (), here)
    loaded = load_definitions(args.agents, plugins.tools, plugins.skills)
    folders = folder_parts(loaded.plugins)
    hooks, hook_count = plugin_hooks(plugins.modules)
    if folders.hooks is not None:
        # A plugin folder's command hooks run after the modules' hooks.
        hooks = merge_hooks(hooks, folders.hooks) or hooks
        hook_count += sum(len(folders.hooks.matchers(event)) for event in HookEvent)
    skills: dict[str, Skill | str] = {**plugins.skills}
    for folder in loaded.plugins:
        skills.update({name: str(path) for name, path in folder.skills.items()})
    return HostSetup(here, plugins, loaded, folders, hooks, hook_count, skills)


class ModelChoice:
    """The lead's model: its spec, the ``Model:`` line announcing it, whether ``--model``
    chose it, and the model aliases (the plugins', then ``--model-alias``)."""

    __slots__ = ("aliases", "announcement", "explicit", "spec")

    def __init__(
        self, spec: str, announcement: str, explicit: bool, aliases: Mapping[str, str]
    ) -> None:
        self.spec = spec
        self.announcement = announcement
        self.explicit = explicit
        self.aliases = dict(aliases)


def model_choice(args: argparse.Namespace, plugins: Plugins) -> ModelChoice:
    """``--model`` (else a configured provider, else the offline model) and the aliases.

    Raises:
        UsageError: A ``--model-alias`` or the model is malformed.
    """
    aliases = {**plugins.aliases, **alias_options(getattr(args, "model_alias", None) or ())}
    spec, announcement = lead_alias(*select_model(args.model, os.environ))
    return ModelChoice(spec, announcement, bool(args.model), aliases)


def task_text(args: argparse.Namespace) -> str:
    """The ``TASK`` argument, refused when blank (``""`` with ``--resume``: the task is
    the saved run's).

    Raises:
        UsageError: It is empty or whitespace, missing, or given with ``--resume``.
    """
    if getattr(args, "resume", None) is not None:
        if args.task is not None:
            raise UsageError(
                "TASK and --resume do not combine: a resumed run continues its saved task"
            )
        return ""
    if args.task is None:
        raise UsageError(
            "TASK is missing: say what the lead should do, e.g. "
            'deputy-runtime run --agents examples/agents "Summarise the README"'
        )
    task = str(args.task)
    if not task.strip():
        raise UsageError(
            "TASK is empty: say what the lead should do, e.g. "
            'deputy-runtime run --agents examples/agents "Summarise the README"'
        )
    return task


class CheckpointSetup:
    """``--checkpoint-dir`` and ``--resume``: where the run is saved, its id, and (with
    ``--resume``) the saved run's task, read and validated before anything is announced."""

    __slots__ = ("key", "resumed", "run_id", "store", "task")

    def __init__(
        self,
        store: FileCheckpointStore,
        run_id: str,
        task: str | None,
        key: bytes | None,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.task = task
        self.resumed = task is not None
        self.key = key

    def announcement(self) -> str:
        """The ``Checkpoint:`` line: the run id and how to continue it."""
        directory = str(self.store.directory)
        verb = "resumed" if self.resumed else "saved"
        return (
            f"Checkpoint: run {self.run_id} {verb} in {directory} (continue it with: "
            f"deputy-runtime run --resume {self.run_id} --checkpoint-dir {directory})"
        )


def checkpoint_setup(args: argparse.Namespace) -> CheckpointSetup | None:
    """The run's checkpoint store and run id, or ``None`` without ``--checkpoint-dir``.

    With ``--resume ID`` the saved run is read and validated here, so a missing, damaged
    or tampered checkpoint is the only thing printed.

    Raises:
        UsageError: ``--resume`` without ``--checkpoint-dir``, either with
            ``--temporal``, a directory that is a file, an invalid run id, a missing key
            file, or a checkpoint that cannot be used (the message says why).
    """
    directory = getattr(args, "checkpoint_dir", None)
    resume = getattr(args, "resume", None)
    key_file = getattr(args, "checkpoint_key_file", None)
    if directory is None:
        if resume is not None:
            raise UsageError(
                "--resume needs --checkpoint-dir DIR: the directory the run was saved in"
            )
        if key_file is not None:
            raise UsageError("--checkpoint-key-file needs --checkpoint-dir DIR")
        return None
    if getattr(args, "temporal", None) is not None:
        raise UsageError(
            "--checkpoint-dir and --temporal do not combine: a durable run survives "
            "restarts in Temporal without checkpoints"
        )
    path = Path(directory)
    if path.exists() and not path.is_dir():
        raise UsageError(f"--checkpoint-dir {directory!r} is not a directory")
    key = _checkpoint_key(key_file) if key_file is not None else None
    store = FileCheckpointStore(path)
    if resume is None:
        return CheckpointSetup(store, new_id("run"), None, key)
    try:
        file = store.path(resume)
    except ValueError as exc:
        raise UsageError(f"--resume: {exc}") from None
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        raise UsageError(
            f"--resume {resume}: no checkpoint of that run in {directory!r} (a run that "
            "completed or reached a limit leaves none)"
        ) from None
    except OSError as exc:
        raise UsageError(f"--resume {resume}: cannot read {str(file)!r}: {exc}") from None
    try:
        checkpoint = decode_checkpoint(data, resume, key)
    except CheckpointError as exc:
        raise UsageError(f"--resume {resume}: {exc}") from None
    return CheckpointSetup(store, resume, checkpoint.task, key)


def _checkpoint_key(key_file: str) -> bytes:
    try:
        key = Path(key_file).read_bytes().strip()
    except OSError as exc:
        raise UsageError(f"--checkpoint-key-file {key_file!r}: cannot read it: {exc}") from None
    if len(key) < 16:
        raise UsageError(
            f"--checkpoint-key-file {key_file!r}: the key must be at least 16 bytes, "
            f"it has {len(key)}"
        )
    return key
