"""Every option of every subcommand says what it does and, when it has one, its default."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

from deputy_runtime import __version__
from deputy_runtime.cli import _parser
from tests.cli._runhelp import run_cli


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = _parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


def test_every_option_has_help_and_states_its_default() -> None:
    missing: list[str] = []
    for name, sub in _subparsers().items():
        for action in sub._actions:
            if not action.option_strings or action.dest == "help":
                continue
            where = f"{name} {action.option_strings[0]}"
            text = action.help or ""
            if not text:
                missing.append(f"{where}: no help")
                continue
            default = action.default
            if default not in (None, False, [], argparse.SUPPRESS) and "default" not in text:
                missing.append(f"{where}: default {default!r} not stated")
    assert not missing, "\n".join(missing)


def test_version_prints_the_package_version(tmp_path: Path) -> None:
    done = run_cli("--version", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"deputy-runtime {__version__}"


def test_a_bad_value_is_one_line_not_the_usage(tmp_path: Path) -> None:
    done: subprocess.CompletedProcess[str] = run_cli(
        "run", "--max-requests", "0", "Do it", cwd=tmp_path
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "deputy-runtime run: argument --max-requests: expected a whole number of at least 1, "
        "got '0' (see deputy-runtime run --help)"
    ]
    assert "usage:" not in done.stderr


def test_a_missing_agents_directory_names_the_flag(tmp_path: Path) -> None:
    done = run_cli("run", "Do it", cwd=tmp_path)
    assert done.returncode == 2
    assert "--agents '.deputy/agents' does not exist" in done.stderr, done.stderr
    assert "point --agents at a directory" in done.stderr, done.stderr
    assert "Model:" not in done.stdout + done.stderr


def test_serve_help_points_to_something_installed(tmp_path: Path) -> None:
    done = run_cli("serve", "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "python -m pydoc deputy_runtime.service" in " ".join(done.stdout.split())
    pydoc = run_cli_module("pydoc", "deputy_runtime.service", cwd=tmp_path)
    assert pydoc.returncode == 0, pydoc.stderr
    assert "deputy_runtime.service" in pydoc.stdout


def run_cli_module(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    import sys

    from tests.cli._runhelp import offline_env

    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=cwd,
        env=offline_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
