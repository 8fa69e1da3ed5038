"""What an MCP value may show a model: binary summarised, every result within the cap.

These rules keep a server from flooding a model's context (and its bill) with base64 or
megabytes of text, so they get property tests besides the examples.
"""

from __future__ import annotations

import base64
import random
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from deputy_runtime.mcp._bound import (
    BASE64_MIN_CHARS,
    RESULT_BYTES,
    bounded_text,
    bounded_value,
    summarised,
)
from deputy_runtime.mcp._output import OutputSchema
from deputy_runtime.tools import FileToolLimits

PNG = b"\x89PNG\r\n\x1a\n" + random.Random(1).randbytes(600)
PNG_B64 = base64.b64encode(PNG).decode()
_NOTICE_MAX = 200  # the cut notice is one short line


def test_the_cap_is_the_file_tools_read_cap() -> None:
    assert FileToolLimits().read_bytes == RESULT_BYTES


def test_base64_is_summarised_with_its_declared_or_sniffed_mime_type() -> None:
    assert summarised({"data": PNG_B64}) == {
        "data": f"[binary image/png, {len(PNG):,} bytes, not shown]"
    }
    assert summarised({"bytes": PNG_B64, "mime_type": "image/x-test"})["bytes"] == (
        f"[binary image/x-test, {len(PNG):,} bytes, not shown]"
    )
    url = "data:audio/wav;base64," + base64.b64encode(b"\x01" * 400).decode()
    assert summarised([url]) == ["[binary audio/wav, 400 bytes, not shown]"]
    unknown = base64.urlsafe_b64encode(random.Random(2).randbytes(300)).decode()
    assert summarised(unknown) == "[binary application/octet-stream, 300 bytes, not shown]"


def test_text_that_only_resembles_base64_is_kept() -> None:
    kept = [
        "x" * 1000,  # one letter
        "0123456789abcdef" * 40,  # a hex dump has no upper-case letters
        PNG_B64[: BASE64_MIN_CHARS - 4],  # too short to matter
        "word " * 200,  # spaces
        PNG_B64 + "!",  # not the alphabet
    ]
    assert summarised(kept) == kept


def test_a_structured_value_over_the_cap_becomes_cut_json_text() -> None:
    value = {"rows": [f"row {i}" for i in range(100)]}
    out = bounded_value(value, limit=100)
    assert isinstance(out, str)
    body, notice = out.rsplit("\n", 1)
    assert body == msgspec.json.encode(value).decode()[:100]
    assert notice.startswith("[result cut: 100 of ")
    assert bounded_value(value) == value


def test_a_cut_never_splits_a_character() -> None:
    out = bounded_text("é" * 10, limit=5)
    assert out.split("\n")[0] == "éé"
    assert "4 of 20 bytes shown" in out


def test_output_schema_problems_name_where_and_what() -> None:
    schema = OutputSchema.compile(
        {
            "type": "object",
            "properties": {"items": {"type": "array", "items": {"type": "integer"}}},
            "required": ["items"],
        }
    )
    assert isinstance(schema, OutputSchema)
    assert schema.problem({"items": [1, 2]}) is None
    assert schema.problem({"items": [1, PNG_B64]}) == (
        "structuredContent.items[1]: expected integer, got string"
    )
    assert schema.problem({}) == "structuredContent: 'items' is a required property"
    bounded = OutputSchema.compile({"type": "string", "maxLength": 3})
    assert isinstance(bounded, OutputSchema)
    assert bounded.problem("abcd") == "structuredContent: fails 'maxLength' (3)"


def test_output_schema_references_never_leave_the_document() -> None:
    schema = OutputSchema.compile({"$ref": "http://127.0.0.1:9/schema.json"})
    assert isinstance(schema, OutputSchema)
    problem = schema.problem({"a": 1})
    assert problem is not None
    assert problem.startswith("its outputSchema has a reference that does not resolve")
    assert OutputSchema.compile({"type": 5}) == (
        "its outputSchema is not a valid JSON Schema: 5 is not valid under any of the given "
        "schemas (at ['type'])"
    )


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=50)
    | st.sampled_from([PNG_B64, "data:image/png;base64," + PNG_B64, "a" * 300]),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=30,
)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@settings(max_examples=200, deadline=None)
@given(json_values, st.integers(min_value=1, max_value=2000))
def test_no_result_exceeds_the_cap_and_no_base64_survives(value: Any, limit: int) -> None:
    out = bounded_value(value, limit)
    encoded = out.encode() if isinstance(out, str) else msgspec.json.encode(out)
    assert len(encoded) <= limit + _NOTICE_MAX
    if not isinstance(out, str):
        for text in _strings(out):
            assert PNG_B64[:BASE64_MIN_CHARS] not in text


@settings(max_examples=200, deadline=None)
@given(st.text(), st.integers(min_value=1, max_value=500))
def test_cut_text_is_a_prefix_within_the_cap(text: str, limit: int) -> None:
    out = bounded_text(text, limit)
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        assert out == text
        return
    body = out[: out.rindex("\n[result cut: ")]
    assert text.startswith(body)
    assert len(body.encode("utf-8", "surrogatepass")) <= limit
    assert len(out.encode("utf-8", "surrogatepass")) <= limit + _NOTICE_MAX
