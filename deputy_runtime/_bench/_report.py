"""Tables from a results document: plain text for the terminal, Markdown for the README.

Every figure is shown as median [min-max] over the repetitions, next to its ratio to the
floors measured in the same run (ratios survive a noisy machine far better than absolute
microseconds) and, when peers ran, its ratio to each peer (below 1 means faster).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["TARGETS", "render", "target_checks"]

DEPUTY = "deputy_runtime"
ANYIO = "anyio_floor"
ASYNCIO = "asyncio_floor"

#: The delegation targets of issue 7, as (description, check) pairs computed from a summary.
TARGETS = (
    "sequential lead run <= 8x anyio floor",
    "fan-out per delegation <= 5x anyio floor at N = 100 and 1,000",
    "fan-out linear: per delegation at N = 10,000 within 1.5x of N = 100",
    "memory <= 12 KiB per in-flight delegation at N = 1,000 and 10,000",
)

Table = tuple[list[str], list[list[str]]]


def _fmt(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _spread(stats: dict[str, float]) -> str:
    return f"{_fmt(stats['median'])} [{_fmt(stats['min'])}-{_fmt(stats['max'])}]"


def _ratio(value: float, reference: float | None) -> str:
    if reference is None or reference <= 0:
        return "-"
    ratio = value / reference
    return f"{ratio:.2f}x" if 0.1 <= ratio < 100 else f"{ratio:.3g}x"


def _peers(results: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in results["contenders"] if not c["floor"]]


def _case_table(
    results: dict[str, Any],
    cases: Sequence[tuple[str, dict[str, Any]]],
    metric: str,
    rss: bool = False,
) -> Table:
    labels = {c["key"]: c["label"] for c in results["contenders"]}
    peers = _peers(results)
    header = ["N", "contender", "median [min-max]", "x anyio floor", "x asyncio floor"]
    header += [f"vs {p['label']}" for p in peers]
    if rss:
        header.append("peak RSS MiB")
    rows: list[list[str]] = []
    for n, entries in cases:

        def median(key: str, entries: dict[str, Any] = entries) -> float | None:
            entry = entries.get(key)
            return None if entry is None else float(entry[metric]["median"])

        for key, entry in entries.items():
            value = float(entry[metric]["median"])
            row = [n, labels.get(key, key), _spread(entry[metric])]
            row += [_ratio(value, median(ANYIO)), _ratio(value, median(ASYNCIO))]
            row += ["-" if p["key"] == key else _ratio(value, median(p["key"])) for p in peers]
            if rss:
                row.append(_fmt(entry["rss_peak_mib"]["median"]))
            rows.append(row)
    return header, rows


def _ordered(results: dict[str, Any], entries: dict[str, Any]) -> dict[str, Any]:
    order = [c["key"] for c in results["contenders"]]
    return {k: entries[k] for k in order if k in entries}


def tables(results: dict[str, Any]) -> list[tuple[str, Table]]:
    """The titled tables of a results document."""
    summary = results["summary"]
    out: list[tuple[str, Table]] = []
    seq = _ordered(results, summary["sequential"])
    if seq:
        out.append(
            (
                "Sequential lead run with one delegation (us per run)",
                _case_table(results, [("1", seq)], "us"),
            )
        )
    fan = [
        (n, _ordered(results, e))
        for n, e in sorted(summary["fanout"].items(), key=lambda x: int(x[0]))
    ]
    if fan:
        out.append(("Fan-out (us per delegation)", _case_table(results, fan, "us")))
    mem = [
        (n, _ordered(results, e))
        for n, e in sorted(summary["memory"].items(), key=lambda x: int(x[0]))
    ]
    if mem:
        header, rows = _case_table(results, mem, "kib_per_delegation", rss=True)
        header[2] = "KiB per in-flight delegation"
        out.append(
            ("Memory (tracemalloc peak per in-flight delegation; process VmHWM)", (header, rows))
        )
    return out


def target_checks(results: dict[str, Any]) -> list[tuple[str, str, bool | None]]:
    """(target, measured, met) for each delegation target; ``met`` is None if not measured."""
    s = results["summary"]

    def med(section: dict[str, Any], key: str, metric: str = "us") -> float | None:
        entry = section.get(key)
        return None if entry is None else float(entry[metric]["median"])

    checks: list[tuple[str, str, bool | None]] = []
    d, f = med(s["sequential"], DEPUTY), med(s["sequential"], ANYIO)
    checks.append(
        (
            TARGETS[0],
            f"{d / f:.2f}x" if d and f else "not measured",
            None if not (d and f) else d / f <= 8,
        )
    )
    ratios = []
    for n in ("100", "1000"):
        fan = s["fanout"].get(n, {})
        d, f = med(fan, DEPUTY), med(fan, ANYIO)
        if d and f:
            ratios.append((n, d / f))
    checks.append(
        (
            TARGETS[1],
            ", ".join(f"N={n}: {r:.2f}x" for n, r in ratios) or "not measured",
            None if len(ratios) < 2 else all(r <= 5 for _, r in ratios),
        )
    )
    lo = med(s["fanout"].get("100", {}), DEPUTY)
    hi = med(s["fanout"].get("10000", {}), DEPUTY)
    checks.append(
        (
            TARGETS[2],
            f"{hi / lo:.2f}x" if lo and hi else "not measured",
            None if not (lo and hi) else hi / lo <= 1.5,
        )
    )
    kib = []
    for n in ("1000", "10000"):
        v = med(s["memory"].get(n, {}), DEPUTY, "kib_per_delegation")
        if v is not None:
            kib.append((n, v))
    checks.append(
        (
            TARGETS[3],
            ", ".join(f"N={n}: {v:.1f} KiB" for n, v in kib) or "not measured",
            None if len(kib) < 2 else all(v <= 12 for _, v in kib),
        )
    )
    return checks


def _text_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        cells = [row[0].rjust(widths[0]), row[1].ljust(widths[1])]
        cells += [c.rjust(w) for c, w in zip(row[2:], widths[2:], strict=True)]
        lines.append("  ".join(cells))
    return "\n".join(lines)


def _markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |"]
    lines.append("|" + "|".join(["---:", "---"] + ["---:"] * (len(header) - 2)) + "|")
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def render(results: dict[str, Any], markdown: bool = False) -> str:
    """All tables plus the target checks, as text or Markdown."""
    parts: list[str] = []
    for title, (header, rows) in tables(results):
        if markdown:
            parts.append(f"### {title}\n\n{_markdown_table(header, rows)}")
        else:
            parts.append(f"{title}\n{_text_table(header, rows)}")
    if DEPUTY in results["summary"]["sequential"] or any(
        DEPUTY in e for e in results["summary"]["fanout"].values()
    ):
        checks = target_checks(results)
        header = ["#", "target", "measured", "met"]
        rows = [
            [str(i + 1), t, m, "n/a" if ok is None else ("yes" if ok else "NO")]
            for i, (t, m, ok) in enumerate(checks)
        ]
        parts.append(
            f"### Targets (deputy_runtime)\n\n{_markdown_table(header, rows)}"
            if markdown
            else f"Targets (deputy_runtime)\n{_text_table(header, rows)}"
        )
    for error in results.get("errors", []):
        parts.append(f"ERROR: {error['error']}")
    return "\n\n".join(parts) + "\n"
