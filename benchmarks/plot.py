"""Plot per-delegation fan-out cost against N, log-log, one line per contender.

python benchmarks/plot.py results/latest.json [out.png]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

STYLE = {
    "asyncio_floor": ("#999999", ":", "o"),
    "anyio_floor": ("#555555", "--", "o"),
    "deputy_runtime": ("#d62728", "-", "s"),
    "pydantic_ai": ("#1f77b4", "-", "^"),
    "openai_agents": ("#2ca02c", "-", "v"),
}


def plot(results: dict[str, Any], out: Path) -> Path:
    """Write the plot of ``results`` to ``out`` (PNG) and return the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 5.6), dpi=120)
    fanout = results["summary"]["fanout"]
    for contender in results["contenders"]:
        key = contender["key"]
        points = sorted(
            (int(n), entries[key]["us"]) for n, entries in fanout.items() if key in entries
        )
        if not points:
            continue
        ns = [n for n, _ in points]
        med = [s["median"] for _, s in points]
        low = [s["median"] - s["min"] for _, s in points]
        high = [s["max"] - s["median"] for _, s in points]
        color, line, marker = STYLE.get(key, (None, "-", "o"))
        label = f"{contender['label']} ({contender['version']})"
        ax.errorbar(
            ns,
            med,
            yerr=[low, high],
            color=color,
            linestyle=line,
            marker=marker,
            capsize=3,
            label=label,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("parallel delegations in one lead turn (N)")
    ax.set_ylabel("wall time per delegation (us), median [min-max]")
    meta = results["meta"]
    ax.set_title(
        f"Fan-out cost per delegation ({meta['started_utc'][:10]}, "
        f"Python {meta['python']}, {meta['cpu_count']} CPUs)",
        fontsize=10,
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    source = Path(sys.argv[1])
    target = Path(sys.argv[2]) if len(sys.argv) == 3 else Path(__file__).with_name("fanout.png")
    print(plot(json.loads(source.read_text(encoding="utf-8")), target))
