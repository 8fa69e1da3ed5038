"""Tables from a results document: plain text for the terminal, Markdown for the README.

Every figure is shown as median [min-max] over the repetitions, next to its ratio to the
floors measured in the same run (ratios survive a noisy machine far better than absolute
microseconds) and, when peers ran, its ratio to each peer (below 1 means faster).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["TARGETS", "ratio", "render", "target_checks"]

DEPUTY = "deputy_runtime"
ANYIO = "anyio_floor"
ASYNCIO = "asyncio_floor"

#: The overhead targets the runtime is held to (checked by :func:`target_checks`).
TARGETS = (
    "sequential lead run <= 8x anyio floor",
    "fan-out per delegation <= 5x anyio floor at N = 100 and 1,000",
    "fan-out linear: per delegation at N = 10,000 within 1.5x of N = 100",
    "memory <= 12 KiB per in-flight delegation at N = 1,000 and 10,000",
)

Table = tuple[list[str], list[list[str]]]


def _fmt(value: float) -> str:
    if round(value, 1) >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _spread(stats: dict[str, float]) -> str:
    return f"{_fmt(stats['median'])} [{_fmt(stats['min'])}-{_fmt(stats['max'])}]"


def ratio(entry: dict[str, Any], entries: dict[str, Any], ref: str, metric: str) -> float | None:
    """This entry's figure relative to ``ref``'s: the paired ratio when the runner computed
    one (median over repetitions of same-repetition ratios), else a ratio of medians."""
    paired = entry.get("ratios", {}).get(ref)
    if paired is not None:
        return float(paired)
    other = entries.get(ref)
    if other is None or other[metric]["median"] <= 0:
        return None
    return float(entry[metric]["median"]) / float(other[metric]["median"])


def _ratio(entry: dict[str, Any], entries: dict[str, Any], ref: str, metric: str) -> str:
    value = ratio(entry, entries, ref, metric)
    if value is None:
        return "-"
    return f"{value:.2f}x" if 0.1 <= value < 100 else f"{value:.3g}x"


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
        for key, entry in entries.items():
            row = [n, labels.get(key, key), _spread(entry[metric])]
            row += [_ratio(entry, entries, ANYIO, metric), _ratio(entry, entries, ASYNCIO, metric)]
            row += [
                "-" if p["key"] == key else _ratio(entry, entries, p["key"], metric) for p in peers
            ]
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

    def vs_floor(entries: dict[str, Any], metric: str = "us") -> float | None:
        entry = entries.get(DEPUTY)
        return None if entry is None else ratio(entry, entries, ANYIO, metric)

    def median(entries: dict[str, Any], metric: str) -> float | None:
        entry = entries.get(DEPUTY)
        return None if entry is None else float(entry[metric]["median"])

    checks: list[tuple[str, str, bool | None]] = []
    seq = vs_floor(s["sequential"])
    checks.append(
        (
            TARGETS[0],
            "not measured" if seq is None else f"{seq:.2f}x",
            None if seq is None else seq <= 8,
        )
    )
    fan = [(n, vs_floor(s["fanout"].get(n, {}))) for n in ("100", "1000")]
    got = [(n, r) for n, r in fan if r is not None]
    checks.append(
        (
            TARGETS[1],
            ", ".join(f"N={n}: {r:.2f}x" for n, r in got) or "not measured",
            None if len(got) < 2 else all(r <= 5 for _, r in got),
        )
    )
    lo = median(s["fanout"].get("100", {}), "us")
    hi = median(s["fanout"].get("10000", {}), "us")
    checks.append(
        (
            TARGETS[2],
            f"{hi / lo:.2f}x" if lo and hi else "not measured",
            None if not (lo and hi) else hi / lo <= 1.5,
        )
    )
    kib = [(n, median(s["memory"].get(n, {}), "kib_per_delegation")) for n in ("1000", "10000")]
    have = [(n, v) for n, v in kib if v is not None]
    checks.append(
        (
            TARGETS[3],
            ", ".join(f"N={n}: {v:.1f} KiB" for n, v in have) or "not measured",
            None if len(have) < 2 else all(v <= 12 for _, v in have),
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
        # The worker's first line and the exception line; the JSON keeps the traceback.
        lines = error["error"].strip().splitlines()
        summary = lines[0] if len(lines) < 2 else f"{lines[0]}: {lines[-1]}"
        parts.append(f"ERROR: {summary}")
    return "\n\n".join(parts) + "\n"
