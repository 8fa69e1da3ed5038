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

__all__ = ["bench", "start_message"]

# Wall-clock estimates on a 2-core machine, said before a run starts so nobody waits for
# minutes without knowing (a loaded machine takes longer).
_FULL_ESTIMATE = "several minutes (about 3 to 6 on a 2-core machine)"
_QUICK_ESTIMATE = "about a minute"


def start_message(quick: bool, reps: int, sizes: tuple[int, ...]) -> str:
    """What ``bench`` says before it starts: what it measures and how long that takes."""
    mode = "quick" if quick else "full"
    text = (
        f"deputy-runtime bench ({mode}): {reps} repetitions, fan-out N = "
        f"{', '.join(map(str, sizes))}; each measurement in a fresh process. "
    )
    if quick:
        return text + f"This takes {_QUICK_ESTIMATE}."
    return (
        text + f"This takes {_FULL_ESTIMATE}; pass --quick for a smaller run that takes "
        f"{_QUICK_ESTIMATE}."
    )


def bench(args: argparse.Namespace) -> int:
    """Run the benchmark; exit status 1 if any worker failed or answered wrongly."""
    from .._bench import BUILTIN, FULL, QUICK, render, run_benchmarks

    config = QUICK if getattr(args, "quick", False) else FULL

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    print(start_message(config is QUICK, config.reps, config.sizes), file=sys.stderr, flush=True)
    results = run_benchmarks(config, BUILTIN, progress)
    if getattr(args, "json", False):
        print(json.dumps(results, indent=2))
    else:
        print(render(results))
    return 1 if results["errors"] else 0
