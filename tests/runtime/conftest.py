"""Runtime test configuration: every stop reason the suite sees must be a listed one.

The recorder wraps the three places where the runtime hands out a stop reason: the end
of an agent run (``finish_run``), the snapshot of a delegation (``Delegation.record``)
and the aggregate of a ``parallel_delegate`` batch. After every test, each reason it saw
must be in :data:`deputy_runtime.STOP_REASONS`; a new reason produced anywhere in the
runtime but not listed there fails the test that produced it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from deputy_runtime.runtime import STOP_REASONS, _agent, _context, _parallel, _records
from tests.runtime.helpers import OBSERVED_STOP_REASONS as OBSERVED

_current: list[str] = []


def _seen(reason: Any) -> None:
    if reason is not None:
        OBSERVED.setdefault(str(reason), _current[-1] if _current else "?")
        _current_reasons.append(reason)


_current_reasons: list[Any] = []


@pytest.fixture(scope="session", autouse=True)
def _stop_reason_recorder() -> Iterator[None]:
    finish_run = _context.finish_run  # _agent calls it by this name
    record = _records.Delegation.record
    aggregate = _parallel._aggregate

    def recording_finish_run(*args: Any, **kwargs: Any) -> Any:
        result = finish_run(*args, **kwargs)
        _seen(result.stop_reason)
        return result

    def recording_record(self: Any) -> Any:
        snapshot = record(self)
        _seen(snapshot.stop_reason)
        return snapshot

    def recording_aggregate(*args: Any, **kwargs: Any) -> Any:
        result = aggregate(*args, **kwargs)
        _seen(result.run.stop_reason)
        for outcome in result.outcomes:
            _seen(outcome["stop_reason"])
        return result

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_agent, "finish_run", recording_finish_run)
        patch.setattr(_records.Delegation, "record", recording_record)
        patch.setattr(_parallel, "_aggregate", recording_aggregate)
        yield


@pytest.fixture(autouse=True)
def _stop_reasons_are_listed(request: pytest.FixtureRequest) -> Iterator[None]:
    _current.append(request.node.nodeid)
    _current_reasons.clear()
    yield
    unlisted = sorted({str(r) for r in _current_reasons} - set(STOP_REASONS))
    _current.pop()
    assert not unlisted, f"stop reasons produced but missing from STOP_REASONS: {unlisted}"
