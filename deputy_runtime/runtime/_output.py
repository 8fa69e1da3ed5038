"""An agent's output contract: the shape its final answer must have, and the retry rule.

An agent with an output schema is told the shape in its system prompt (a section after
its own prompt). Its final answer (a reply without tool calls) is decoded as JSON and
checked against the schema; one that does not match is answered with a user turn naming
exactly what was wrong, and the model tries again, at most ``retries`` times. Every
retry is an ordinary request of the same run, counted in its usage and limits. The loop
(``_agent``) owns the retries; this module only says what is valid and what to say.
"""

from __future__ import annotations

import functools
from typing import Any, Final

import msgspec

from .._outputschema import (
    DEFAULT_OUTPUT_RETRIES,
    OutputSchema,
    json_schema_of,
    schema_errors,
)

__all__ = [
    "Judgement",
    "OutputContract",
    "OutputMismatch",
    "judge",
    "output_section",
    "retry_text",
    "with_output_section",
]

#: Marks the output section of a system prompt, so tests and readers can find it.
OUTPUT_SECTION_START: Final = "<!-- deputy-output-schema:v1:start -->"
OUTPUT_SECTION_END: Final = "<!-- deputy-output-schema:v1:end -->"
_FENCE = "```"
#: The schema is shown with its keys sorted: the same text whoever wrote it in which
#: order and however it travelled (a durable run's input sorts mapping keys).
_encode = msgspec.json.Encoder(order="sorted").encode


class OutputMismatch(Exception):
    """A final answer that is not valid JSON of the expected shape; the message says why."""


class OutputContract:
    """A checked output schema and how many retries a mismatching answer gets.

    Args:
        schema: A value :func:`~deputy_runtime._outputschema.output_schema_value` returned.
        retries: Retries after the first answer (``None``: the default, 2).
    """

    __slots__ = ("_decoder", "json_schema", "retries", "schema")

    def __init__(self, schema: OutputSchema, retries: int | None) -> None:
        self.schema = schema
        self.retries = DEFAULT_OUTPUT_RETRIES if retries is None else retries
        self.json_schema = _json_schema(schema)
        self._decoder: msgspec.json.Decoder[Any] = (
            _typed_decoder(schema) if isinstance(schema, type) else _ANY
        )

    def decode(self, text: str) -> Any:
        """The answer ``text`` decoded: an instance of a type schema, else plain JSON.

        One code fence around the whole answer (```` ```json ... ``` ````) is taken off
        first: models add it often, and it changes nothing about the value.

        Raises:
            OutputMismatch: The text is empty, not JSON, or not of the schema's shape.
        """
        body = _unfenced(text)
        if not body:
            raise OutputMismatch("the answer is empty; expected one JSON value")
        try:
            value = self._decoder.decode(body)
        except msgspec.ValidationError as exc:
            raise OutputMismatch(f"the JSON does not match the schema: {exc}") from None
        except msgspec.DecodeError as exc:
            raise OutputMismatch(f"the answer is not valid JSON ({exc})") from None
        if not isinstance(self.schema, type):
            errors = schema_errors(self.schema, value)
            if errors:
                raise OutputMismatch("the JSON does not match the schema: " + "; ".join(errors))
        return value


_ANY: msgspec.json.Decoder[Any] = msgspec.json.Decoder()


@functools.lru_cache(maxsize=256)
def _typed_decoder(schema: type) -> msgspec.json.Decoder[Any]:
    # One decoder per type, built once: a fan-out builds one contract per delegation.
    return msgspec.json.Decoder(schema)


@functools.lru_cache(maxsize=256)
def _type_schema_text(schema: type) -> str:
    return _encode(json_schema_of(schema)).decode()


def _json_schema(schema: OutputSchema) -> str:
    if isinstance(schema, type):
        return _type_schema_text(schema)
    return _encode(json_schema_of(schema)).decode()


def _unfenced(text: str) -> str:
    body = text.strip()
    if body.startswith(_FENCE) and body.endswith(_FENCE) and len(body) >= 2 * len(_FENCE):
        inner = body[len(_FENCE) : -len(_FENCE)]
        first, newline, rest = inner.partition("\n")
        # The opening fence's info string (```json) is not part of the value.
        if newline and (not first.strip() or first.strip().isalnum()):
            inner = rest
        body = inner.strip()
    return body


def output_section(contract: OutputContract) -> str:
    """The system prompt section telling the model the shape of its final answer."""
    return (
        f"{OUTPUT_SECTION_START}\n"
        "# Output format\n\n"
        "Your final answer (the reply in which you call no tools) must be exactly one JSON "
        "value matching the JSON Schema below, with no other text around it. An answer "
        "that does not match is sent back to you with what was wrong.\n\n"
        f"{contract.json_schema}\n"
        f"{OUTPUT_SECTION_END}"
    )


def retry_text(problem: str, attempt: int, attempts: int) -> str:
    """The user turn sent back after a mismatching answer (``attempt`` of ``attempts``)."""
    return (
        f"Your final answer was rejected: {problem}.\n"
        f"Reply again with only the corrected JSON value matching the output schema "
        f"(attempt {attempt + 1} of {attempts})."
    )


class Judgement(msgspec.Struct, frozen=True, kw_only=True):
    """What the loop does with a final answer, decided by :func:`judge`.

    Attributes:
        accepted: The answer matched; ``value`` is its decoded value.
        value: The decoded value (when accepted).
        warning: The warning event's message for a rejected answer with retries left.
        retry: The user turn asking for the corrected answer (retries left).
        error: The run's error once the retries are spent (the run stops
            ``invalid_output``).
    """

    accepted: bool
    value: Any = None
    warning: str | None = None
    retry: str | None = None
    error: str | None = None


def judge(contract: OutputContract, text: str, rejected: int) -> Judgement:
    """Decide about a final answer ``text`` after ``rejected`` earlier rejections.

    Both engines call this, so the rule and every text the model reads are the same.
    """
    try:
        value = contract.decode(text)
    except OutputMismatch as exc:
        problem = str(exc)
    else:
        return Judgement(accepted=True, value=value)
    attempts = contract.retries + 1
    rejected += 1
    if rejected >= attempts:
        return Judgement(
            accepted=False,
            error=(
                f"The final answer did not match the output schema after {attempts} "
                f"attempt{'s' if attempts > 1 else ''}: {problem}"
            ),
        )
    return Judgement(
        accepted=False,
        warning=f"final answer rejected ({rejected} of {attempts}): {problem}",
        retry=retry_text(problem, rejected, attempts),
    )


def with_output_section(prompt: str | None, contract: OutputContract | None) -> str | None:
    """``prompt`` followed by the output section (when there is a contract)."""
    if contract is None:
        return prompt
    section = output_section(contract)
    return f"{prompt}\n\n{section}" if prompt else section
