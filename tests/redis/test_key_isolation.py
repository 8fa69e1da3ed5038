"""Redis key isolation as a property: distinct namespaces, budgets and lease keys never
share a Redis key, so one application or budget cannot touch another's state."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deputy_runtime.redis import RedisBudget, RedisLeases

URL = "redis://127.0.0.1:6379/0"  # never connected: only the key names are computed
# Names built from the pieces the key layout itself uses, so aliasing is easy to reach.
pieces = st.sampled_from(["a", "é", ":", "lease", "fence", "budget", "holds", "exp", "ended"])
text = st.lists(pieces, min_size=1, max_size=5).map("".join)


def redis_keys(kind: str, namespace: str, name: str) -> set[str] | None:
    """The keys a lease key or budget uses, or None when the names are refused."""
    try:
        if kind == "lease":
            return set(RedisLeases(URL, namespace=namespace).lease_keys(name))
        return set(RedisBudget(URL, name, {}, namespace=namespace).keys)
    except ValueError:
        return None


def near(value: str) -> st.SearchStrategy[str]:
    """The same name, a name extended by pieces, or an unrelated one."""
    return st.one_of(st.just(value), text.map(lambda tail: value + tail), text)


@given(data=st.data(), first=st.tuples(st.sampled_from(["lease", "budget"]), text, text))
def test_distinct_owners_never_share_a_redis_key(
    data: st.DataObject, first: tuple[str, str, str]
) -> None:
    second = (
        data.draw(st.sampled_from(["lease", "budget"])),
        data.draw(near(first[1])),
        data.draw(near(first[2])),
    )
    keys_a = redis_keys(*first)
    keys_b = redis_keys(*second)
    if keys_a is None or keys_b is None or first == second:
        return
    assert not keys_a & keys_b, (first, second)


@given(kind=st.sampled_from(["lease", "budget"]), namespace=text, name=text)
def test_every_key_names_its_one_owner(kind: str, namespace: str, name: str) -> None:
    """Each key parses back to exactly the (namespace, kind, name) that made it, so the
    key-to-owner mapping is one-to-one: no two owners can ever share a key."""
    keys = redis_keys(kind, namespace, name)
    if keys is None:
        return
    for key in keys:
        parts = key.split(":")
        assert parts[0] == namespace, key
        if kind == "lease":
            assert parts[1] in ("lease", "fence"), key
            assert ":".join(parts[2:]) == name, key
        else:
            assert parts[1] == "budget", key
            assert parts[2] == name, key
            assert len(parts) == 3 or parts[3] in ("holds", "exp", "ended", "endat"), key
            assert len(parts) <= 4, key


@pytest.mark.parametrize("bad", ["a:b", ":", "x:"])
def test_colons_are_refused_where_they_could_alias(bad: str) -> None:
    with pytest.raises(ValueError, match="namespace must not contain ':'"):
        RedisLeases(URL, namespace=bad)
    with pytest.raises(ValueError, match="name must not contain ':'"):
        RedisBudget(URL, bad, {})
