"""Web tools: ``web_fetch`` (Claude Code's WebFetch) and ``web_search`` (its WebSearch).

``web_fetch(url, prompt)`` fetches one page over httpx and answers with it as markdown
(HTML converted by ``markdownify``, the ``web`` extra), headed by the final URL and the
prompt it was fetched for; Claude Code hands the page to a second model with the prompt,
here the calling model reads the page itself. Everything about the fetch is bounded:

* **Where.** ``http``/``https`` only, no user info in the URL; the domain rules (deny
  first, then allow when given) are checked on every hop, redirects included; a host that
  resolves to a private, loopback, link-local or otherwise non-public address is refused
  unless ``allow_private=True`` (the check runs on each hop's resolved addresses, so
  DNS answers that change between the check and the connection are not caught: give an
  allow list where that matters).
* **How much.** At most :attr:`WebLimits.max_bytes` of body (the rest is not read), a
  total time limit, at most :attr:`WebLimits.max_redirects` redirects, and at most
  :attr:`WebLimits.max_chars` characters of answer.
* **What.** Only text: ``text/*``, JSON, XML and XHTML; anything else is refused by type.

``web_search(query, allowed_domains, blocked_domains)`` asks the host's
:class:`SearchBackend`; without one it is a tool error saying how to configure one. Its
results pass the same domain rules.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import math
import re
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

import anyio
import msgspec

from .._extras import install_hint
from ..errors import ToolArgumentError, ToolDefinitionError
from ._tool import Tool

__all__ = ["SearchBackend", "SearchResult", "WebLimits", "WebRules", "tools_web"]

_TEXT_TYPES = ("application/json", "application/xml", "application/xhtml+xml")
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_DOMAIN = re.compile(r"^(\*\.)?([a-z0-9-]+\.)*[a-z0-9-]+\Z")


class WebLimits(msgspec.Struct, frozen=True):
    """Bounds of one ``web_fetch`` call.

    Attributes:
        max_bytes: Body bytes read at most (default 2 MiB); the rest is not read.
        timeout: Seconds the whole fetch may take, redirects included (default 30).
        max_redirects: Redirects followed at most (default 5).
        max_chars: Characters of answer at most (default 100,000); the rest is cut with a
            note.
    """

    max_bytes: int = 2 * 1024 * 1024
    timeout: float = 30.0
    max_redirects: int = 5
    max_chars: int = 100_000

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_redirects", "max_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ToolDefinitionError(f"WebLimits.{name} must be an int >= 0, got {value!r}")
        t = self.timeout
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t <= 0:
            raise ToolDefinitionError(f"WebLimits.timeout must be seconds > 0, got {t!r}")


class WebRules(msgspec.Struct, frozen=True):
    """Which hosts the web tools may reach.

    A rule is a domain: ``example.com`` takes the domain and every subdomain,
    ``*.example.com`` the subdomains only. ``deny`` is checked first; a non-empty
    ``allow`` then takes only what it lists.

    Attributes:
        allow: Domains the tools may reach (empty: any not denied).
        deny: Domains they may never reach.
        allow_private: Whether hosts on private, loopback or link-local addresses may be
            fetched (default no).
    """

    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    allow_private: bool = False

    def __post_init__(self) -> None:
        for field in ("allow", "deny"):
            value = getattr(self, field)
            if isinstance(value, str) or not isinstance(value, tuple | list):
                raise ToolDefinitionError(f"WebRules.{field} must be a list of domains")
            checked = tuple(_domain_rule(v, f"WebRules.{field}") for v in value)
            msgspec.structs.force_setattr(self, field, checked)

    def refusal(self, host: str) -> str | None:
        """Why ``host`` may not be reached (``None``: it may).

        Args:
            host: A host name (any case, a trailing dot allowed).

        Returns:
            The reason, naming the rule, or ``None``.
        """
        name = _normal_host(host)
        for rule in self.deny:
            if _matches(name, rule):
                return f"{name} is denied by the domain rule {rule!r}"
        if self.allow and not any(_matches(name, rule) for rule in self.allow):
            return f"{name} is not in the allowed domains ({', '.join(self.allow)})"
        return None


class SearchResult(msgspec.Struct, frozen=True):
    """One search hit: its title, URL and a snippet of its text."""

    title: str
    url: str
    snippet: str = ""


@runtime_checkable
class SearchBackend(Protocol):
    """What ``web_search`` asks: a search service the host configures."""

    async def search(self, query: str, *, max_results: int) -> Sequence[SearchResult]:
        """Search for ``query``.

        Args:
            query: What the model searches for.
            max_results: The most results wanted.

        Returns:
            The results, best first.
        """
        ...


def tools_web(
    *,
    rules: WebRules | None = None,
    limits: WebLimits | None = None,
    search: SearchBackend | None = None,
    transport: Any = None,
) -> tuple[Tool, Tool]:
    """The ``web_fetch`` and ``web_search`` tools (see the module docstring).

    Args:
        rules: Domain rules and whether private addresses may be reached.
        limits: Bounds of a fetch.
        search: The search service ``web_search`` uses (``None``: the tool says none is
            configured).
        transport: An ``httpx.AsyncBaseTransport`` (tests, proxies); httpx is imported
            on the first fetch, not with the package.

    Returns:
        ``(web_fetch, web_search)``: both read-only and open-world.

    Raises:
        ImportError: The ``web`` extra (markdownify) is not installed.
        ToolDefinitionError: An argument has the wrong type.
    """
    # Found now, imported on the first HTML page (with BeautifulSoup it costs ~50 ms).
    if importlib.util.find_spec("markdownify") is None:
        raise ImportError("tools_web needs markdownify: " + install_hint("web"))
    if rules is not None and not isinstance(rules, WebRules):
        raise ToolDefinitionError(f"rules must be a WebRules, got {type(rules).__name__}")
    if limits is not None and not isinstance(limits, WebLimits):
        raise ToolDefinitionError(f"limits must be a WebLimits, got {type(limits).__name__}")
    if search is not None and not isinstance(search, SearchBackend):
        raise ToolDefinitionError("search must have an async search(query, *, max_results)")
    web = _Web(rules or WebRules(), limits or WebLimits(), search, transport)
    fetch = Tool(
        name="web_fetch",
        description=(
            "Fetch a web page and read it as markdown. Give the URL and what you want "
            "from the page (prompt)."
        ),
        parameters={
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "The http(s) URL to fetch."},
                "prompt": {"type": "string", "description": "What to look for on the page."},
            },
            "required": ["url", "prompt"],
            "additionalProperties": False,
        },
        function=web.fetch,
        read_only=True,
        open_world=True,
    )
    find = Tool(
        name="web_search",
        description="Search the web; answers with titles, URLs and snippets.",
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 2},
                "allowed_domains": {"type": "array", "items": {"type": "string"}},
                "blocked_domains": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        function=web.search,
        read_only=True,
        open_world=True,
    )
    return fetch, find


class _Web:
    __slots__ = ("limits", "rules", "searcher", "transport")

    def __init__(
        self,
        rules: WebRules,
        limits: WebLimits,
        searcher: SearchBackend | None,
        transport: Any,
    ) -> None:
        self.rules = rules
        self.limits = limits
        self.searcher = searcher
        self.transport = transport

    async def fetch(self, url: str, prompt: str) -> str:
        import httpx  # ~40 ms: paid on the first fetch, not on import

        limits = self.limits
        with anyio.move_on_after(limits.timeout) as scope:
            async with httpx.AsyncClient(
                transport=self.transport, follow_redirects=False, timeout=limits.timeout
            ) as client:
                answer = await self._fetch(client, url, prompt)
        if scope.cancelled_caught:
            raise ToolArgumentError(
                f"argument 'url': {url} did not answer within {limits.timeout:g} s"
            )
        return answer

    async def _fetch(self, client: Any, url: str, prompt: str) -> str:
        limits = self.limits
        current = url
        for hop in range(limits.max_redirects + 1):
            await self._check(current, "url" if hop == 0 else "redirect")
            async with client.stream("GET", current, headers=_HEADERS) as response:
                if response.status_code in _REDIRECTS and "location" in response.headers:
                    current = str(response.url.join(response.headers["location"]))
                    continue
                if response.status_code >= 400:
                    raise ToolArgumentError(
                        f"argument 'url': {current} answered HTTP {response.status_code}"
                    )
                kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
                if not (kind.startswith("text/") or kind in _TEXT_TYPES):
                    raise ToolArgumentError(
                        f"argument 'url': {current} is {kind or 'of no stated type'}; only "
                        "text, HTML, JSON and XML are fetched"
                    )
                body, cut = await _read(response, limits.max_bytes)
                text = body.decode(response.encoding or "utf-8", errors="replace")
                return _answer(current, prompt, kind, text, cut, limits.max_chars)
        raise ToolArgumentError(
            f"argument 'url': {url} redirected more than {limits.max_redirects} times"
        )

    async def _check(self, url: str, what: str) -> None:
        parts = urlsplit(url)
        label = "argument 'url'" if what == "url" else f"a redirect to {url}"
        if parts.scheme not in ("http", "https"):
            raise ToolArgumentError(f"{label}: only http and https URLs are fetched, got {url!r}")
        if parts.username is not None or parts.password is not None:
            raise ToolArgumentError(f"{label}: a URL with user info is not fetched")
        host = parts.hostname
        if not host:
            raise ToolArgumentError(f"{label}: {url!r} names no host")
        refusal = self.rules.refusal(host)
        if refusal is not None:
            raise ToolArgumentError(f"{label}: {refusal}")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise ToolArgumentError(f"{label}: {url!r} has an invalid port") from None
        if not self.rules.allow_private:
            for address in await _addresses(host, port):
                if not address.is_global:
                    raise ToolArgumentError(
                        f"{label}: {host} is a {_kind(address)} address ({address}), which "
                        "the web tools do not reach (WebRules(allow_private=True) allows it)"
                    )

    async def search(
        self,
        query: str,
        allowed_domains: list[str] | None = None,
        blocked_domains: list[str] | None = None,
    ) -> str:
        if self.searcher is None:
            raise RuntimeError(
                "web_search has no search backend configured: the host passes one to "
                "tools_web(search=...) (an object with async search(query, *, "
                "max_results)); answer from what you know or fetch a known URL instead"
            )
        try:
            call = WebRules(allow=tuple(allowed_domains or ()), deny=tuple(blocked_domains or ()))
        except ToolDefinitionError as exc:
            raise ToolArgumentError(
                f"arguments 'allowed_domains'/'blocked_domains': {exc}"
            ) from None
        results = await self.searcher.search(query, max_results=10)
        kept = []
        for result in results:
            host = urlsplit(result.url).hostname or ""
            if self.rules.refusal(host) is None and call.refusal(host) is None:
                kept.append(result)
        if not kept:
            return f"No results for {query!r}."
        lines = [
            f"{i}. {r.title}\n   {r.url}\n   {r.snippet}".rstrip() for i, r in enumerate(kept, 1)
        ]
        return "\n".join(lines)


_HEADERS = {"accept": "text/html, text/markdown, text/plain, application/json;q=0.9, */*;q=0.1"}


async def _read(response: Any, cap: int) -> tuple[bytes, bool]:
    body = bytearray()
    async for chunk in response.aiter_bytes():
        room = cap - len(body)
        if len(chunk) > room:
            body.extend(chunk[:room])
            return bytes(body), True
        body.extend(chunk)
    return bytes(body), False


def _answer(url: str, prompt: str, kind: str, text: str, cut: bool, max_chars: int) -> str:
    if kind in ("text/html", "application/xhtml+xml"):
        text = _markdown(text)
    notes = []
    if cut:
        notes.append("[the page was longer; only its start was read]")
    if len(text) > max_chars:
        text = text[:max_chars]
        notes.append(f"[cut at {max_chars} characters]")
    head = f"Fetched {url} (for: {prompt})"
    return "\n\n".join([head, text, *notes])


def _markdown(html: str) -> str:
    """The page's text as markdown: scripts, styles and the head left out, the title
    kept as the first line."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title is not None else ""
    for tag in soup(["head", "script", "style", "noscript", "template", "iframe"]):
        tag.decompose()
    text = MarkdownConverter(heading_style="ATX").convert_soup(soup)
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    return f"Title: {title}\n\n{text}" if title else text


async def _addresses(host: str, port: int) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    try:
        literal = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        pass
    else:
        return [_unmapped(literal)]
    try:
        infos = await anyio.getaddrinfo(host, port)
    except OSError as exc:
        raise ToolArgumentError(f"argument 'url': {host} cannot be resolved ({exc})") from None
    found: list[Any] = []
    for info in infos:
        address = _unmapped(ipaddress.ip_address(str(info[4][0]).split("%")[0]))
        if address not in found:
            found.append(address)
    return found


def _unmapped(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An IPv4-mapped IPv6 address (``::ffff:127.0.0.1``) as the IPv4 address it is."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _kind(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_private:
        return "private"
    return "non-public"


def _normal_host(host: str) -> str:
    name = host.strip().rstrip(".").lower()
    try:
        return name.encode("idna").decode("ascii")
    except UnicodeError:
        return name


def _domain_rule(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise ToolDefinitionError(f"{where}: a domain must be text, got {type(value).__name__}")
    rule = _normal_host(value)
    if not _DOMAIN.match(rule):
        raise ToolDefinitionError(
            f"{where}: {value!r} is not a domain; expected e.g. 'example.com' or '*.example.com'"
        )
    return rule


def _matches(host: str, rule: str) -> bool:
    if rule.startswith("*."):
        return host.endswith(rule[1:])
    return host == rule or host.endswith("." + rule)
