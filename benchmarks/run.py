"""The full delegation benchmark: deputy_runtime, the floors and the peers, in one run.

    python benchmarks/run.py            # full run (several minutes), updates results/
    python benchmarks/run.py --quick    # under two minutes
    python benchmarks/run.py --update-readme   # also rewrite the tables in README.md

Every measurement runs in a fresh worker process; contenders are interleaved and rotated;
see README.md for the method. Peers are skipped when the ``bench`` extra is not installed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from a checkout without installing

from deputy_runtime._bench._contenders import BUILTIN  # noqa: E402
from deputy_runtime._bench._report import render  # noqa: E402
from deputy_runtime._bench._runner import FULL, QUICK, BenchConfig, ContenderSpec, run_benchmarks  # noqa: E402

RESULTS = HERE / "results"
README = HERE / "README.md"
PLOT = HERE / "fanout.png"
START, END = "<!-- results:start -->", "<!-- results:end -->"


def peers(max_n: int | None, memory_max_n: int | None = None) -> tuple[ContenderSpec, ...]:
    """The peer contenders; ``max_n`` caps their fan-out sizes (they slow down a lot),
    ``memory_max_n`` their memory passes (tracemalloc slows them down tenfold)."""
    return (
        ContenderSpec(
            key="pydantic_ai",
            label="pydantic-ai",
            target=f"{HERE / 'peers' / 'pydantic_ai_contender.py'}:create",
            requires=("pydantic_ai",),
            max_n=max_n,
            memory_max_n=memory_max_n,
        ),
        ContenderSpec(
            key="openai_agents",
            label="openai-agents",
            target=f"{HERE / 'peers' / 'openai_agents_contender.py'}:create",
            requires=("agents",),
            max_n=max_n,
            memory_max_n=memory_max_n,
        ),
    )


def config_from(args: argparse.Namespace) -> BenchConfig:
    base = QUICK if args.quick else FULL
    changes: dict[str, object] = {}
    if args.reps is not None:
        changes["reps"] = args.reps
    if args.sizes is not None:
        changes["sizes"] = tuple(args.sizes)
        changes["memory_sizes"] = tuple(n for n in base.memory_sizes if n in args.sizes) or (
            max(args.sizes),
        )
    if args.memory_sizes is not None:
        changes["memory_sizes"] = tuple(args.memory_sizes)
    if args.min_time is not None:
        changes["seq_min_time"] = changes["fan_min_time"] = args.min_time
    if args.jobs is not None:
        changes["jobs"] = args.jobs
    import msgspec

    return msgspec.structs.replace(base, **changes)  # type: ignore[arg-type]


def source_revision() -> str:
    """The measured checkout's commit (``DEPUTY_BENCH_SOURCE`` overrides, e.g. for an
    exported snapshot without ``.git``)."""
    import os
    import subprocess

    if os.environ.get("DEPUTY_BENCH_SOURCE"):
        return os.environ["DEPUTY_BENCH_SOURCE"]
    try:
        done = subprocess.run(
            ["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip()


def readme_block(results: dict[str, Any]) -> str:
    """The generated README section: run facts, versions, tables and target checks."""
    meta = results["meta"]
    versions = ", ".join(
        f"{c['label']}: {c['version']}" for c in results["contenders"] if c["version"]
    )
    config = meta["config"]
    lines = [
        f"Run {meta['started_utc']} ({meta['mode']} mode, {meta['seconds']:.0f} s): "
        f"{meta['implementation']} {meta['python']} on {meta['platform']}, "
        f"{meta['cpu_count']} CPUs; {config['reps']} repetitions (memory: "
        f"{config['memory_reps']}), each in a fresh worker process; source "
        f"{meta.get('source', 'unknown')}.",
        "",
        f"Versions measured: {versions}.",
        "",
        render(results, markdown=True),
    ]
    return "\n".join(lines)


def update_readme(block: str, start: str = START, end: str = END) -> None:
    """Replace the text between the ``start`` and ``end`` markers of README.md."""
    text = README.read_text(encoding="utf-8")
    if start not in text or end not in text:
        raise SystemExit(f"{README}: markers {start} / {end} not found")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    README.write_text(f"{head}{start}\n{block}\n{end}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, 3 repetitions")
    parser.add_argument("--no-peers", action="store_true", help="floors and deputy_runtime only")
    parser.add_argument("--reps", type=int, help="repetitions (fresh workers per case)")
    parser.add_argument("--sizes", type=int, nargs="+", help="fan-out sizes")
    parser.add_argument("--memory-sizes", type=int, nargs="+", help="memory fan-out sizes")
    parser.add_argument("--min-time", type=float, help="seconds each timed loop runs at least")
    parser.add_argument(
        "--peer-max-n",
        type=int,
        default=1000,
        help="largest fan-out the peers run (default 1000; 0 = no cap)",
    )
    parser.add_argument("--jobs", type=int, help="parallel workers (only for smoke runs)")
    parser.add_argument("--out", type=Path, help="results JSON path (default: results/)")
    parser.add_argument("--no-plot", action="store_true", help="skip the PNG plot")
    parser.add_argument("--update-readme", action="store_true", help="rewrite README tables")
    args = parser.parse_args(argv)

    config = config_from(args)
    contenders = list(BUILTIN)
    if not args.no_peers:
        # Quick mode measures the peers' memory at N = 100 only: under tracemalloc one
        # openai-agents fan-out of 1,000 takes half a minute (their figures barely move
        # with N).
        contenders += peers(args.peer_max_n or None, 100 if args.quick else None)

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    results = run_benchmarks(config, contenders, progress)
    results["meta"]["mode"] = "quick" if args.quick else "full"
    results["meta"]["source"] = source_revision()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = args.out or RESULTS / f"{'quick' if args.quick else 'full'}-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    if args.out is None and not args.quick:
        (RESULTS / "latest.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(render(results))
    print(f"results: {out}", file=sys.stderr)
    if not args.no_plot and results["summary"]["fanout"]:
        try:
            from plot import plot
        except ImportError as exc:  # matplotlib is in the bench extra
            print(f"plot skipped: {exc}", file=sys.stderr)
        else:
            plot(results, PLOT if args.out is None and not args.quick else out.with_suffix(".png"))
    if args.update_readme:
        update_readme(readme_block(results))
    return 1 if results["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
