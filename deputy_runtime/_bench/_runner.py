"""The orchestrator: one fresh worker process per measurement, contenders interleaved.

For every repetition and every case (sequential, fan-out at each N, memory at each N) the
contenders run back to back, in an order rotated by repetition and case, so slow drifts of
a noisy machine (thermal, other tenants) hit every contender alike. Warm-up happens inside
each worker and is excluded. Figures are summarised as median with min and max.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec

from ._worker import Kind, WorkerResult, WorkerSpec

__all__ = [
    "FULL",
    "QUICK",
    "BenchConfig",
    "BenchError",
    "ContenderSpec",
    "Job",
    "run_benchmarks",
    "summarise",
]

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


class BenchError(RuntimeError):
    """A worker failed: crashed, timed out, or a contender answered wrongly."""


class ContenderSpec(msgspec.Struct, frozen=True):
    """A contender the runner can start in a worker.

    ``key`` names it in results; ``target`` is the factory (see ``WorkerSpec.target``);
    ``requires`` are modules that must be importable, else the contender is skipped;
    ``max_n`` caps the fan-out sizes it runs (slow peers at N = 10,000 take minutes) and
    ``memory_max_n`` the memory passes (tracemalloc slows some peers tenfold).
    """

    key: str
    label: str
    target: str
    requires: tuple[str, ...] = ()
    max_n: int | None = None
    memory_max_n: int | None = None
    floor: bool = False

    def available(self) -> bool:
        """Whether every module in ``requires`` can be imported here."""
        return all(importlib.util.find_spec(m) is not None for m in self.requires)


class BenchConfig(msgspec.Struct, frozen=True):
    """How much to measure. The defaults are the full run."""

    sizes: tuple[int, ...] = (10, 100, 1000, 10000)
    memory_sizes: tuple[int, ...] = (10, 100, 1000, 10000)
    reps: int = 5
    memory_reps: int = 2
    seq_min_time: float = 0.5
    fan_min_time: float = 0.5
    seq_warmup: int = 20
    jobs: int = 1
    timeout: float = 1800.0


class Job(msgspec.Struct, frozen=True):
    """One scheduled worker run."""

    contender: str
    kind: Kind
    n: int
    rep: int


def _schedule(config: BenchConfig, contenders: Sequence[ContenderSpec]) -> list[Job]:
    cases: list[tuple[Kind, int]] = [("sequential", 1)]
    cases += [("fanout", n) for n in config.sizes]
    jobs: list[Job] = []

    def add(rep: int, index: int, kind: Kind, n: int) -> None:
        def fits(c: ContenderSpec) -> bool:
            cap = c.memory_max_n if kind == "memory" and c.memory_max_n is not None else c.max_n
            return cap is None or n <= cap

        eligible = [c for c in contenders if fits(c)]
        shift = (rep + index) % len(eligible) if eligible else 0
        for c in eligible[shift:] + eligible[:shift]:
            jobs.append(Job(c.key, kind, n, rep))

    for rep in range(config.reps):
        for index, (kind, n) in enumerate(cases):
            add(rep, index, kind, n)
    for rep in range(config.memory_reps):
        for index, n in enumerate(config.memory_sizes):
            add(rep, index, "memory", n)
    return jobs


def _run_worker(spec: WorkerSpec, timeout: float) -> WorkerResult:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH", "")) if p)
    env.setdefault("PYTHONHASHSEED", "0")
    command = [sys.executable, "-m", "deputy_runtime._bench._worker"]
    command.append(msgspec.json.encode(spec).decode())
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise BenchError(
            f"{spec.target} {spec.kind} n={spec.n}: timed out after {timeout:g} s"
        ) from exc
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-15:])
        raise BenchError(
            f"{spec.target} {spec.kind} n={spec.n}: worker exited {done.returncode}\n{tail}"
        )
    return msgspec.json.decode(done.stdout.strip().splitlines()[-1], type=WorkerResult)


def _stats(values: Sequence[float]) -> dict[str, float]:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "count": len(values),
    }


def _metric(sample: dict[str, Any]) -> float:
    if sample["kind"] == "memory":
        return float(sample["bytes_per_delegation"]) / 1024
    return float(sample["us"])


def _paired_ratios(
    group: Sequence[dict[str, Any]], case: Sequence[dict[str, Any]]
) -> dict[str, float]:
    """Median over repetitions of this contender's figure / each other contender's figure.

    Contenders of one case and repetition ran back to back, so a slow spell of a noisy
    machine hits both sides of a paired ratio; this is steadier than a ratio of medians.
    """
    by_rep: dict[str, dict[int, float]] = {}
    for other in case:
        by_rep.setdefault(other["contender"], {})[other["rep"]] = _metric(other)
    ratios: dict[str, float] = {}
    for ref, values in by_rep.items():
        paired = [_metric(g) / values[g["rep"]] for g in group if values.get(g["rep"], 0) > 0]
        if paired:
            ratios[ref] = statistics.median(paired)
    return ratios


def summarise(samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Medians with min-max per contender and case, and paired ratios, from the samples."""
    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    cases: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for s in samples:
        groups.setdefault((s["kind"], s["contender"], s["n"]), []).append(s)
        cases.setdefault((s["kind"], s["n"]), []).append(s)
    summary: dict[str, Any] = {"sequential": {}, "fanout": {}, "memory": {}}
    for (kind, key, n), group in sorted(groups.items()):
        metric = "kib_per_delegation" if kind == "memory" else "us"
        entry = {
            metric: _stats([_metric(g) for g in group]),
            "rss_peak_mib": _stats([g["rss_peak_kib"] / 1024 for g in group]),
            "ratios": _paired_ratios(group, cases[(kind, n)]),
        }
        if kind == "sequential":
            summary["sequential"][key] = entry
        else:
            summary[kind].setdefault(str(n), {})[key] = entry
    return summary


def run_benchmarks(
    config: BenchConfig,
    contenders: Sequence[ContenderSpec],
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run every scheduled worker; return the results document (JSON-encodable)."""
    available = [c for c in contenders if c.available()]
    skipped = [c.key for c in contenders if c not in available]
    by_key = {c.key: c for c in available}
    jobs = _schedule(config, available)
    started = time.time()

    def one(job: Job) -> dict[str, Any]:
        c = by_key[job.contender]
        spec = WorkerSpec(
            target=c.target,
            kind=job.kind,
            n=job.n,
            min_time=config.seq_min_time if job.kind == "sequential" else config.fan_min_time,
            warmup=config.seq_warmup,
        )
        began = time.perf_counter()
        try:
            result = _run_worker(spec, config.timeout)
        except BenchError as exc:
            # Keep the rest of a long run; the error is reported and fails the command.
            if progress is not None:
                progress(f"rep {job.rep + 1} {job.kind:<10} n={job.n:<6} {c.label:<22} FAILED")
            return {
                "contender": c.key,
                "rep": job.rep,
                "kind": job.kind,
                "n": job.n,
                "error": str(exc),
            }
        if progress is not None:
            figure = (
                f"{result.us:,.1f} us"
                if result.us is not None
                else f"{(result.bytes_per_delegation or 0) / 1024:,.2f} KiB/delegation"
            )
            progress(f"rep {job.rep + 1} {job.kind:<10} n={job.n:<6} {c.label:<22} {figure}")
        seconds = round(time.perf_counter() - began, 2)
        return {
            "contender": c.key,
            "rep": job.rep,
            "worker_seconds": seconds,
            **msgspec.structs.asdict(result),
        }

    if config.jobs > 1:
        with ThreadPoolExecutor(config.jobs) as pool:
            samples = list(pool.map(one, jobs))
    else:
        samples = [one(job) for job in jobs]
    errors = [s for s in samples if "error" in s]
    samples = [s for s in samples if "error" not in s]
    versions = {s["contender"]: s["version"] for s in samples}
    return {
        "meta": {
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "seconds": round(time.time() - started, 1),
            "python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "config": msgspec.structs.asdict(config),
            "skipped": skipped,
        },
        "contenders": [
            {"key": c.key, "label": c.label, "version": versions.get(c.key, ""), "floor": c.floor}
            for c in available
        ],
        "errors": errors,
        "samples": samples,
        "summary": summarise(samples),
    }


#: ``--quick``: fewer sizes, repetitions and seconds; about a minute without peers.
QUICK = BenchConfig(
    sizes=(10, 100, 1000),
    memory_sizes=(100, 1000),
    reps=3,
    memory_reps=1,
    seq_min_time=0.2,
    fan_min_time=0.2,
    seq_warmup=10,
)
#: The full run.
FULL = BenchConfig()
