"""The service's building blocks without a server: tokens, rate, ceilings, the event log."""

from __future__ import annotations

import anyio
import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from deputy_runtime import LeadAgent, PermissionMode, agent_definition, chat
from deputy_runtime.runtime import MODE_TRANSITIONS
from deputy_runtime.service.auth import bearer_token, check_token_text, match_token
from deputy_runtime.service.config import (
    Resolved,
    RunRequest,
    RunRequestError,
    ServiceConfig,
    resolve_request,
)
from deputy_runtime.service.eventlog import EventLog
from deputy_runtime.service.ratelimit import RateLimiter
from deputy_runtime.service.runs import (
    RunManager,
    RunSetupError,
    RunStatus,
    ServiceBusyError,
    ServiceClosingError,
)

TOKENS = ("first-token-0123456789", "second-token-0123456789")
MODES = ("readonly", "plan", "standard", "full")


@given(st.text(max_size=40))
def test_only_a_configured_token_matches(presented: str) -> None:
    expected = TOKENS.index(presented) if presented in TOKENS else None
    assert match_token(presented, TOKENS) == expected


@given(st.sampled_from(TOKENS), st.text(min_size=1, max_size=5), st.integers(0, 22))
def test_a_token_changed_anywhere_does_not_match(token: str, insert: str, at: int) -> None:
    changed = token[:at] + insert + token[at:]
    if changed not in TOKENS:
        assert match_token(changed, TOKENS) is None
    if at < len(token):
        assert match_token(token[:at], TOKENS) is None  # every proper prefix is refused


def test_bearer_header_parsing() -> None:
    assert bearer_token("Bearer abc") == "abc"
    assert bearer_token("bearer   abc ") == "abc"
    assert bearer_token("Basic abc") is None
    assert bearer_token("Bearer") is None
    assert bearer_token(None) is None
    assert match_token(None, TOKENS) is None


def test_configured_tokens_must_be_long_and_printable() -> None:
    assert check_token_text("  " + TOKENS[0] + "\n", "env") == TOKENS[0]
    with pytest.raises(ValueError, match="env: a token must be at least 16"):
        check_token_text("short", "env")
    with pytest.raises(ValueError, match="printable ASCII"):
        check_token_text("a token with spaces in it", "env")


def test_the_rate_limiter_allows_a_burst_then_the_rate() -> None:
    now = [0.0]
    limiter = RateLimiter(rate=2.0, burst=3, clock=lambda: now[0])
    assert [limiter.take(1) for _ in range(3)] == [None, None, None]
    assert limiter.take(1) == 1  # half a second to the next one: rounded up
    assert limiter.take(2) is None  # another client has its own bucket
    now[0] += 0.5
    assert limiter.take(1) is None
    assert limiter.take(1) == 1
    now[0] += 100.0  # refills only up to the burst
    assert [limiter.take(1) for _ in range(4)] == [None, None, None, 1]


@given(
    server_mode=st.sampled_from(MODES),
    server_requests=st.integers(1, 1000),
    server_tokens=st.none() | st.integers(1, 10**6),
    mode=st.none() | st.sampled_from(MODES),
    requests=st.none() | st.integers(1, 2000),
    tokens=st.none() | st.integers(1, 2 * 10**6),
)
def test_a_request_never_widens_the_servers_ceilings(
    server_mode: str,
    server_requests: int,
    server_tokens: int | None,
    mode: str | None,
    requests: int | None,
    tokens: int | None,
) -> None:
    config = ServiceConfig(
        permission_mode=server_mode,  # type: ignore[arg-type]
        max_requests=server_requests,
        max_total_tokens=server_tokens,
    )
    request = RunRequest(
        task="t",
        permission_mode=mode,  # type: ignore[arg-type]
        max_requests=requests,
        max_total_tokens=tokens,
    )
    too_wide = (
        (mode or server_mode) not in MODE_TRANSITIONS[PermissionMode(server_mode)]
        or (requests or server_requests) > server_requests
        or (server_tokens is not None and tokens is not None and tokens > server_tokens)
    )
    if too_wide:
        with pytest.raises(RunRequestError, match=r"above the server's|is wider than"):
            resolve_request(request, config, ("a",))
        return
    resolved = resolve_request(request, config, ("a",))
    assert resolved.permission_mode in MODE_TRANSITIONS[PermissionMode(server_mode)]
    assert resolved.limits.max_requests is not None
    assert resolved.limits.max_requests <= server_requests
    if server_tokens is not None:
        assert resolved.limits.max_total_tokens is not None
        assert resolved.limits.max_total_tokens <= server_tokens
    # what was asked for within the ceilings is what the run gets
    assert resolved.permission_mode == (mode or server_mode)
    assert resolved.limits.max_requests == (requests or server_requests)


def test_unknown_fields_and_wrong_types_name_the_field() -> None:
    with pytest.raises(msgspec.ValidationError, match=r"\$\.max_requests"):
        msgspec.json.decode(b'{"task": "x", "max_requests": "9"}', type=RunRequest)
    with pytest.raises(msgspec.ValidationError, match="colour"):
        msgspec.json.decode(b'{"task": "x", "colour": 1}', type=RunRequest)


def test_agents_are_checked_and_deduplicated() -> None:
    config = ServiceConfig()
    request = RunRequest(task="t", agents=("b", "a", "b"))
    assert resolve_request(request, config, ("a", "b", "c")).agents == ("b", "a")
    with pytest.raises(RunRequestError, match=r"agents\[1\]: no agent named 'z'"):
        resolve_request(RunRequest(task="t", agents=("a", "z")), config, ("a",))


def test_the_event_log_keeps_the_newest_and_counts_what_it_dropped() -> None:
    log = EventLog(capacity=3)
    for n in range(1, 6):
        assert log.append(b"e%d" % n) == n
    assert log.since(0) == (2, [(3, b"e3"), (4, b"e4"), (5, b"e5")])
    assert log.since(2) == (0, [(3, b"e3"), (4, b"e4"), (5, b"e5")])
    assert log.since(4) == (0, [(5, b"e5")])
    assert log.since(5) == (0, [])
    assert log.since(99) == (0, [])
    log.close()
    with pytest.raises(RuntimeError, match="closed"):
        log.append(b"late")


@pytest.mark.anyio
async def test_readers_wake_on_append_and_on_close() -> None:
    log = EventLog(capacity=10)
    woken: list[int] = []

    async def reader() -> None:
        after = 0
        while True:
            await log.wait_beyond(after)
            _, items = log.since(after)
            if not items and log.closed:
                return
            after = items[-1][0]
            woken.append(after)

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        await anyio.wait_all_tasks_blocked()
        log.append(b"one")
        await anyio.wait_all_tasks_blocked()
        log.append(b"two")
        log.append(b"three")
        await anyio.wait_all_tasks_blocked()
        log.close()
    assert woken == [1, 3]


def _manager_lead(resolved: Resolved) -> LeadAgent:
    helper = agent_definition("helper", "Helps.", "You help.", max_requests=2)
    return LeadAgent(chat("test"), [helper], usage_limits=resolved.limits)


@pytest.mark.anyio
async def test_an_interrupt_before_the_run_task_starts_is_not_lost() -> None:
    config = ServiceConfig()
    resolved = resolve_request(RunRequest(task="help"), config, ("helper",))
    async with anyio.create_task_group() as tg:
        manager = RunManager(config, agents=("helper",), make_lead=_manager_lead, task_group=tg)
        run = manager.start(0, resolved)
        run.interrupt()  # synchronously: the run's task has not begun yet
        await run.done.wait()
    assert run.status is RunStatus.INTERRUPTED
    assert run.lead.last_result is not None
    assert run.lead.last_result.usage.requests == 0
    assert run.lead.list_subagents() == []
    assert not manager.active


@pytest.mark.anyio
async def test_the_manager_bounds_active_runs_and_refuses_after_shutdown() -> None:
    config = ServiceConfig(max_runs=1)
    resolved = resolve_request(RunRequest(task="help"), config, ("helper",))
    async with anyio.create_task_group() as tg:
        manager = RunManager(config, agents=("helper",), make_lead=_manager_lead, task_group=tg)
        first = manager.start(0, resolved)
        with pytest.raises(ServiceBusyError, match="--max-runs"):
            manager.start(0, resolved)
        await first.done.wait()
        assert first.status is RunStatus.COMPLETED
        assert manager.get(0, first.id) is first
        assert manager.get(1, first.id) is None  # another client's run is not visible
        await manager.shutdown()
        with pytest.raises(ServiceClosingError):
            manager.start(0, resolved)


@given(
    rate=st.floats(0.1, 50.0),
    burst=st.integers(1, 20),
    steps=st.lists(st.floats(0.0, 2.0), min_size=1, max_size=200),
)
def test_the_rate_limiter_never_allows_more_than_burst_plus_rate(
    rate: float, burst: int, steps: list[float]
) -> None:
    now = [0.0]
    limiter = RateLimiter(rate=rate, burst=burst, clock=lambda: now[0])
    allowed = 0
    for step in steps:
        now[0] += step
        wait = limiter.take(7)
        if wait is None:
            allowed += 1
        else:
            assert wait >= 1
    assert allowed <= burst + rate * now[0] + 1e-6


@pytest.mark.anyio
async def test_a_lead_that_cannot_be_built_leaves_nothing_behind() -> None:
    def broken(resolved: Resolved) -> LeadAgent:
        raise ValueError("no model today")

    config = ServiceConfig()
    resolved = resolve_request(RunRequest(task="help"), config, ("helper",))
    async with anyio.create_task_group() as tg:
        manager = RunManager(config, agents=("helper",), make_lead=broken, task_group=tg)
        with pytest.raises(RunSetupError, match="could not build the lead: ValueError: no model"):
            manager.start(0, resolved)
        assert not manager.active
