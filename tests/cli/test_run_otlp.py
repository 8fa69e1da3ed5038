"""``deputy-runtime run --otlp``: the run's spans reach a real OTLP/HTTP endpoint."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli._runhelp import EXAMPLE_AGENTS, offline_env, run_cli
from tests.service.otlp import Collector, running_collector

pytestmark = pytest.mark.slow


@pytest.fixture
def collector() -> Iterator[Collector]:
    with running_collector() as c:
        yield c


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_run_exports_its_span_tree(backend: str, tmp_path: Path, collector: Collector) -> None:
    done = run_cli(
        *("run", "--agents", str(EXAMPLE_AGENTS), "--backend", backend),
        *("--otlp", collector.url, "Summarise the README"),
        cwd=tmp_path,
        env=offline_env(),
    )
    assert done.returncode == 0, done.stderr
    spans = collector.spans
    roots = [s for s in spans if s.parent_span_id == b""]
    assert [s.name for s in roots] == ["invoke_agent lead"], [s.name for s in spans]
    [root] = roots
    assert all(s.trace_id == root.trace_id for s in spans)
    delegations = [s for s in spans if any(a.key == "deputy.delegation.id" for a in s.attributes)]
    assert delegations, [s.name for s in spans]
    by_id = {s.span_id: s for s in spans}
    for d in delegations:
        assert by_id[d.parent_span_id].name == "execute_tool delegate_to_agent"
        assert by_id[d.parent_span_id].parent_span_id == root.span_id


def test_a_bad_otlp_endpoint_is_refused_by_name(tmp_path: Path) -> None:
    done = run_cli(
        *("run", "--agents", str(EXAMPLE_AGENTS), "--otlp", "localhost:4318", "task"),
        cwd=tmp_path,
        env=offline_env(),
    )
    assert done.returncode == 2
    assert "--otlp must be an http:// or https:// URL" in done.stderr
