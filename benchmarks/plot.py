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


def plot(results: dict[str, Any], out: Path, extra: dict[str, Any] | None = None) -> Path:
    """Write the plot of ``results`` to ``out`` (PNG) and return the path.

    ``extra`` is an optional second results document (e.g. the peers' one-repetition run
    at N = 10,000); its non-floor points are drawn as open markers joined by a dotted line
    to the contender's last point.
    """
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
        more = extra["summary"]["fanout"] if extra is not None else {}
        beyond = sorted(
            (int(n), e[key]["us"]["median"])
            for n, e in more.items()
            if key in e and int(n) > ns[-1] and not contender["floor"]
        )
        if beyond:
            ax.plot(
                [ns[-1]] + [n for n, _ in beyond],
                [med[-1]] + [v for _, v in beyond],
                color=color,
                linestyle=":",
                marker=marker,
                markerfacecolor="none",
                markevery=list(range(1, len(beyond) + 1)),
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("parallel delegations in one lead turn (N)")
    ax.set_ylabel("wall time per delegation (us), median [min-max]")
    if extra is not None:
        ax.text(
            0.99,
            0.02,
            "open markers: peers at N = 10,000, one repetition (separate run)",
            transform=ax.transAxes,
            ha="right",
            va="bottom",
            fontsize=7,
            color="#444444",
        )
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
    if len(sys.argv) not in (2, 3, 4):
        raise SystemExit(__doc__)
    source = Path(sys.argv[1])
    target = Path(sys.argv[2]) if len(sys.argv) >= 3 else Path(__file__).with_name("fanout.png")
    more = json.loads(Path(sys.argv[3]).read_text(encoding="utf-8")) if len(sys.argv) == 4 else None
    print(plot(json.loads(source.read_text(encoding="utf-8")), target, more))
