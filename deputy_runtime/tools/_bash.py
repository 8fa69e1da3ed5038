"""A shell tool for agents: Claude Code's ``Bash``, ``BashOutput`` and ``KillShell``.

:class:`BashTools` owns the three tools and every process they start. Rules, in order:

* **Permission rules.** Every command line is checked against the host's
  :class:`BashRules` (Claude Code's ``Bash(git log:*)`` allow and deny rules, matched part
  by part on the parsed command) before anything runs; a refused line never starts.
* **Sandbox.** By default each command runs under bubblewrap: the whole file system
  read-only, the working directory the only writable place, a private ``/tmp``, its own
  PID namespace (every process of the command dies with it) and no network unless the
  host allows it. Where ``bwrap`` is missing the tool refuses with a message saying how
  to install it; running without a sandbox is the host's explicit choice
  (``sandbox=BashSandbox.NONE``), never a fallback.
* **Bounded.** A command has a time limit (the call's ``timeout``, at most the limits'
  ``max_timeout``); its stdout and stderr are each kept up to ``output_bytes`` (the rest
  is drained and counted, so an endless writer cannot fill memory). On the time limit,
  on cancellation and when the owner closes, the command's whole process group is
  killed and waited for, shielded, so no process outlives its call or its owner. The
  processes a command may have at once are bounded too (``BashLimits.processes``, a pids
  cgroup of its own: a fork bomb fails to fork instead of filling the machine).
* **A small environment.** Commands see ``PATH``, ``HOME`` (the working directory),
  ``LANG`` and ``TERM=dumb`` plus what the host passes in ``env``; the host's own
  variables (API keys) are not inherited.
* **Background commands** (``run_in_background``) need the owner open (``async with``):
  their output is collected as it comes (capped like a foreground command's), read with
  ``bash_output`` (what is new since the last read) and stopped with ``kill_shell``;
  leaving the owner kills every one still running.
"""

from __future__ import annotations

import contextlib
import enum
import math
import os
import shutil
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
import msgspec

from ..errors import SandboxUnavailableError, ToolArgumentError, ToolDefinitionError
from ._bashrules import BashRules
from ._pidlimit import ProcessBound, process_bound
from ._tool import Tool

__all__ = ["BashLimits", "BashSandbox", "BashTools", "tools_bash"]

_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_MS = 1000.0


class BashSandbox(enum.Enum):
    """How a command is isolated from the host."""

    #: bubblewrap: read-only root, writable working directory, own PID namespace.
    BWRAP = "bwrap"
    #: No isolation: the command runs as the host's user in the working directory.
    NONE = "none"


class BashLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Bounds on the shell tool's commands.

    Attributes:
        timeout: Seconds a command may run when the call gives no ``timeout``.
        max_timeout: The most seconds a call may ask for.
        output_bytes: Bytes kept of each of stdout and stderr (the rest is counted).
        background: Background commands that may run at once.
        processes: Processes (threads included) one command may have at once, counted
            in a pids cgroup of its own (or by RLIMIT_NPROC where no cgroup can be made
            and the user is not root); a fork past it fails inside the command. ``None``:
            no bound, the host's explicit choice (without it, a host where the bound
            cannot be kept gets a clear refusal instead of an unbounded command).
    """

    timeout: float = 120.0
    max_timeout: float = 600.0
    output_bytes: int = 30_000
    background: int = 8
    processes: int | None = 256

    def __post_init__(self) -> None:
        for name in ("timeout", "max_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"BashLimits.{name} must be a number, got {value!r}")
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"BashLimits.{name} must be finite and > 0, got {value!r}")
        if self.timeout > self.max_timeout:
            raise ValueError(
                f"BashLimits.timeout ({self.timeout}) must not exceed max_timeout "
                f"({self.max_timeout})"
            )
        for name in ("output_bytes", "background"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"BashLimits.{name} must be an int >= 1, got {value!r}")
        processes = self.processes
        if processes is not None and (
            isinstance(processes, bool) or not isinstance(processes, int) or processes < 8
        ):
            # Below a handful even the sandbox's own processes (bwrap, bash) cannot start.
            raise ValueError(f"BashLimits.processes must be an int >= 8 or None, got {processes!r}")


class _Capture:
    """One stream's kept bytes (up to a cap) and how many were dropped."""

    __slots__ = ("cap", "data", "dropped", "read_upto")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = bytearray()
        self.dropped = 0
        self.read_upto = 0  # for bash_output: what was already handed out

    def add(self, chunk: bytes) -> None:
        room = self.cap - len(self.data)
        if room > 0:
            self.data += chunk[:room]
        self.dropped += max(0, len(chunk) - max(room, 0))

    def text(self, start: int = 0) -> str:
        return bytes(self.data[start:]).decode("utf-8", errors="replace")


class _Shell:
    """A background command: its process, its output so far and its end."""

    __slots__ = ("command", "done", "process", "returncode", "stderr", "stdout")

    def __init__(self, command: str, process: anyio.abc.Process, cap: int) -> None:
        self.command = command
        self.process = process
        self.stdout = _Capture(cap)
        self.stderr = _Capture(cap)
        self.done = anyio.Event()
        self.returncode: int | None = None


class BashTools:
    """The ``bash``, ``bash_output`` and ``kill_shell`` tools and the processes they run.

    Use it as an async context manager (``async with tools_bash(...) as shell``) so that
    background commands have an owner and are killed when it closes; foreground
    commands work without that.

    Args:
        working_dir: Where commands run (and the only writable place in the sandbox).
        rules: The Bash permission rules every command line is checked against.
        sandbox: How commands are isolated (default bubblewrap).
        network: Whether sandboxed commands may use the network.
        env: Extra environment variables for the commands.
        limits: Time and output bounds.

    Raises:
        ToolDefinitionError: ``working_dir`` is not a directory.
        TypeError: An argument has the wrong type.
    """

    def __init__(
        self,
        working_dir: str | os.PathLike[str],
        *,
        rules: BashRules | None = None,
        sandbox: BashSandbox = BashSandbox.BWRAP,
        network: bool = False,
        env: Mapping[str, str] | None = None,
        limits: BashLimits | None = None,
    ) -> None:
        root = Path(working_dir).resolve()
        if not root.is_dir():
            raise ToolDefinitionError(
                f"tools_bash: working_dir {str(working_dir)!r} is not a directory"
            )
        if rules is not None and not isinstance(rules, BashRules):
            raise TypeError(f"rules must be a BashRules, got {type(rules).__name__}")
        if not isinstance(sandbox, BashSandbox):
            raise TypeError(f"sandbox must be a BashSandbox, got {sandbox!r}")
        if limits is not None and not isinstance(limits, BashLimits):
            raise TypeError(f"limits must be a BashLimits, got {type(limits).__name__}")
        self.root = root
        self.rules = rules or BashRules()
        self.sandbox = sandbox
        self.network = bool(network)
        self.limits = limits or BashLimits()
        self.env = {
            "PATH": _PATH,
            "HOME": str(root),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            **dict(env or {}),
        }
        self._group: anyio.abc.TaskGroup | None = None
        self._shells: dict[str, _Shell] = {}
        self._count = 0
        self.tools: tuple[Tool, Tool, Tool] = (
            Tool(
                name="bash",
                description=_BASH_DESCRIPTION,
                parameters=_BASH_PARAMETERS,
                function=self.bash,
                destructive=True,
                open_world=self.network,
            ),
            Tool(
                name="bash_output",
                description="Read what a background command wrote since the last read, "
                "and whether it is still running.",
                parameters=_id_parameters("bash_id"),
                function=self.bash_output,
                read_only=True,
            ),
            Tool(
                name="kill_shell",
                description="Stop a background command started with run_in_background.",
                parameters=_id_parameters("shell_id"),
                function=self.kill_shell,
                destructive=True,
            ),
        )

    # -- the owner ---------------------------------------------------------------------------

    async def __aenter__(self) -> BashTools:
        if self._group is not None:
            raise RuntimeError("BashTools is already open")
        group = anyio.create_task_group()
        await group.__aenter__()
        self._group = group
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        group = self._group
        assert group is not None
        try:
            with anyio.CancelScope(shield=True):
                for shell in list(self._shells.values()):
                    await _kill(shell.process)
        finally:
            group.cancel_scope.cancel()
            self._group = None
            await group.__aexit__(None, None, None)
        return None

    # -- the tools ---------------------------------------------------------------------------

    async def bash(
        self,
        command: str,
        timeout: float | None = None,  # noqa: ASYNC109 - Claude Code's argument name
        description: str | None = None,
        run_in_background: bool = False,
    ) -> str:
        """Run ``command`` with bash in the working directory; its output and exit code.

        Args:
            command: The command line.
            timeout: Milliseconds it may run (default and maximum from the limits).
            description: What the command does, in a few words (shown, not run).
            run_in_background: Start it and return its id at once.

        Returns:
            stdout, then stderr, then ``Exit code N`` when it is not 0 (and a line for
            dropped output or a time limit); for a background command its id.

        Raises:
            ToolArgumentError: The permission rules refuse the line, or an argument is bad.
            SandboxUnavailableError: The sandbox is asked for and bubblewrap is missing.
        """
        if not isinstance(command, str) or not command.strip():
            raise ToolArgumentError("command must be a non-empty string")
        seconds = self._seconds(timeout)
        self.rules.check(command)
        argv = self._argv(command)
        if run_in_background:
            return await self._background(command, argv)
        return await self._foreground(argv, seconds)

    def _bound(self) -> ProcessBound | None:
        processes = self.limits.processes
        return None if processes is None else process_bound(processes)

    async def bash_output(self, bash_id: str) -> str:
        """What a background command wrote since the last read, and its state.

        Args:
            bash_id: The id ``bash`` returned for it.

        Returns:
            Its status line, then its new stdout and stderr.

        Raises:
            ToolArgumentError: No background command has that id.
        """
        shell = self._shell(bash_id)
        out = shell.stdout.text(shell.stdout.read_upto)
        err = shell.stderr.text(shell.stderr.read_upto)
        shell.stdout.read_upto = len(shell.stdout.data)
        shell.stderr.read_upto = len(shell.stderr.data)
        code = shell.returncode
        status = "running" if code is None else f"exited with code {code}"
        parts = [f"{bash_id}: {status}"]
        if out:
            parts.append(out.rstrip("\n"))
        if err:
            parts.append("stderr:\n" + err.rstrip("\n"))
        for name, capture in (("stdout", shell.stdout), ("stderr", shell.stderr)):
            if capture.dropped:
                parts.append(f"[{capture.dropped} more bytes of {name} were dropped]")
        return "\n".join(parts)

    async def kill_shell(self, shell_id: str) -> str:
        """Stop a background command (its whole process group).

        Args:
            shell_id: The id ``bash`` returned for it.

        Returns:
            What happened.

        Raises:
            ToolArgumentError: No background command has that id.
        """
        shell = self._shell(shell_id)
        if shell.returncode is not None:
            return f"{shell_id} had already exited with code {shell.returncode}"
        with anyio.CancelScope(shield=True):
            await _kill(shell.process)
            await shell.done.wait()
        return f"{shell_id} was stopped"

    # -- running -----------------------------------------------------------------------------

    def _seconds(self, timeout: float | None) -> float:
        limits = self.limits
        if timeout is None:
            return limits.timeout
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise ToolArgumentError(f"timeout must be a number of milliseconds, got {timeout!r}")
        if not math.isfinite(timeout) or timeout <= 0:
            raise ToolArgumentError(f"timeout must be > 0 milliseconds, got {timeout!r}")
        if timeout / _MS > limits.max_timeout:
            raise ToolArgumentError(
                f"timeout may be at most {limits.max_timeout * _MS:.0f} ms, got {timeout!r}"
            )
        return timeout / _MS

    def _argv(self, command: str) -> list[str]:
        shell = ["/bin/bash", "-c", command]
        if self.sandbox is BashSandbox.NONE:
            return shell
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise SandboxUnavailableError(
                "The bash tool runs commands in a bubblewrap sandbox and 'bwrap' is not "
                "installed (Debian/Ubuntu: apt-get install bubblewrap); a host may run "
                "commands unsandboxed only by choosing sandbox=BashSandbox.NONE."
            )
        root = str(self.root)
        argv = [
            bwrap,
            *("--ro-bind", "/", "/"),
            *("--dev", "/dev"),
            *("--proc", "/proc"),
            *("--tmpfs", "/tmp"),
            *("--bind", root, root),
            *("--chdir", root),
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--die-with-parent",
            "--new-session",
        ]
        if not self.network:
            argv.append("--unshare-net")
        return [*argv, "--", *shell]

    async def _open(self, argv: list[str]) -> anyio.abc.Process:
        # Shielded: the child may already run when the spawn is cancelled, and a process
        # the caller never got could not be killed.
        with anyio.CancelScope(shield=True):
            process = await anyio.open_process(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.root,
                env=self.env,
                start_new_session=True,
            )
        return process

    async def _foreground(self, argv: list[str], seconds: float) -> str:
        cap = self.limits.output_bytes
        out, err = _Capture(cap), _Capture(cap)
        bound = self._bound()
        try:
            process = await self._open(argv if bound is None else bound.wrap(argv))
        except BaseException:
            if bound is not None:
                with anyio.CancelScope(shield=True):
                    await bound.aclose()
            raise
        timed_out = False
        try:
            with anyio.move_on_after(seconds) as scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_drain, process.stdout, out)
                    tg.start_soon(_drain, process.stderr, err)
                    await process.wait()
                    # The command ended: what it left running in its group or its
                    # cgroup (holding the pipes open) goes with it.
                    _kill_group(process.pid)
                    if bound is not None:
                        bound.kill()
            timed_out = scope.cancelled_caught
        finally:
            # On the time limit and on cancellation alike: nothing outlives the call.
            with anyio.CancelScope(shield=True):
                await _kill(process)
                await process.aclose()
                if bound is not None:
                    await bound.aclose()
        return _report(out, err, process.returncode, seconds if timed_out else None)

    async def _background(self, command: str, argv: list[str]) -> str:
        group = self._group
        if group is None:
            raise ToolArgumentError(
                "run_in_background needs the shell tools' owner open (async with "
                "BashTools); run the command in the foreground instead"
            )
        running = sum(1 for s in self._shells.values() if s.returncode is None)
        if running >= self.limits.background:
            raise ToolArgumentError(
                f"{running} background commands are running, the most allowed; stop one "
                "with kill_shell or wait for one to end"
            )
        bound = self._bound()
        try:
            process = await self._open(argv if bound is None else bound.wrap(argv))
        except BaseException:
            if bound is not None:
                with anyio.CancelScope(shield=True):
                    await bound.aclose()
            raise
        self._count += 1
        shell_id = f"bash_{self._count}"
        shell = self._shells[shell_id] = _Shell(command, process, self.limits.output_bytes)
        group.start_soon(self._follow, shell, bound)
        return f"Started in the background with id {shell_id}; read it with bash_output."

    async def _follow(self, shell: _Shell, bound: ProcessBound | None) -> None:
        process = shell.process
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_drain, process.stdout, shell.stdout)
                tg.start_soon(_drain, process.stderr, shell.stderr)
                await process.wait()
                _kill_group(process.pid)
                if bound is not None:
                    bound.kill()
        finally:
            with anyio.CancelScope(shield=True):
                await _kill(process)
                await process.aclose()
                if bound is not None:
                    await bound.aclose()
            shell.returncode = process.returncode
            shell.done.set()

    def _shell(self, shell_id: str) -> _Shell:
        shell = self._shells.get(shell_id) if isinstance(shell_id, str) else None
        if shell is None:
            known = ", ".join(self._shells) or "none"
            raise ToolArgumentError(f"no background command has id {shell_id!r} (known: {known})")
        return shell


def tools_bash(
    working_dir: str | os.PathLike[str],
    *,
    allow: tuple[str, ...] | list[str] = (),
    deny: tuple[str, ...] | list[str] = (),
    sandbox: BashSandbox = BashSandbox.BWRAP,
    network: bool = False,
    env: Mapping[str, str] | None = None,
    limits: BashLimits | None = None,
) -> BashTools:
    """The shell tools for ``working_dir``, with Claude Code's Bash permission rules.

    Args:
        working_dir: Where commands run (and the only writable place in the sandbox).
        allow: Allow rules (``"Bash(git log:*)"``, ``"npm test"``); none: every command
            the deny rules do not refuse.
        deny: Deny rules, checked first.
        sandbox: How commands are isolated (default bubblewrap).
        network: Whether sandboxed commands may use the network.
        env: Extra environment variables for the commands.
        limits: Time and output bounds.

    Returns:
        The owner of the tools (``.tools``: ``bash``, ``bash_output``, ``kill_shell``).

    Raises:
        ToolDefinitionError: A rule is invalid, or ``working_dir`` is not a directory.
    """
    rules = BashRules.parse(allow, deny)
    return BashTools(
        working_dir, rules=rules, sandbox=sandbox, network=network, env=env, limits=limits
    )


async def _drain(stream: anyio.abc.ByteReceiveStream | None, capture: _Capture) -> None:
    if stream is None:
        return
    try:
        async for chunk in stream:
            capture.add(chunk)
    except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
        return


def _kill_group(pgid: int) -> None:
    """SIGKILL every process left in the group (the command started its own session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


async def _kill(process: anyio.abc.Process) -> None:
    """Kill the process group (the command and everything it started) and reap it."""
    if process.returncode is None:
        _kill_group(process.pid)
    await process.wait()


def _report(out: _Capture, err: _Capture, code: int | None, timed_out: float | None) -> str:
    parts = []
    if out.data:
        parts.append(out.text().rstrip("\n"))
    if err.data:
        parts.append(err.text().rstrip("\n"))
    for name, capture in (("stdout", out), ("stderr", err)):
        if capture.dropped:
            parts.append(f"[{capture.dropped} more bytes of {name} were dropped]")
    if timed_out is not None:
        parts.append(f"Command timed out after {timed_out:g} s and was killed.")
    elif code not in (0, None):
        parts.append(f"Exit code {code}")
    return "\n".join(parts) if parts else "(no output)"


def _id_parameters(name: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": "string", "description": "The background command's id."}},
        "required": [name],
        "additionalProperties": False,
    }


_BASH_DESCRIPTION = (
    "Run a bash command line in the working directory and return its output and exit "
    "code. Commands run in a sandbox: only the working directory is writable, /tmp is "
    "private, and the network is off unless the host allowed it. Long-running commands "
    "can run in the background (run_in_background), read with bash_output and stopped "
    "with kill_shell."
)
_BASH_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "The command line to run."},
        "timeout": {
            "type": "number",
            "description": "Milliseconds the command may run (default 120000).",
        },
        "description": {
            "type": "string",
            "description": "What the command does, in five to ten words.",
        },
        "run_in_background": {
            "type": "boolean",
            "description": "Start it and return at once; read it later with bash_output.",
        },
    },
    "required": ["command"],
    "additionalProperties": False,
}
