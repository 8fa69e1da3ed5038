"""Shared test configuration.

Every async test runs on asyncio and on trio, and every hypothesis property test is marked
``slow`` so that ``pytest -m "not slow"`` is a fast inner loop (docs/contributing.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Run each ``@pytest.mark.anyio`` test once per backend."""
    return str(request.param)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every ``@given`` test ``slow``: each runs its body up to hundreds of times.

    Runs before ``-m`` deselects, so ``-m "not slow"`` leaves these out without every
    property test having to carry the marker itself.
    """
    for item in items:
        if isinstance(item, pytest.Function) and getattr(item.obj, "is_hypothesis_test", False):
            item.add_marker(pytest.mark.slow)
