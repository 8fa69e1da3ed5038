"""What a server's sampling and elicitation requests become, and the answers it gets back
(the conversions of ``deputy_runtime.mcp._client``, on the SDK's own request types)."""

from __future__ import annotations

import base64
from typing import Any

import mcp.types as mcp_types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deputy_runtime.chat import reply
from deputy_runtime.mcp._client import (
    ElicitAnswerError,
    elicit_questions,
    elicit_result,
    sampling_request,
    sampling_result,
)

PROPERTIES: dict[str, dict[str, Any]] = {
    "name": {"type": "string", "title": "Full name"},
    "age": {"type": "integer"},
    "height": {"type": "number"},
    "subscribe": {"type": "boolean"},
    "colour": {"type": "string", "enum": ["red", "blue"]},
    "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}},
}
SCHEMA = {"type": "object", "properties": PROPERTIES, "required": ["name", "age"]}


def form(schema: dict[str, Any] = SCHEMA) -> mcp_types.ElicitRequestFormParams:
    return mcp_types.ElicitRequestFormParams(message="Tell me", requested_schema=schema)


def answered(params: Any, by_name: dict[str, Any]) -> dict[str, Any]:
    """The person's answers keyed by question text, given per property name."""
    out: dict[str, Any] = {}
    for question in elicit_questions(params):
        name = question["question"].split("\n")[1].split(" ")[0]
        if name in by_name:
            out[question["question"]] = by_name[name]
    return out


def test_a_form_asks_one_question_per_property_with_its_options() -> None:
    questions = elicit_questions(form())
    assert [q["question"] for q in questions][:2] == ["Tell me\nname (Full name)", "Tell me\nage"]
    options = {q["question"].split("\n")[1]: q["options"] for q in questions}
    assert options["subscribe"] == ["true", "false"]
    assert options["colour"] == ["red", "blue"]
    assert options["tags"] == ["a", "b", "c"]
    assert options["age"] is None


def test_answers_are_converted_to_the_properties_types() -> None:
    result = elicit_result(
        form(),
        answered(
            form(),
            {
                "name": "Ada",
                "age": "36",
                "height": "1.7",
                "subscribe": "Yes",
                "colour": "red",
                "tags": ["a", "c"],
            },
        ),
    )
    assert result.action == "accept"
    assert result.content == {
        "name": "Ada",
        "age": 36,
        "height": 1.7,
        "subscribe": True,
        "colour": "red",
        "tags": ["a", "c"],
    }


def test_a_required_property_left_empty_declines_and_an_optional_one_is_left_out() -> None:
    assert elicit_result(form(), answered(form(), {"name": "Ada", "age": ""})).action == "decline"
    accepted = elicit_result(form(), answered(form(), {"name": "Ada", "age": "3"}))
    assert accepted.content == {"name": "Ada", "age": 3}


@pytest.mark.parametrize(
    ("field", "answer", "message"),
    [
        ("age", "old", "the answer to 'age' is not an integer: 'old'"),
        ("height", "tall", "the answer to 'height' is not a number: 'tall'"),
        ("subscribe", "maybe", "the answer to 'subscribe' is not a yes/no: 'maybe'"),
        ("colour", "green", "the answer to 'colour' is not one of red, blue: 'green'"),
        ("tags", ["a", "z"], "the answer to 'tags' is not one of a, b, c: 'z'"),
    ],
)
def test_an_answer_that_cannot_be_converted_names_the_property(
    field: str, answer: str, message: str
) -> None:
    answers = answered(form(), {"name": "Ada", "age": "3", field: answer})
    with pytest.raises(ElicitAnswerError, match=message):
        elicit_result(form(), answers)


def test_a_confirmation_and_a_url_are_accepted_or_declined() -> None:
    confirm = form({"type": "object", "properties": {}})
    (question,) = elicit_questions(confirm)
    assert question == {"question": "Tell me", "options": ["accept", "decline"]}
    assert elicit_result(confirm, {"Tell me": "accept"}).action == "accept"
    assert elicit_result(confirm, {"Tell me": "decline"}).action == "decline"
    assert elicit_result(confirm, {}).action == "decline"
    url = mcp_types.ElicitRequestURLParams(
        message="Sign in", url="https://example.com/login", elicitation_id="e1"
    )
    (question,) = elicit_questions(url)
    assert question["question"] == "Sign in\nOpen: https://example.com/login"
    assert elicit_result(url, {question["question"]: "done"}).action == "accept"


def test_sampling_sends_text_describes_binary_and_joins_turns_of_one_role() -> None:
    image = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 100).decode()
    params = mcp_types.CreateMessageRequestParams(
        messages=[
            mcp_types.SamplingMessage(role="user", content=mcp_types.TextContent(text="Hi")),
            mcp_types.SamplingMessage(
                role="user",
                content=[
                    mcp_types.TextContent(text="Look:"),
                    mcp_types.ImageContent(data=image, mime_type="image/png"),
                ],
            ),
        ],
        max_tokens=20,
        temperature=0.5,
        stop_sequences=["END"],
        system_prompt="Be brief.",
    )
    request = sampling_request(params)
    assert not isinstance(request, str)
    system, turns, options, hook = request
    assert system == "Be brief."
    (turn,) = turns
    assert turn.text == "Hi\n\nLook:\n[image image/png, 108 bytes, not shown]"
    assert options == {"max_tokens": 20, "temperature": 0.5, "stop_sequences": ["END"]}
    assert hook["messages"] == [{"role": "user", "text": turn.text}]


def test_sampling_refuses_tools_and_a_conversation_not_ending_with_the_user() -> None:
    tool = mcp_types.Tool(name="t", input_schema={"type": "object"})
    user = mcp_types.SamplingMessage(role="user", content=mcp_types.TextContent(text="q"))
    said = mcp_types.SamplingMessage(role="assistant", content=mcp_types.TextContent(text="a"))
    with_tools = mcp_types.CreateMessageRequestParams(messages=[user], max_tokens=5, tools=[tool])
    assert sampling_request(with_tools) == "sampling with tools is not supported by this client"
    ending = mcp_types.CreateMessageRequestParams(messages=[user, said], max_tokens=5)
    assert sampling_request(ending) == "sampling needs messages ending with a user message"


def test_the_reply_names_the_model_and_maps_the_finish_reason() -> None:
    result = sampling_result(reply("fine"), "m-1")
    assert (result.model, result.stop_reason, result.content) == (
        "m-1",
        "endTurn",
        mcp_types.TextContent(text="fine"),
    )


@settings(max_examples=100, deadline=None)
@given(
    answers=st.dictionaries(
        st.sampled_from(["name", "age", "height", "subscribe", "colour", "tags"]),
        st.one_of(st.text(max_size=8), st.lists(st.text(max_size=4), max_size=3)),
    )
)
def test_any_answers_give_a_valid_result_or_an_error_naming_the_property(
    answers: dict[str, Any],
) -> None:
    # Whatever a person types, the server gets an accept whose content matches its
    # schema, a decline, or nothing but an error naming the property.
    problem: str | None = None
    try:
        result = elicit_result(form(), answered(form(), answers))
    except ElicitAnswerError as exc:
        problem = str(exc)
    if problem is not None:
        assert any(f"the answer to '{name}'" in problem for name in PROPERTIES)
        return
    if result.action == "decline":
        return
    assert result.action == "accept"
    content = result.content
    assert content is not None
    assert isinstance(content["name"], str)
    assert isinstance(content["age"], int)
    expected = {"string": str, "integer": int, "number": float, "boolean": bool}
    for name, value in content.items():
        kind = PROPERTIES[name]["type"]
        if isinstance(value, list):
            assert kind == "array"
            assert all(v in ("a", "b", "c") for v in value)
        else:
            assert isinstance(value, expected[kind])
        if name == "colour":
            assert value in ("red", "blue")
