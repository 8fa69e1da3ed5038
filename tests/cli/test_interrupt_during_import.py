"""Ctrl-C while a command still imports its extras ends with one line, not a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.cli._runhelp import REPO_ROOT, offline_env

# A Ctrl-C cannot be timed to land inside an import from outside the process, so a finder
# on sys.meta_path raises KeyboardInterrupt exactly when temporalio is imported, as the
# SIGINT handler does when the key is pressed then.
SHIM = """
import sys
class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "temporalio" or name.startswith("temporalio."):
            raise KeyboardInterrupt
        return None
sys.meta_path.insert(0, Interrupt())
from deputy_runtime.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_ctrl_c_during_the_temporal_import_is_one_line(tmp_path: Path) -> None:
    agents = str(REPO_ROOT / "examples" / "agents")
    done = subprocess.run(
        [sys.executable, "-c", SHIM, "run", "--agents", agents, "--temporal", "x:1", "Go"],
        cwd=tmp_path,
        env=offline_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 130, (done.stdout, done.stderr)
    assert done.stderr == "deputy-runtime run: interrupted\n", done.stderr
    assert done.stdout == ""
