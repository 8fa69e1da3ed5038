"""A Temporal data converter that carries frozen msgspec Structs as plain JSON.

Workflow and activity arguments are the Structs of ``_values`` and the public value types
(``UsageLimits``, ``AgentResult``, ``SubagentRecord``, turns). They are written as the
JSON ``msgspec.to_builtins`` gives (readable in Temporal's UI and CLI) and read back with
``msgspec.convert`` against the parameter's type hint, which validates them on the way in.
Every client and worker of a deployment must use :data:`data_converter`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import msgspec
from temporalio.converter import (
    AdvancedJSONEncoder,
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
    JSONTypeConverter,
    JSONTypeConverterUnhandled,
)

__all__ = ["MsgspecPayloadConverter", "data_converter"]


class _StructEncoder(AdvancedJSONEncoder):
    def default(self, o: Any) -> Any:
        if isinstance(o, msgspec.Struct):
            return msgspec.to_builtins(o)
        return super().default(o)


class _StructTypeConverter(JSONTypeConverter):
    def to_typed_value(self, hint: type, value: Any) -> Any | JSONTypeConverterUnhandled | None:
        if isinstance(hint, type) and issubclass(hint, msgspec.Struct):
            return msgspec.convert(value, hint)
        return JSONTypeConverter.Unhandled


class MsgspecPayloadConverter(CompositePayloadConverter):
    """Temporal's default payload converters, with msgspec Structs handled as JSON."""

    def __init__(self) -> None:
        json_converter = JSONPlainPayloadConverter(
            encoder=_StructEncoder, custom_type_converters=[_StructTypeConverter()]
        )
        super().__init__(
            *(
                json_converter if isinstance(c, JSONPlainPayloadConverter) else c
                for c in DefaultPayloadConverter.default_encoding_payload_converters
            )
        )


#: The data converter for clients and workers that run deputy workflows.
data_converter = dataclasses.replace(
    DataConverter.default, payload_converter_class=MsgspecPayloadConverter
)
