"""Hypothesis strategies for explicit core YAML tags with arbitrary scalar values.

PyYAML's core scalar constructors fail in more ways than ValueError (KeyError for
``!!bool maybe``, IndexError for an empty ``!!int``, AttributeError for a ``!!timestamp``
that does not match): both definition readers must turn every one of them into a located
DefinitionFileError. These strategies keep that class of input covered.
"""

from __future__ import annotations

import json

from hypothesis import strategies as st

CORE_TAGS = [
    "!!bool",
    "!!int",
    "!!float",
    "!!timestamp",
    "!!null",
    "!!str",
    "!<tag:yaml.org,2002:int>",
    "!<tag:yaml.org,2002:bool>",
    "!<tag:yaml.org,2002:timestamp>",
]

# Values near the edge of what each constructor accepts.
_EDGE_VALUES = [
    "",
    "maybe",
    "0x",
    "0b",
    "0o",
    "-",
    "+",
    ".",
    "_",
    "1:",
    ":1",
    "1:2:3",
    "1:60",
    "1e",
    ".inf",
    ".nan",
    "~",
    "null",
    "yes",
    "9" * 400,
    "1e99999",
    "2001-02-30",
    "2001-13-01",
    "0000-01-01",
    "9999-12-31 23:59:60",
    "2001-01-01 00:00:00 +25:00",
    "2001-12-14t21:59:43.10-05:00",
    "2001-12-14 21:59:43.1234567890",
]

_plain = st.one_of(
    st.sampled_from(_EDGE_VALUES),
    st.text(alphabet="0123456789+-_.:eExXoObBtTzZ aAfFiInNyY", max_size=14).map(str.strip),
)
_single_quoted = st.text(max_size=20).map(lambda v: "'" + v.replace("'", "''") + "'")
_double_quoted = st.one_of(st.sampled_from(_EDGE_VALUES), st.text(max_size=20)).map(json.dumps)


@st.composite
def core_tagged_scalars(draw: st.DrawFn) -> str:
    """``<core tag> <scalar>``: plain, single- or double-quoted, any text (even control
    characters and line breaks, which the quoted styles carry into the YAML)."""
    tag = draw(st.sampled_from(CORE_TAGS))
    value = draw(st.one_of(_plain, _single_quoted, _double_quoted))
    return f"{tag} {value}".rstrip()
