"""Tool naming: mcp__<server>__<tool>, always valid, unique and stable (property tests)."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from deputy_runtime.mcp import expand_mcp_names, mcp_tool_names
from deputy_runtime.runtime._permissions import normalize_tool_name
from deputy_runtime.tools._tool import TOOL_NAME_PATTERN

servers = st.from_regex(r"\A[A-Za-z0-9-]{1,8}(_[A-Za-z0-9-]{1,8}){0,2}\Z")
tool_names = st.lists(st.text(min_size=1, max_size=90), min_size=1, max_size=12)


def test_plain_names_keep_their_shape() -> None:
    names = mcp_tool_names("context7", ["resolve-library-id", "get-library-docs"])
    assert names == {
        "resolve-library-id": "mcp__context7__resolve-library-id",
        "get-library-docs": "mcp__context7__get-library-docs",
    }


def test_invalid_characters_become_underscores() -> None:
    assert mcp_tool_names("s", ["shout.loud"]) == {"shout.loud": "mcp__s__shout_loud"}
    assert mcp_tool_names("s", ["ünï cödé"]) == {"ünï cödé": "mcp__s___n__c_d_"}


def test_clashes_and_long_names_get_a_hash_suffix() -> None:
    names = mcp_tool_names("s", ["a.b", "a_b", "A-B", "x" * 80])
    # "A-B" sorts first, so it keeps the plain name; the other two fold to the same key.
    assert names["A-B"] == "mcp__s__A-B"
    assert re.fullmatch(r"mcp__s__a_b_[0-9a-f]{8}", names["a.b"])
    assert re.fullmatch(r"mcp__s__a_b_[0-9a-f]{8}", names["a_b"])
    assert len({normalize_tool_name(n) for n in names.values()}) == 4
    long_name = names["x" * 80]
    assert len(long_name) == 64
    assert re.fullmatch(r"mcp__s__x+_[0-9a-f]{8}", long_name)


@given(servers, tool_names)
def test_names_are_valid_unique_and_prefixed(server: str, originals: list[str]) -> None:
    names = mcp_tool_names(server, originals)
    assert set(names) == set(originals)
    for name in names.values():
        assert TOOL_NAME_PATTERN.match(name)
        assert name.startswith(f"mcp__{server}__")
    # Unique even as the permission lists compare names (lowercased, punctuation folded),
    # so allowing or denying one tool never covers another tool of the same server.
    loose = [normalize_tool_name(n) for n in names.values()]
    assert len(set(loose)) == len(loose)


@given(servers, tool_names)
def test_names_do_not_depend_on_listing_order(server: str, originals: list[str]) -> None:
    assert mcp_tool_names(server, originals) == mcp_tool_names(server, list(reversed(originals)))


def test_whole_server_entries_expand_to_that_servers_tools() -> None:
    available = ["mcp__gh__list", "mcp__gh__create", "mcp__ghx__list", "read_file"]
    assert expand_mcp_names(["mcp__gh", "read_file"], available) == (
        "mcp__gh__list",
        "mcp__gh__create",
        "read_file",
    )
    assert expand_mcp_names(["mcp__gh__*"], available) == ("mcp__gh__list", "mcp__gh__create")
    # A concrete name is kept as written; an unknown server expands to nothing.
    assert expand_mcp_names(["mcp__gh__list", "mcp__none"], available) == ("mcp__gh__list",)
    assert expand_mcp_names(["mcp__gh__li*"], available) == ("mcp__gh__li*",)
