"""The delegation-overhead benchmark harness behind ``deputy-runtime bench``.

It lives inside the package so the command works from an installed wheel; the full
comparison with other frameworks (``benchmarks/run.py``) reuses it with extra contenders.
"""

from ._contenders import BUILTIN
from ._report import render
from ._runner import FULL, QUICK, run_benchmarks

__all__ = ["BUILTIN", "FULL", "QUICK", "render", "run_benchmarks"]
