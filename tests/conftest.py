"""Shared test configuration.

Every async test runs on asyncio and on trio, and every hypothesis property test is marked
``slow`` so that ``pytest -m "not slow"`` is a fast inner loop (docs/contributing.md).
"""

from __future__ import annotations

import os
import resource
import sys
import time
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

# Bytecode caches on, here and in every process a test starts: with
# PYTHONDONTWRITEBYTECODE set (some images set it), every worker and every CLI subprocess
# compiles the whole package and pytest rewrites every test module again, which costs
# about a third of the suite's CPU on two cores. The caches are __pycache__ folders
# (ignored by git), written atomically, so parallel workers can share them.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

#: Workers per core. The suite waits a lot (servers, worker processes, durable timers,
#: heartbeat timeouts), so one worker per core leaves the CPU half idle; two keep it busy.
WORKERS_PER_CORE = 2
#: Each worker starts its own Temporal dev server and Redis: no more than this many.
MAX_WORKERS = 16


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: two workers per core (at least two, at most :data:`MAX_WORKERS`)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(2, min(WORKERS_PER_CORE * (cores or 1), MAX_WORKERS))


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Run each ``@pytest.mark.anyio`` test once per backend."""
    return str(request.param)


@pytest.fixture(autouse=True)
def _provider_registry_restored() -> Iterator[None]:
    """Providers a test registers (a gated model, a refusing one...) are removed when it
    ends, so tests after it, in whatever order they run, see the registry as it was.

    Only added names are removed: a test must never replace a built-in provider.
    """
    from deputy_runtime.chat import provider_names, unregister_provider

    before = set(provider_names())
    yield
    for name in set(provider_names()) - before:
        unregister_provider(name)


#: Test folders whose tests wait longest (real servers, worker processes, real time
#: limits), scheduled first so the short tests fill the workers' gaps at the end instead
#: of one worker finishing a long test alone.
_LONGEST_FIRST = ("temporal", "redis", "mcp", "cli", "service")


def _schedule_rank(item: pytest.Item) -> int:
    try:
        parts = Path(str(item.path)).relative_to(REPO_ROOT).parts
    except ValueError:  # collected from outside the repository
        return len(_LONGEST_FIRST) + 1
    folder = parts[1] if len(parts) > 2 and parts[0] == "tests" else ""
    if folder in _LONGEST_FIRST:
        return _LONGEST_FIRST.index(folder)
    return len(_LONGEST_FIRST) + (0 if item.get_closest_marker("slow") else 1)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every ``@given`` test ``slow`` and put the longest-waiting tests first.

    Runs before ``-m`` deselects, so ``-m "not slow"`` leaves property tests out without
    every one of them having to carry the marker itself. The order is stable and the same
    in every xdist worker (each collects on its own and must agree).
    """
    for item in items:
        if isinstance(item, pytest.Function) and getattr(item.obj, "is_hypothesis_test", False):
            item.add_marker(pytest.mark.slow)
    items.sort(key=_schedule_rank)


#: ``DEPUTY_TEST_CPU_LOG=path`` appends one line per test: wall seconds, CPU seconds of
#: the worker and of the processes the test started and waited for, and the test's id
#: (each xdist worker writes ``path.<worker>``). On two cores the suite is CPU-bound, so
#: CPU, not wall time, says which tests are worth making cheaper.
_CPU_LOG = os.environ.get("DEPUTY_TEST_CPU_LOG")


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    """Log each test's wall and CPU seconds when ``DEPUTY_TEST_CPU_LOG`` is set."""
    if not _CPU_LOG:
        return (yield)
    wall, cpu = time.monotonic(), _cpu_seconds()
    try:
        return (yield)
    finally:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(f"{_CPU_LOG}.{worker}", "a", encoding="utf-8") as log:
            log.write(f"{time.monotonic() - wall:.3f}\t{_cpu_seconds() - cpu:.3f}\t{item.nodeid}\n")
