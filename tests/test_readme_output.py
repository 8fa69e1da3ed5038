"""The output the README's Quickstart shows is what its first command prints."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.cli._runhelp import offline_env

ROOT = Path(__file__).resolve().parent.parent
IDS = re.compile(r"delegation_[0-9a-f]{8}")
# What depends on the checkout's files (counts, listings, first match) is elided with
# "..." in the README; a shown line matches when the printed one begins with its text up
# to the first number or "...".
VOLATILE = re.compile(r"\d+ (entries listed|line\(s\) match)")


def _shown_output() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    quickstart = text[text.index("## Quickstart") : text.index("## Embedding")]
    block = re.search(r"```text\n(.*?)```", quickstart, re.S)
    assert block is not None, "the Quickstart shows no output"
    return block.group(1).splitlines()


def _readme_command() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first = text[text.index("```bash\n") + 8 :].splitlines()[0]
    run = first.split(" && ")[-1]
    match = re.fullmatch(r"\.venv/bin/python -m deputy_runtime run --agents (\S+) \"(.+)\"", run)
    assert match is not None, run
    return [sys.executable, "-m", "deputy_runtime", "run", "--agents", match[1], match[2]]


def _prefix(line: str) -> str:
    volatile = VOLATILE.search(line)
    cut = min(
        [i for i in (line.find("..."), volatile.start() if volatile else -1) if i >= 0],
        default=len(line),
    )
    return IDS.sub("delegation_ID", line[:cut])


def test_readme_quickstart_output_matches_the_command() -> None:
    done = subprocess.run(
        _readme_command(),
        cwd=ROOT,
        env=offline_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    printed = done.stdout.splitlines()
    tail = printed[printed.index(next(p for p in printed if p.startswith("delegation "))) :]
    shown = _shown_output()
    assert len(tail) == len(shown), (tail, shown)
    for want, got in zip(shown, tail, strict=True):
        normal = IDS.sub("delegation_ID", got)
        assert normal.startswith(_prefix(want)), (want, got)
