"""The docs a newcomer reads first say what the tool really needs and offers."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from deputy_runtime.cli import _parser

ROOT = Path(__file__).resolve().parent.parent


def _read(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def test_no_doc_installs_the_package_by_its_index_name() -> None:
    # The package is not on an index: `pip install 'deputy-runtime[x]'` fails in a fresh venv.
    pattern = re.compile(r"pip install ['\"]?deputy-runtime\[")
    offenders = [
        str(path.relative_to(ROOT))
        for folder in ("docs", "examples", "deputy_runtime")
        for path in (ROOT / folder).rglob("*")
        if path.suffix in {".md", ".py"} and pattern.search(path.read_text(encoding="utf-8"))
    ]
    if pattern.search(_read("README.md")):
        offenders.append("README.md")
    assert not offenders, offenders


def test_temporal_is_linked_from_readme_index_and_nav() -> None:
    assert "(docs/temporal.md)" in _read("README.md")
    assert "(temporal.md)" in _read("docs/index.md")
    assert re.search(r"^\s+- [^:]+: temporal\.md$", _read("mkdocs.yml"), re.M)


def test_readme_says_trio_is_an_extra() -> None:
    text = " ".join(_read("README.md").split())
    assert "with the `trio` extra (`pip install '.[trio]'`), on trio" in text


def test_cli_md_documents_every_run_option() -> None:
    doc = _read("docs/cli.md")
    parser = _parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    run = subparsers.choices["run"]
    missing = [
        option
        for action in run._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help" and f"`{option}" not in doc
    ]
    assert not missing, missing
