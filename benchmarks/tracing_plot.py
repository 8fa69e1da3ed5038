"""Plot tracing's cost per delegation: off, the SDK floor and the runtime's own share.

    python benchmarks/tracing_plot.py OUT.png LABEL=RESULT.json [LABEL=RESULT.json ...]

Each RESULT.json is what ``tracing_overhead.py --json`` wrote; results with the same
label and backend are combined by their median. One stacked bar per label and backend:
the untraced delegation, then what the SDK itself costs for the spans (the floor), then
what the runtime adds on top (the target line is 50 us above the floor).
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

TARGET_US = 50.0


def main(argv: list[str]) -> int:
    if len(argv) < 2 or any("=" not in a for a in argv[1:]):
        print(__doc__, file=sys.stderr)
        return 2
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups: dict[tuple[str, str], list[dict[str, float]]] = defaultdict(list)
    for arg in argv[1:]:
        label, _, path = arg.partition("=")
        result = json.loads(Path(path).read_text(encoding="utf-8"))
        groups[(label, result["backend"])].append(result)
    keys = list(groups)
    names = [f"{label}\n{backend}" for label, backend in keys]

    def median(field: str) -> list[float]:
        return [statistics.median(r[field] for r in groups[k]) for k in keys]

    off, floor, own = median("off_us"), median("floor_us"), median("runtime_us")
    fig, ax = plt.subplots(figsize=(7.5, 4.2), dpi=110)
    ax.bar(names, off, color="#bbbbbb", label="tracing off (the delegation)")
    ax.bar(names, floor, bottom=off, color="#4c78a8", label="SDK floor: the same spans, direct")
    tops = [o + f for o, f in zip(off, floor, strict=True)]
    ax.bar(names, own, bottom=tops, color="#d62728", label="the runtime's own tracing cost")
    for i, (top, mine) in enumerate(zip(tops, own, strict=True)):
        ax.hlines(top + TARGET_US, i - 0.4, i + 0.4, colors="black", linestyles="dashed")
        ax.text(i, top + mine / 2, f"+{mine:.0f} us", ha="center", va="center", color="white")
    ax.plot([], [], "k--", label=f"target: floor + {TARGET_US:.0f} us")
    ax.set_ylabel("us per delegation (fan-out of 1,000, best of 7)")
    ax.set_title("Tracing on, in-memory exporter: cost per delegation")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_ylim(0, max(t + max(m, TARGET_US) for t, m in zip(tops, own, strict=True)) * 1.12)
    fig.tight_layout()
    fig.savefig(argv[0])
    print(argv[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
