"""The contenders that ship with the package: the two floors and deputy_runtime itself.

Peers (PydanticAI, OpenAI Agents SDK) live in ``benchmarks/peers`` and are added by the
full driver; ``deputy-runtime bench`` needs nothing beyond the package.
"""

from __future__ import annotations

from ._runner import ContenderSpec

__all__ = ["ANYIO_FLOOR", "ASYNCIO_FLOOR", "BUILTIN", "DEPUTY"]

ASYNCIO_FLOOR = ContenderSpec(
    key="asyncio_floor",
    label="asyncio floor",
    target="deputy_runtime._bench._floors:create_asyncio",
    floor=True,
)
ANYIO_FLOOR = ContenderSpec(
    key="anyio_floor",
    label="anyio floor",
    target="deputy_runtime._bench._floors:create_anyio",
    floor=True,
)
DEPUTY = ContenderSpec(
    key="deputy_runtime",
    label="deputy_runtime",
    target="deputy_runtime._bench._deputy:create",
)

#: What ``deputy-runtime bench`` measures, in table order.
BUILTIN = (ASYNCIO_FLOOR, ANYIO_FLOOR, DEPUTY)
