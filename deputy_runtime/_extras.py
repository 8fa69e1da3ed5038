"""How to install an optional extra, said the same way by every message that needs one.

The package is not on a package index, so installing ``deputy-runtime[X]`` by name fails; an
extra comes either from a checkout (``pip install '.[X]'``) or from a built wheel
(``pip install 'dist/deputy_runtime-VERSION-py3-none-any.whl[X]'``).
"""

from __future__ import annotations

__all__ = ["install_hint"]


def install_hint(extra: str) -> str:
    """The install command for ``extra``, from a checkout and from a built wheel."""
    return (
        f"pip install '.[{extra}]' from a checkout, or "
        f"pip install 'dist/deputy_runtime-<version>-py3-none-any.whl[{extra}]' from a wheel"
    )
