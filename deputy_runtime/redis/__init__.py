"""Cross-process exclusive leases, a shared budget ledger and a checkpoint store on Redis
(optional).

Needs the ``redis`` extra (``pip install '.[redis]'`` from a checkout), which brings the
anyio-based ``coredis`` client; importing :mod:`deputy_runtime` never imports it.
See ``docs/redis.md`` for configuration, guarantees and failure behaviour.
"""

from __future__ import annotations

from .._extras import install_hint

try:
    import coredis  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "deputy_runtime.redis needs the optional Redis client: install it with "
        + install_hint("redis")
    ) from exc

from ..errors import BudgetLedgerError, CoordinationError, CoordinationUnavailableError
from ._amounts import Amounts, LedgerState
from ._budget import RedisBudget
from ._checkpoints import RedisCheckpointStore
from ._connection import RedisConnection
from ._coordinator import RedisCoordinator
from ._keepalive import LostReason
from ._leases import Lease, LeaseLike, RedisLeases

__all__ = [
    "Amounts",
    "BudgetLedgerError",
    "CoordinationError",
    "CoordinationUnavailableError",
    "Lease",
    "LeaseLike",
    "LedgerState",
    "LostReason",
    "RedisBudget",
    "RedisCheckpointStore",
    "RedisConnection",
    "RedisCoordinator",
    "RedisLeases",
]
