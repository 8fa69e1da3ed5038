"""Definition discovery: ``agent_definitions(dir)`` vs ``yaml.load(..., CSafeLoader)``.

    python benchmarks/discovery.py [--quick] [--reps N] [--update-readme]

Each worker writes the same 1,000 canonical format-1 YAML definition files (written by
``agent_definition_write``, so every field is present) into a fresh temporary directory,
then times discovery of the whole directory. deputy_runtime applies every strictness rule
(file checks before and after open, UTF-8, one document, core tags only, no anchors or
duplicate keys, exact field types, name rules). The floor reads the same files in the same
sorted order and parses each with PyYAML's libyaml ``CSafeLoader``, checking nothing.
Target: at most 1.5x the floor.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

COUNT = 1000


def _write_definitions(count: int = COUNT) -> Path:
    from deputy_runtime.definitions import agent_definition, agent_definition_write

    directory = Path(tempfile.mkdtemp(prefix="deputy-discovery-"))
    atexit.register(shutil.rmtree, directory, True)
    modes = ("readonly", "standard", "plan", None)
    for i in range(count):
        definition = agent_definition(
            f"agent-{i:04d}",
            f"Agent number {i}: reviews one part of the code base and reports findings.",
            f"You are agent {i}.\nRead the files you are given.\nReport what you find.",
            model="inherit" if i % 2 else "openai/gpt-4.1-mini",
            disallowed_tools=["write_file"] if i % 3 == 0 else None,
            memory=[f"Project note {i}."] if i % 4 == 0 else None,
            max_requests=10 + i % 7 if i % 5 else None,
            permission_mode=modes[i % 4],
            params={"temperature": 0.2} if i % 6 == 0 else None,
        )
        agent_definition_write(definition, directory / f"agent-{i:04d}.yaml")
    return directory


class _Discovery:
    version = ""

    def __init__(self) -> None:
        self.directory = _write_definitions()

    def discover(self) -> int:
        raise NotImplementedError

    async def sequential(self) -> str:
        found = self.discover()
        return "done:1" if found == COUNT else f"found {found}"

    async def fanout(self, n: int) -> str:
        raise NotImplementedError


class YamlFloor(_Discovery):
    name = "yaml.load CSafeLoader"

    def __init__(self) -> None:
        import yaml

        super().__init__()
        self.version = f"PyYAML {yaml.__version__} (libyaml {yaml.__with_libyaml__})"
        self._load = yaml.load
        self._loader = yaml.CSafeLoader

    def discover(self) -> int:
        names = sorted(n for n in os.listdir(self.directory) if n.endswith((".yaml", ".yml")))
        loaded = []
        for name in names:
            with open(self.directory / name, encoding="utf-8") as file:
                loaded.append(self._load(file.read(), Loader=self._loader))
        return len(loaded)


class DeputyDiscovery(_Discovery):
    name = "agent_definitions"

    def __init__(self) -> None:
        from deputy_runtime import __version__
        from deputy_runtime.definitions import agent_definitions

        super().__init__()
        self.version = f"deputy_runtime {__version__}"
        self._discover = agent_definitions

    def discover(self) -> int:
        return len(self._discover(self.directory))


def yaml_floor(**_: Any) -> YamlFloor:
    return YamlFloor()


def deputy(**_: Any) -> DeputyDiscovery:
    return DeputyDiscovery()


def table(results: dict[str, Any], markdown: bool = False) -> str:
    seq = results["summary"]["sequential"]
    header = ["contender", f"ms per discovery of {COUNT:,} files, median [min-max]", "x floor"]
    rows = []
    for key, label in (("yaml_floor", "yaml.load CSafeLoader"), ("deputy", "agent_definitions")):
        if key in seq:
            s = seq[key]["us"]
            paired = seq[key].get("ratios", {}).get("yaml_floor")  # same-repetition ratio
            ratio = "-" if paired is None else f"{paired:.2f}x"
            ms = f"{s['median'] / 1000:.1f} [{s['min'] / 1000:.1f}-{s['max'] / 1000:.1f}]"
            rows.append([label, ms, ratio])
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|---|---:|---:|"]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in [header, *rows]
    )


def main(argv: list[str] | None = None) -> int:
    from deputy_runtime._bench._runner import BenchConfig, ContenderSpec, run_benchmarks

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--update-readme", action="store_true", help="rewrite README tables")
    args = parser.parse_args(argv)
    reps = args.reps or (3 if args.quick else 5)
    config = BenchConfig(
        sizes=(), memory_sizes=(), reps=reps, memory_reps=0, seq_min_time=1.0, seq_warmup=2
    )
    here = Path(__file__).resolve()
    specs = [
        ContenderSpec("yaml_floor", "yaml.load CSafeLoader", f"{here}:yaml_floor", floor=True),
        ContenderSpec("deputy", "agent_definitions", f"{here}:deputy"),
    ]
    results = run_benchmarks(config, specs, lambda line: print(line, file=sys.stderr, flush=True))
    results["meta"]["benchmark"] = "discovery"
    from run import source_revision, update_readme

    results["meta"]["source"] = source_revision()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    mode = "quick" if args.quick else "full"
    out = args.out or HERE / "results" / f"discovery-{mode}-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(table(results))
    for error in results["errors"]:
        print(f"ERROR: {error['error']}")
    if args.update_readme:
        meta = results["meta"]
        block = (
            f"Run {meta['started_utc']} ({meta['seconds']:.0f} s): {meta['implementation']} "
            f"{meta['python']}, {meta['cpu_count']} CPUs; {reps} repetitions, each in a fresh "
            f"worker process; source {meta['source']}.\n\n{table(results, markdown=True)}"
        )
        update_readme(block, "<!-- discovery:start -->", "<!-- discovery:end -->")
    return 1 if results["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
