"""A bound on how many processes one shell command may have at once.

Two mechanisms, the first that works here:

* **A pids cgroup per command** (Linux cgroup v1 ``pids`` hierarchy, or cgroup v2 where
  the pids controller is delegated to this process's cgroup): a fresh cgroup with
  ``pids.max`` set; the command joins it before it runs, so every process it ever starts
  is counted, whatever user it runs as (root included) and whether or not it leaves its
  process group. When the command ends, whatever is still in the cgroup is killed and
  the cgroup removed.
* **RLIMIT_NPROC** for a user other than root: the limit is set to the processes the
  user already has plus the bound, so the command can add at most that many. Root is not
  held by it (the kernel exempts it), which is why the cgroup comes first.

Where neither works (root without a writable pids cgroup) the bound is unavailable and
the shell tool refuses to run commands unless the host opted out with
``BashLimits(processes=None)``: an unbounded command is the host's choice, never a
fallback.

The command is started through a small ``bash`` prologue that joins the cgroup (or sets
the limit) and then ``exec``s the real command line, so nothing runs unbounded even for
an instant.
"""

from __future__ import annotations

import contextlib
import enum
import os
import signal
import uuid
from pathlib import Path

import anyio

from ..errors import SandboxUnavailableError

__all__ = ["ProcessBound", "ProcessBoundKind", "process_bound"]

#: Where the cgroup hierarchies are mounted.
CGROUP_ROOT = Path("/sys/fs/cgroup")
#: How long cleanup may take to empty a command's cgroup.
CLEANUP_SECONDS = 10.0
_CLEANUP_ROUND = 0.01
#: The cgroups made here start with this (so a leftover one is recognisable).
_PREFIX = "deputy-bash-"

#: Joins the cgroup whose ``cgroup.procs`` is $1, then runs the rest.
_JOIN = 'echo $$ >"$1" || exit 125; shift; exec "$@"'
#: Sets RLIMIT_NPROC (soft and hard) to $1, then runs the rest.
_ULIMIT = 'ulimit -u "$1" || exit 125; shift; exec "$@"'


class ProcessBoundKind(enum.Enum):
    """How the bound is kept."""

    CGROUP = "cgroup"
    RLIMIT = "rlimit"


class ProcessBound:
    """The bound of one command: wraps its argv, then cleans up after it."""

    __slots__ = ("cgroup", "kind", "limit")

    def __init__(self, kind: ProcessBoundKind, limit: int, cgroup: Path | None) -> None:
        self.kind = kind
        self.limit = limit
        self.cgroup = cgroup

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` behind the prologue that puts it under the bound."""
        if self.cgroup is not None:
            return ["/bin/bash", "-c", _JOIN, "deputy-bash", str(self.cgroup / "cgroup.procs"),
                    *argv]  # fmt: skip
        return ["/bin/bash", "-c", _ULIMIT, "deputy-bash", str(_nproc_limit(self.limit)), *argv]

    def kill(self) -> None:
        """SIGKILL every process in the cgroup (the command ended: what it left running
        goes with it, even a process that started a session of its own)."""
        if self.cgroup is not None:
            _kill_members(self.cgroup)

    async def aclose(self) -> None:
        """Kill what is left in the cgroup and remove it (nothing to do for a rlimit).

        Call it shielded, after the command's own process has been reaped: processes that
        left its process group (``setsid``) are found here and killed too. A process dies
        a moment after SIGKILL, so the cgroup is emptied in rounds (at most
        :data:`CLEANUP_SECONDS`); one that cannot be emptied is left for the host, with
        its ``pids.max`` still holding whatever remains.
        """
        cgroup, self.cgroup = self.cgroup, None
        if cgroup is None:
            return
        with anyio.move_on_after(CLEANUP_SECONDS):
            while True:
                _kill_members(cgroup)
                try:
                    os.rmdir(cgroup)
                    return
                except OSError:
                    await anyio.sleep(_CLEANUP_ROUND)


def process_bound(limit: int) -> ProcessBound:
    """A bound of ``limit`` processes for one command.

    Raises:
        SandboxUnavailableError: Neither a pids cgroup nor RLIMIT_NPROC can hold it.
    """
    cgroup = _new_cgroup(limit)
    if cgroup is not None:
        return ProcessBound(ProcessBoundKind.CGROUP, limit, cgroup)
    if os.geteuid() != 0:
        return ProcessBound(ProcessBoundKind.RLIMIT, limit, None)
    raise SandboxUnavailableError(
        "The bash tool bounds how many processes a command may start, and here it cannot: "
        "running as root (RLIMIT_NPROC does not hold root) without a writable pids cgroup "
        f"under {CGROUP_ROOT}. Run as another user, give this process a pids cgroup it may "
        "write, or let commands start processes without a bound with "
        "BashLimits(processes=None)."
    )


def _new_cgroup(limit: int) -> Path | None:
    """A fresh pids cgroup below this process's own, with ``pids.max`` = ``limit``."""
    for parent in _parents():
        cgroup = parent / f"{_PREFIX}{uuid.uuid4().hex}"
        try:
            cgroup.mkdir()
        except OSError:
            continue
        try:
            (cgroup / "pids.max").write_text(f"{limit}\n")
        except OSError:
            with contextlib.suppress(OSError):
                cgroup.rmdir()
            continue
        return cgroup
    return None


def _parents() -> list[Path]:
    """Where a pids cgroup could be made: this process's cgroup in each hierarchy that
    has the pids controller (v1 first: its pids hierarchy needs no delegation)."""
    found: list[Path] = []
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return found
    v2: Path | None = None
    for line in lines:
        _, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        relative = path.lstrip("/")
        if "pids" in controllers.split(","):
            found.append(CGROUP_ROOT / "pids" / relative)
        elif controllers == "":
            v2 = CGROUP_ROOT / relative
    if v2 is not None:
        try:
            delegated = "pids" in (v2 / "cgroup.subtree_control").read_text().split()
        except OSError:
            delegated = False
        if delegated:
            found.append(v2)
    return found


def _kill_members(cgroup: Path) -> None:
    try:
        text = (cgroup / "cgroup.procs").read_text()
    except OSError:
        return
    for word in text.split():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(int(word), signal.SIGKILL)


def _nproc_limit(limit: int) -> int:
    """RLIMIT_NPROC counts every process of the user: what it has now plus ``limit``."""
    uid = os.getuid()
    count = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid == uid:
                count += 1
        except OSError:
            continue
    return count + limit
