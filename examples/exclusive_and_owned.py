"""Resource modes: one shared browser under an exclusive key, and per-delegation browsers.

Part 1, ``exclusive``: every sub-agent uses the *same* browser object, so only one may
drive it at a time. The lead delegates twice in one turn; the first delegation takes the
per-process lease on ``"browser"``, the overlapping one fails at once (ResourceBusyError,
returned to the lead's model as a tool error - no waiting, no model request). Once the
holder settles, the lease is free again and the next delegation gets it.

Part 2, ``owned``: a factory builds a fresh browser for every delegation and returns its
cleanup, which the runtime calls exactly once after the delegation settles - also when
it fails or is cancelled.

    python examples/exclusive_and_owned.py [asyncio|trio]

Offline: the models are ``scripted`` responders, so the output is deterministic.
"""

from __future__ import annotations

import itertools
import json
import sys
from typing import Any

import anyio

from deputy_runtime import (
    DelegationPolicy,
    DelegationResources,
    LeadAgent,
    Tool,
    agent_definition,
    chat,
    tool,
)
from deputy_runtime.chat import ContentToolResult, ModelRequest, reply, tool_call, tool_calls

_browser_ids = itertools.count(1)


class FakeBrowser:
    """Stands in for a real browser session: stateful, so it must not be shared freely."""

    def __init__(self) -> None:
        self.id = next(_browser_ids)
        self.page: str | None = None
        self.closed = 0

    def tools(self) -> tuple[Tool, ...]:
        @tool(open_world=True)
        def open_page(url: str) -> str:
            """Open a URL in the browser and return the page title."""
            self.page = url
            return f"browser {self.id} shows {url}"

        return (open_page,)

    def close(self) -> None:
        self.closed += 1


def _tool_results(request: ModelRequest) -> list[ContentToolResult]:
    last = request.turns[-1]
    return [c for c in last.contents if isinstance(c, ContentToolResult)]


async def browse(request: ModelRequest) -> Any:
    """A sub-agent's model: open the URL from the brief, then report what it saw."""
    await anyio.sleep(0.05)  # model latency: the delegations really overlap
    results = _tool_results(request)
    if results:
        return reply(str(results[0].value))
    task = json.loads(request.turns[-1].text)["brief"]["task"]
    return tool_call("open_page", {"url": task.split()[-1]})


def lead_model(*urls: str) -> Any:
    """The lead's model: delegate one task per URL in one turn, then summarise."""

    def respond(request: ModelRequest) -> Any:
        results = _tool_results(request)
        if not results:
            calls = [
                ("delegate_to_agent", {"agent_name": "browser_agent", "task": f"Open {u}"})
                for u in urls
            ]
            return tool_calls(*calls)
        # A failed delegation is a tool error; otherwise the outcome JSON has a status.
        ok = sum(1 for r in results if r.error is None and '"status":"completed"' in r.value)
        return reply(f"{ok} of {len(results)} delegations completed")

    return respond


async def exclusive() -> None:
    print("exclusive: one shared browser under resource_key='browser'")
    browser = FakeBrowser()
    # max_requests caps each delegation's share of the lead's budget: without it the
    # first delegation would reserve everything the lead has left.
    definition = agent_definition(
        "browser_agent",
        "Opens pages in the shared browser.",
        "Browse.",
        tools=browser.tools(),
        max_requests=3,
    )
    policy = DelegationPolicy(resource_mode="exclusive", resource_key="browser")
    for attempt, urls in enumerate([("a.example", "b.example"), ("c.example",)], start=1):
        script = {"lead": lead_model(*urls), "browser_agent": browse}
        lead = LeadAgent(chat("scripted", script=script), [definition], delegation_policy=policy)
        result = await lead.run(f"Visit {', '.join(urls)}")
        print(f"  turn {attempt}: {result.response}")
        for r in lead.list_subagents():
            why = f" - {r.error.splitlines()[0]}" if r.error else ""
            print(f"    {r.status:<9} {r.stop_reason:<12} {r.task}{why}")


async def owned() -> None:
    print("owned: a fresh browser per delegation, closed exactly once")
    browsers: list[FakeBrowser] = []

    def resources(agent: Any, definition: Any, context: Any) -> DelegationResources:
        browser = FakeBrowser()
        browsers.append(browser)
        return DelegationResources(tools=browser.tools(), cleanup=browser.close)

    definition = agent_definition(
        "browser_agent", "Opens pages in its own browser.", "Browse.", max_requests=3
    )
    policy = DelegationPolicy(resource_mode="owned", resources=resources)
    script = {"lead": lead_model("a.example", "b.example", "c.example"), "browser_agent": browse}
    lead = LeadAgent(chat("scripted", script=script), [definition], delegation_policy=policy)
    result = await lead.run("Visit three sites")
    print(f"  {result.response}")
    for browser in browsers:
        print(f"    browser {browser.id}: visited {browser.page}, closed {browser.closed} time(s)")
    assert len(browsers) == 3
    assert all(b.closed == 1 for b in browsers)  # the guarantee this example shows


async def main() -> int:
    await exclusive()
    await owned()
    return 0


if __name__ == "__main__":
    backend = sys.argv[1] if len(sys.argv) > 1 else "asyncio"
    sys.exit(anyio.run(main, backend=backend))
