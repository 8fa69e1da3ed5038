"""``deputy-runtime serve``: a long-lived, authenticated HTTP service that runs leads.

One process holds the definitions, the server's ceilings and every client's runs; a run
is a fresh :class:`~deputy_runtime.LeadAgent` per request, driven in the service's own
task group so it outlives the request that started it. Modules, one job each:
:mod:`.config` (the server's ceilings and a run request, validated at the boundary),
:mod:`.auth` (bearer tokens), :mod:`.ratelimit` (per-token request rate),
:mod:`.eventlog` (the bounded, resumable per-run event log), :mod:`.runs` (starting,
interrupting and shutting down runs), :mod:`.app` (the HTTP routes), :mod:`.page` (the
web view) and :mod:`.server` (Hypercorn on asyncio or trio, signals, graceful shutdown).
"""

from .config import RunRequest, ServiceConfig
from .runs import RunStatus

__all__ = ["RunRequest", "RunStatus", "ServiceConfig"]
