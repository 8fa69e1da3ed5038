"""Shared test configuration.

Every async test runs on asyncio and on trio, and every hypothesis property test is marked
``slow`` so that ``pytest -m "not slow"`` is a fast inner loop (docs/contributing.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


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
