"""The Redis client is optional: the package never imports it, and its absence is clear."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=False
    )


def test_importing_the_package_does_not_import_the_client() -> None:
    result = run(
        """
        import sys
        import deputy_runtime
        assert "coredis" not in sys.modules, "deputy_runtime imported coredis"
        """
    )
    assert result.returncode == 0, result.stderr


def test_without_the_extra_the_error_names_it() -> None:
    # Simulates the missing extra by blocking the import (it is installed here).
    result = run(
        """
        import sys
        sys.modules["coredis"] = None
        try:
            import deputy_runtime.redis
        except ImportError as exc:
            print(exc)
        else:
            raise SystemExit("imported without coredis")
        """
    )
    assert result.returncode == 0, result.stderr
    assert "pip install '.[redis]' from a checkout" in result.stdout
