"""The web tools against a real loopback HTTP server (and the domain rules as properties)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deputy_runtime.errors import ToolArgumentError, ToolDefinitionError
from deputy_runtime.tools import SearchResult, WebLimits, WebRules, tools_web
from tests.chat.loopback import LoopbackServer, Reply, Seen

pytestmark = pytest.mark.anyio

#: Loopback is private: the tests allow it, as a host testing its own pages would.
LOCAL = WebRules(allow_private=True)
PAGE = b"""<html><head><title>T</title><style>p {color: red}</style>
<script>alert('x')</script></head><body><h1>Notes</h1><p>First <b>point</b>.</p>
<ul><li>one</li><li>two</li></ul></body></html>"""


def _html(body: bytes = PAGE, status: int = 200, **headers: str) -> Reply:
    return Reply(status, {"content-type": "text/html; charset=utf-8", **headers}, body)


async def test_a_page_is_read_as_markdown_headed_by_its_url_and_prompt() -> None:
    fetch, _ = tools_web(rules=LOCAL)
    with LoopbackServer([_html()]) as server:
        out = await fetch.function(url=f"{server.url}/notes", prompt="the points")
    head, text = out.split("\n\n", 1)
    assert head == f"Fetched {server.url}/notes (for: the points)"
    assert text.startswith("Title: T\n\n# Notes")
    assert "First **point**." in text
    assert "* one" in text or "- one" in text
    assert "alert" not in text
    assert "color" not in text


async def test_redirects_are_followed_and_each_hop_is_checked() -> None:
    fetch, _ = tools_web(rules=LOCAL)
    with LoopbackServer([Reply(302, {"location": "/final"}), _html()]) as server:
        out = await fetch.function(url=server.url + "/start", prompt="p")
        assert out.startswith(f"Fetched {server.url}/final")
        assert [r.path for r in server.requests] == ["/start", "/final"]

    def loop(seen: Seen) -> Reply:
        return Reply(302, {"location": "/again"})

    fetch, _ = tools_web(rules=LOCAL, limits=WebLimits(max_redirects=2))
    with LoopbackServer(loop) as server:
        with pytest.raises(ToolArgumentError, match="redirected more than 2 times"):
            await fetch.function(url=server.url, prompt="p")
        assert len(server.requests) == 3
    # A redirect to a denied host is refused before it is followed.
    fetch, _ = tools_web(rules=WebRules(allow_private=True, deny=("example.com",)))
    away = Reply(302, {"location": "http://docs.example.com/x"})
    with (
        LoopbackServer([away]) as server,
        pytest.raises(ToolArgumentError, match=r"docs\.example\.com is denied"),
    ):
        await fetch.function(url=server.url, prompt="p")


async def test_size_type_and_status_are_bounded() -> None:
    fetch, _ = tools_web(rules=LOCAL, limits=WebLimits(max_bytes=1000, max_chars=50))
    big = Reply(200, {"content-type": "text/plain"}, b"y" * 100_000)
    with LoopbackServer([big]) as server:
        out = await fetch.function(url=server.url, prompt="p")
    assert "y" * 50 + "\n\n[the page was longer" in out
    assert out.endswith("[cut at 50 characters]")
    with (
        LoopbackServer([Reply(200, {"content-type": "image/png"}, b"\x89PNG")]) as server,
        pytest.raises(ToolArgumentError, match="is image/png; only text"),
    ):
        await fetch.function(url=server.url, prompt="p")
    with (
        LoopbackServer([_html(status=404)]) as server,
        pytest.raises(ToolArgumentError, match="answered HTTP 404"),
    ):
        await fetch.function(url=server.url, prompt="p")
    slow = tools_web(rules=LOCAL, limits=WebLimits(timeout=0.5))[0]
    # The server would answer in a minute; the limit gives up long before.
    with (
        LoopbackServer([Reply(200, {"content-type": "text/plain"}, b"x", delay=60)]) as s,
        pytest.raises(ToolArgumentError, match=r"did not answer within 0\.5 s"),
    ):
        await slow.function(url=s.url, prompt="p")


async def test_private_addresses_and_odd_urls_are_refused_by_default() -> None:
    fetch, _ = tools_web()
    with LoopbackServer([_html()]) as server:
        with pytest.raises(ToolArgumentError, match="is a loopback address"):
            await fetch.function(url=server.url, prompt="p")
        assert server.requests == []  # refused before connecting
    for url, message in [
        ("file:///etc/passwd", "only http and https"),
        ("http://user:pw@example.com/", "user info"),
        ("http://10.1.2.3/", "is a private address"),
        ("http://169.254.169.254/latest/meta-data", "is a link-local address"),
        ("http://[::1]:8080/", "is a loopback address"),
        ("http://[::ffff:127.0.0.1]/", "is a loopback address"),
        ("http://0.0.0.0/", "address"),
        ("http://example.com:99999/", "invalid port"),
    ]:
        with pytest.raises(ToolArgumentError, match=message):
            await fetch.function(url=url, prompt="p")


async def test_search_needs_a_backend_and_filters_by_domain() -> None:
    _, search = tools_web()
    with pytest.raises(RuntimeError, match="no search backend configured"):
        await search.function(query="python")

    class Backend:
        def __init__(self) -> None:
            self.asked: list[tuple[str, int]] = []

        async def search(self, query: str, *, max_results: int) -> Sequence[SearchResult]:
            self.asked.append((query, max_results))
            return [
                SearchResult("Docs", "https://docs.python.org/3/", "The docs."),
                SearchResult("Spam", "https://spam.example/", "Buy."),
                SearchResult("Blog", "https://blog.python.org/", "News."),
            ]

    backend = Backend()
    _, search = tools_web(rules=WebRules(deny=("spam.example",)), search=backend)
    out = await search.function(query="python", blocked_domains=["blog.python.org"])
    assert out == "1. Docs\n   https://docs.python.org/3/\n   The docs."
    assert backend.asked == [("python", 10)]
    out = await search.function(query="python", allowed_domains=["nowhere.org"])
    assert out == "No results for 'python'."
    with pytest.raises(ToolArgumentError, match="allowed_domains"):
        await search.function(query="python", allowed_domains=["not a domain"])


def test_lookalike_hosts_do_not_match_a_rule() -> None:
    rules = WebRules(deny=("example.com",))
    assert rules.refusal("docs.example.com") is not None
    for host in ("notexample.com", "example.com.evil.org", "example.co"):
        assert rules.refusal(host) is None, host


def test_bad_rules_and_limits_name_the_field() -> None:
    with pytest.raises(ToolDefinitionError, match=r"WebRules\.allow: 'http://x' is not a domain"):
        WebRules(allow=("http://x",))
    with pytest.raises(ToolDefinitionError, match=r"WebLimits\.timeout"):
        WebLimits(timeout=0)
    with pytest.raises(ToolDefinitionError, match=r"WebLimits\.max_bytes"):
        WebLimits(max_bytes=-1)


_LABEL = st.text(alphabet="abcxyz0-", min_size=1, max_size=5).filter(
    lambda s: not s.startswith("-") and not s.endswith("-")
)
_DOMAIN = st.lists(_LABEL, min_size=1, max_size=4).map(".".join)


@given(host=_DOMAIN, rule=_DOMAIN, sub=st.booleans())
def test_property_a_domain_rule_takes_exactly_the_domain_and_its_subdomains(
    host: str, rule: str, sub: bool
) -> None:
    rules = WebRules(deny=(rule,))
    expected = host == rule or host.endswith("." + rule)
    assert (rules.refusal(host) is not None) == expected
    assert (rules.refusal(host.upper() + ".") is not None) == expected  # case, trailing dot
    wild = WebRules(allow=(f"*.{rule}",))
    assert (wild.refusal(host) is None) == host.endswith("." + rule)


@given(host=_DOMAIN, allow=st.lists(_DOMAIN, max_size=3), deny=st.lists(_DOMAIN, max_size=3))
def test_property_deny_always_wins_and_allow_never_widens(
    host: str, allow: list[str], deny: list[str]
) -> None:
    rules = WebRules(allow=tuple(allow), deny=tuple(deny))
    denied = any(host == d or host.endswith("." + d) for d in deny)
    allowed = not allow or any(host == a or host.endswith("." + a) for a in allow)
    assert (rules.refusal(host) is None) == (allowed and not denied)
