"""``deputy-runtime bench``: delegation overhead of this runtime against bare floors.

Runs the deputy_runtime contender and the asyncio and anyio floors, each measurement in a
fresh worker process, and prints the tables with ratios, so anyone can measure the
runtime's overhead on their own machine in one command. Peers are compared by the full
driver in the repository's ``benchmarks/`` directory.
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["bench"]


def bench(args: argparse.Namespace) -> int:
    """Run the benchmark; exit status 1 if any worker failed or answered wrongly."""
    from .._bench import BUILTIN, FULL, QUICK, render, run_benchmarks

    config = QUICK if getattr(args, "quick", False) else FULL

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    print(
        f"deputy-runtime bench ({'quick' if config is QUICK else 'full'}): "
        f"{config.reps} repetitions, fan-out N = {', '.join(map(str, config.sizes))}; "
        "each measurement in a fresh process",
        file=sys.stderr,
        flush=True,
    )
    results = run_benchmarks(config, BUILTIN, progress)
    if getattr(args, "json", False):
        print(json.dumps(results, indent=2))
    else:
        print(render(results))
    return 1 if results["errors"] else 0
