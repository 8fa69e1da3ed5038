"""encode_turns / decode_turns: the chat layer's JSON of a conversation."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from deputy_runtime.chat import (
    ContentText,
    ContentThinking,
    ContentToolRequest,
    ContentToolResult,
    Turn,
    decode_turns,
    encode_turns,
)


def test_every_content_type_round_trips() -> None:
    turns = (
        Turn("user", (ContentText("hello"),)),
        Turn(
            "assistant",
            (
                ContentThinking("hmm", signature="sig", redacted=None),
                ContentToolRequest("c1", "read", {"path": "a", "n": [1, 2]}),
            ),
        ),
        Turn(
            "user",
            (ContentToolResult("c1", value={"ok": True}), ContentToolResult("c2", error="no")),
        ),
    )
    assert decode_turns(encode_turns(turns)) == turns


def test_a_value_json_cannot_hold_is_its_text() -> None:
    class Thing:
        def __str__(self) -> str:
            return "thing-as-text"

    data = encode_turns([Turn("user", (ContentToolResult("c1", value=Thing()),))])
    assert decode_turns(data)[0].contents[0] == ContentToolResult("c1", value="thing-as-text")


def test_a_malformed_conversation_names_the_path() -> None:
    with pytest.raises(msgspec.ValidationError, match=r"\$\[0\]\.contents\[0\]"):
        decode_turns(b'[{"role": "user", "contents": [{"type": "video"}]}]')
    with pytest.raises(msgspec.ValidationError, match=r"\$\[0\]\.role"):
        decode_turns(b'[{"role": "robot", "contents": []}]')


_text = st.text(max_size=20)
_content = st.one_of(
    st.builds(ContentText, _text),
    st.builds(ContentThinking, _text, st.none() | _text, st.none() | _text),
    st.builds(
        ContentToolRequest, _text, _text, st.dictionaries(_text, st.integers() | _text, max_size=3)
    ),
    st.builds(ContentToolResult, _text, st.none() | st.integers() | _text, st.none() | _text),
)


@pytest.mark.slow
@given(
    st.lists(
        st.builds(
            Turn,
            st.sampled_from(["user", "assistant", "system"]),
            st.lists(_content, max_size=4).map(tuple),
        ),
        max_size=5,
    )
)
def test_round_trip_property(turns: list[Turn]) -> None:
    assert decode_turns(encode_turns(turns)) == tuple(turns)
