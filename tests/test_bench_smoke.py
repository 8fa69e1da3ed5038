"""Smoke test of the delegation benchmark: correctness, never speed.

Runs the benchmark's quick mode on tiny N, each measurement in a real worker process, for
every contender available here (the floors and deputy_runtime always; the peers only when
the ``bench`` extra is installed), and checks that every contender answered ``done:N``.
Timing figures are not asserted: speed is reported by ``benchmarks/``, never tested.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

import deputy_runtime._bench
from deputy_runtime._bench import _runner
from deputy_runtime._bench._contenders import BUILTIN
from deputy_runtime._bench._floors import create_anyio
from deputy_runtime._bench._report import render, target_checks
from deputy_runtime._bench._runner import BenchConfig, ContenderSpec, run_benchmarks, summarise
from deputy_runtime._bench._shape import check_answer
from deputy_runtime.cli import main

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
TINY = BenchConfig(
    sizes=(3,),
    memory_sizes=(4,),
    reps=1,
    memory_reps=1,
    seq_min_time=0.0,
    fan_min_time=0.0,
    seq_warmup=1,
    jobs=2,
    timeout=120.0,
)


def _peers() -> list[ContenderSpec]:
    peers = REPO / "benchmarks" / "peers"
    return [
        ContenderSpec(
            "pydantic_ai",
            "pydantic-ai",
            f"{peers / 'pydantic_ai_contender.py'}:create",
            requires=("pydantic_ai",),
        ),
        ContenderSpec(
            "openai_agents",
            "openai-agents",
            f"{peers / 'openai_agents_contender.py'}:create",
            requires=("agents",),
        ),
    ]


def test_every_contender_answers_done_n_in_worker_processes() -> None:
    contenders = [*BUILTIN, *_peers()]
    results = run_benchmarks(TINY, contenders)
    assert results["errors"] == []
    ran = {c["key"] for c in results["contenders"]}
    assert {c.key for c in BUILTIN} <= ran
    assert ran == {c.key for c in contenders if c.available()}
    seen = {(s["contender"], s["kind"], s["n"]): s["answer"] for s in results["samples"]}
    for key in ran:
        assert seen[(key, "sequential", 1)] == "done:1"
        assert seen[(key, "fanout", 3)] == "done:3"
        assert seen[(key, "memory", 4)] == "done:4"
    text = render(results)
    assert "x anyio floor" in text
    assert "deputy_runtime" in text


def test_cli_bench_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(deputy_runtime._bench, "QUICK", TINY)  # what the command reads
    assert main(["bench", "--quick", "--json"]) == 0
    results = json.loads(capsys.readouterr().out)
    answers = {(s["contender"], s["kind"]): s["answer"] for s in results["samples"]}
    assert answers[("deputy_runtime", "fanout")] == "done:3"
    assert answers[("anyio_floor", "sequential")] == "done:1"


def test_a_wrong_answer_fails_the_worker_and_the_run(tmp_path: Path) -> None:
    bad = tmp_path / "bad_contender.py"
    bad.write_text(
        "class Bad:\n"
        "    name = 'bad'\n    version = 'x'\n"
        "    async def sequential(self): return 'done:1'\n"
        "    async def fanout(self, n): return f'done:{n - 1}'\n"
        "def create(child_yields=False): return Bad()\n",
        encoding="utf-8",
    )
    config = msgspec.structs.replace(TINY, memory_sizes=())
    results = run_benchmarks(config, [ContenderSpec("bad", "bad", f"{bad}:create")])
    assert [e["kind"] for e in results["errors"]] == ["fanout"]
    assert "expected 'done:3'" in results["errors"][0]["error"]
    assert "ERROR" in render(results)


def test_schedule_interleaves_rotates_and_caps() -> None:
    specs = [ContenderSpec(k, k, "m:f", max_n=100 if k == "c" else None) for k in "abc"]
    config = BenchConfig(sizes=(10, 1000), memory_sizes=(), reps=2)
    jobs = _runner._schedule(config, specs)
    first = [j.contender for j in jobs if j.rep == 0 and j.kind == "sequential"]
    second = [j.contender for j in jobs if j.rep == 1 and j.kind == "sequential"]
    assert sorted(first) == sorted(second) == ["a", "b", "c"]
    assert first != second
    assert not any(j.contender == "c" and j.n == 1000 for j in jobs)
    assert sum(j.kind == "fanout" for j in jobs) == 2 * (3 + 2)


def test_summary_pairs_ratios_by_repetition_and_checks_targets() -> None:
    def sample(
        key: str, kind: str, n: int, rep: int, us: float | None, kib: float = 0
    ) -> dict[str, object]:
        return {
            "contender": key,
            "kind": kind,
            "n": n,
            "rep": rep,
            "us": us,
            "rss_peak_kib": 2048,
            "bytes_per_delegation": kib * 1024,
        }

    # Repetition 1 ran on a slow spell: both contenders were 3x slower.
    samples = [sample("anyio_floor", "sequential", 1, r, v) for r, v in enumerate((10, 30, 20))]
    samples += [
        sample("deputy_runtime", "sequential", 1, r, v) for r, v in enumerate((70, 210, 300))
    ]
    for n, floor, deputy in ((100, 10, 40), (1000, 10, 60), (10000, 10, 55)):
        samples += [
            sample("anyio_floor", "fanout", n, 0, floor),
            sample("deputy_runtime", "fanout", n, 0, deputy),
        ]
    samples += [sample("deputy_runtime", "memory", n, 0, None, 11.0) for n in (1000, 10000)]
    summary = summarise(samples)
    seq = summary["sequential"]["deputy_runtime"]
    assert seq["us"] == {"median": 210, "min": 70, "max": 300, "count": 3}
    # Paired ratios 7, 7 and 15 -> 7; the ratio of medians (210 / 20) would say 10.5.
    assert seq["ratios"]["anyio_floor"] == 7
    assert summary["sequential"]["anyio_floor"]["ratios"]["deputy_runtime"] == pytest.approx(1 / 7)
    checks = target_checks({"summary": summary, "contenders": [], "errors": []})
    assert [ok for _, _, ok in checks] == [True, False, True, True]
    assert checks[0][1] == "7.00x"
    assert checks[1][1] == "N=100: 4.00x, N=1000: 6.00x"
    assert checks[3][1] == "N=1000: 11.0 KiB, N=10000: 11.0 KiB"


@pytest.mark.anyio
async def test_contenders_in_process_on_both_backends() -> None:
    from deputy_runtime._bench._deputy import create

    for factory in (create_anyio, create):
        for yields in (False, True):
            contender = factory(child_yields=yields)
            check_answer(await contender.sequential(), 1)
            check_answer(await contender.fanout(5), 5)


def _load_benchmark(name: str):  # type: ignore[no-untyped-def]
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        f"_bench_{name}", REPO / "benchmarks" / f"{name}.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.anyio
async def test_agent_loop_variants_answer_on_both_backends() -> None:
    agent_loop = _load_benchmark("agent_loop")
    for key, _label, _k in agent_loop.VARIANTS:
        contender = getattr(agent_loop, key)()
        for _ in range(2):  # a second run starts a fresh conversation
            check_answer(await contender.sequential(), 1)
