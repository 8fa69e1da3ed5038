"""``deputy-runtime budget create|show|reset|delete NAME --redis URL``: shared budgets.

A shared budget is a ledger in Redis with limits of its own. It is created once (here, or
by a program opening a :class:`~deputy_runtime.redis.RedisBudget` with limits); every
``run`` and ``serve`` given ``--shared-budget NAME`` then draws from it as it is, so its
size never depends on which process happened to start first.

Exit status: 0 done; 1 Redis refused (no such budget, other limits, reservations held)
or cannot be reached; 2 bad arguments or the ``redis`` extra is missing.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any

import anyio

from .._extras import install_hint

__all__ = ["LIMIT_OPTIONS", "budget"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
#: ``budget create`` option -> ledger field.
LIMIT_OPTIONS = {
    "max_requests": "requests",
    "max_tool_calls": "tool_calls",
    "max_input_tokens": "input_tokens",
    "max_output_tokens": "output_tokens",
    "max_cost_usd": "cost_usd",
}


def budget(args: argparse.Namespace) -> int:
    """Run one ``budget`` action; returns the exit status."""
    prog = f"deputy-runtime budget {args.action}"
    try:
        from ..errors import CoordinationError
        from ..redis import RedisBudget
    except ImportError as exc:
        print(f"{prog}: needs the redis extra ({install_hint('redis')}): {exc}", file=sys.stderr)
        return EXIT_USAGE
    limits: dict[str, int | float | None] | None = None
    if args.action == "create":
        limits = {f: getattr(args, o) for o, f in LIMIT_OPTIONS.items() if getattr(args, o)}
        if not limits:
            print(
                f"{prog}: give at least one limit, e.g. --max-requests 150 (see "
                "deputy-runtime budget create --help)",
                file=sys.stderr,
            )
            return EXIT_USAGE
    try:
        ledger = RedisBudget(args.redis, args.name, limits, namespace=args.redis_namespace)
    except (ValueError, TypeError) as exc:
        text = str(exc)
        if text.startswith("namespace"):
            option = "--redis-namespace"
        elif text.startswith("url"):
            option = "--redis"
        else:
            option = "NAME"
        print(f"{prog}: {option}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return anyio.run(_act, ledger, args, prog)
    except CoordinationError as exc:
        print(f"{prog}: {str(exc).splitlines()[0]}".replace("--redis URL", f"--redis {args.redis}"),
              file=sys.stderr)  # fmt: skip
        return EXIT_FAILED


async def _act(ledger: Any, args: argparse.Namespace, prog: str) -> int:
    async with ledger.connection:
        if args.action == "create":
            created = await ledger.ensure()
            state = await ledger.state()
            verb = "created" if created else "exists already with these limits; unchanged"
            print(f"budget {args.name!r} {verb}: {_limits_text(state.limit.as_dict())}")
            return EXIT_OK
        if args.action == "reset":
            await ledger.reset()
            print(f"budget {args.name!r} reset: nothing used, nothing reserved")
            return EXIT_OK
        if args.action == "delete":
            await ledger.delete()
            print(f"budget {args.name!r} deleted")
            return EXIT_OK
        state = await ledger.state()
    if args.json:
        print(json.dumps(_state_data(state)))
    else:
        print(_state_table(state))
    return EXIT_OK


def _limits_text(limits: Mapping[str, int | float | None]) -> str:
    shown = [f"{field} {value}" for field, value in limits.items() if value is not None]
    return ", ".join(shown) or "no limits (usage is counted)"


def _state_data(state: Any) -> dict[str, Any]:
    return {
        "name": state.name,
        "holders": state.holders,
        "limit": state.limit.as_dict(),
        "remaining": state.remaining.as_dict(),
        "reserved": state.reserved.as_dict(),
        "used": state.used.as_dict(),
    }


def _state_table(state: Any) -> str:
    rows: list[tuple[str, ...]] = [("field", "limit", "used", "reserved", "remaining")]
    for field in LIMIT_OPTIONS.values():
        values = (
            getattr(state.limit, field),
            getattr(state.used, field),
            getattr(state.reserved, field),
            getattr(state.remaining, field),
        )
        rows.append((field, *("-" if v is None else _number(v) for v in values)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [f"budget {state.name!r}: {state.holders} reservation(s) held"]
    for row in rows:
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def _number(value: int | float) -> str:
    return f"{value:.6f}".rstrip("0").rstrip(".") if isinstance(value, float) else str(value)
