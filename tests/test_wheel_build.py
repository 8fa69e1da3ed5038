"""``python -m build`` makes a wheel and an sdist, and the wheel installs and runs.

Slow (a build and a fresh virtual environment); the package's dependencies come from the
configured package index, as for any user installing the wheel.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def _tracked_copy(destination: Path) -> Path:
    files = (
        subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return destination


def test_build_makes_a_wheel_and_an_sdist_and_the_wheel_runs(tmp_path: Path) -> None:
    pytest.importorskip("build", reason="the test extra installs build")
    source = _tracked_copy(tmp_path / "src")
    dist = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    wheels = sorted(dist.glob("deputy_runtime-*-py3-none-any.whl"))
    sdists = sorted(dist.glob("deputy_runtime-*.tar.gz"))
    assert len(wheels) == 1, sorted(p.name for p in dist.iterdir())
    assert len(sdists) == 1, sorted(p.name for p in dist.iterdir())

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", str(wheels[0])],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    version = subprocess.run(
        [str(env_dir / "bin" / "deputy-runtime"), "--version"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert version.returncode == 0, version.stderr
    from deputy_runtime import __version__

    assert version.stdout.strip() == f"deputy-runtime {__version__}"
