"""The checkpoint encoding: round trip, and every kind of damage refused by name.

A checkpoint is validated on load: its envelope, format, version, run id, digest (keyed
or not) and body structure. Any single changed byte of a saved checkpoint must be refused
(a property test), and a checkpoint never holds what is not conversation data, records
or usage.
"""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from deputy_runtime import CheckpointError
from deputy_runtime.chat import ContentText, ContentToolRequest, ContentToolResult, Turn
from deputy_runtime.runtime import (
    CHECKPOINT_VERSION,
    AgentUsage,
    Checkpoint,
    UsageLimits,
    decode_checkpoint,
    encode_checkpoint,
)

KEY = b"a-checkpoint-key-of-32-bytes!!!!"


class _Opaque:
    def __str__(self) -> str:
        return "an opaque tool value"


def _checkpoint(run_id: str = "run_1") -> Checkpoint:
    return Checkpoint(
        run_id=run_id,
        agent_id="agent_1",
        agent_name="lead",
        task="Do it",
        limits=UsageLimits(max_requests=7, max_cost_usd=1.5),
        usage=AgentUsage(requests=2, tool_calls=1, input_tokens=30, output_tokens=9),
        requests=1,
        seconds_left=None,
        turns=(
            Turn("user", (ContentText("Do it"),)),
            Turn("assistant", (ContentToolRequest("c1", "read", {"path": "x"}),)),
            Turn("user", (ContentToolResult("c1", value=_Opaque()),)),
        ),
        delegation_counts={"alpha": 1},
    )


def test_round_trip_keeps_everything_and_writes_opaque_values_as_text() -> None:
    original = _checkpoint()
    decoded = decode_checkpoint(encode_checkpoint(original), "run_1")
    assert decoded.turns[2].contents[0] == ContentToolResult("c1", value="an opaque tool value")
    assert msgspec.structs.replace(decoded, turns=original.turns[:2]) == msgspec.structs.replace(
        original, turns=original.turns[:2]
    )
    keyed = decode_checkpoint(encode_checkpoint(original, KEY), "run_1", KEY)
    assert keyed == decoded


def _envelope(data: bytes) -> dict[str, object]:
    value = json.loads(data)
    assert isinstance(value, dict)
    return value


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        (lambda e: e.update(format="other"), "format", "expected 'deputy_checkpoint'"),
        (lambda e: e.update(version=CHECKPOINT_VERSION + 1), "version", "is not supported"),
        (lambda e: e.update(run_id="run_2"), "run_id", "checkpoint of run 'run_2'"),
        (lambda e: e.update(digest="md5:00"), "digest", "neither"),
        (lambda e: e.update(digest="sha256:" + "0" * 64), "digest", "does not match"),
    ],
)
def test_envelope_damage_is_named(change: object, field: str, words: str) -> None:
    envelope = _envelope(encode_checkpoint(_checkpoint()))
    change(envelope)  # type: ignore[operator]
    with pytest.raises(CheckpointError, match=words) as caught:
        decode_checkpoint(json.dumps(envelope).encode(), "run_1")
    assert caught.value.field == field
    assert caught.value.run_id == "run_1"


def test_a_body_changed_and_digested_again_is_refused_by_the_key() -> None:
    # Whoever can rewrite the file can recompute a plain checksum, not an HMAC.
    import hashlib

    data = encode_checkpoint(_checkpoint(), KEY)
    envelope = _envelope(data)
    body = json.dumps({**envelope["body"], "task": "Do something else"}).encode()  # type: ignore[dict-item]
    envelope["body"] = json.loads(body)
    envelope["digest"] = "hmac-sha256:" + hashlib.sha256(body).hexdigest()
    with pytest.raises(CheckpointError, match="another key"):
        decode_checkpoint(json.dumps(envelope).encode(), "run_1", KEY)


def test_structure_errors_name_the_path() -> None:
    # A foreign body with a valid digest (the digest rule is the module's own, used here
    # to forge one): the structure check still names the field.
    good = _checkpoint()
    fields = msgspec.to_builtins(good, enc_hook=str)
    bad = msgspec.json.encode(fields | {"requests": "two"})
    envelope = _envelope(encode_checkpoint(good))
    from deputy_runtime.runtime import _checkpoint as module

    envelope["body"] = json.loads(bad)
    envelope["digest"] = module._digest(CHECKPOINT_VERSION, "run_1", bad, None)
    with pytest.raises(CheckpointError, match=r"\$\.requests") as caught:
        decode_checkpoint(json.dumps(envelope, separators=(",", ":")).encode(), "run_1")
    assert caught.value.field == "body"


def test_not_json_and_wrong_keys_are_clear() -> None:
    with pytest.raises(CheckpointError, match="is not a checkpoint envelope"):
        decode_checkpoint(b"\x00\x01 garbage", "run_1")
    with pytest.raises(CheckpointError, match="is not a checkpoint envelope"):
        decode_checkpoint(b'{"format": "deputy_checkpoint"}', "run_1")
    plain = encode_checkpoint(_checkpoint())
    with pytest.raises(CheckpointError, match="not signed with a key"):
        decode_checkpoint(plain, "run_1", KEY)
    with pytest.raises(CheckpointError, match="pass the checkpoint key"):
        decode_checkpoint(encode_checkpoint(_checkpoint(), KEY), "run_1")
    with pytest.raises(TypeError, match="at least 16 bytes"):
        encode_checkpoint(_checkpoint(), b"short")


_SAVED = encode_checkpoint(_checkpoint())
_SIGNED = encode_checkpoint(_checkpoint(), KEY)


@pytest.mark.slow
@given(
    signed=st.booleans(),
    position=st.integers(min_value=0),
    byte=st.integers(min_value=0, max_value=255),
)
def test_any_changed_byte_is_refused(signed: bool, position: int, byte: int) -> None:
    data = bytearray(_SIGNED if signed else _SAVED)
    position %= len(data)
    if data[position] == byte:
        byte = (byte + 1) % 256
    data[position] = byte
    with pytest.raises(CheckpointError):
        decode_checkpoint(bytes(data), "run_1", KEY if signed else None)


@pytest.mark.slow
@given(
    task=st.text(max_size=50),
    calls=st.lists(st.tuples(st.text(max_size=10), st.text(max_size=10)), max_size=4),
)
def test_round_trip_property(task: str, calls: list[tuple[str, str]]) -> None:
    turns = [Turn("user", (ContentText(task),))]
    for i, (name, value) in enumerate(calls):
        turns.append(Turn("assistant", (ContentToolRequest(f"c{i}", name, {"v": value}),)))
        turns.append(Turn("user", (ContentToolResult(f"c{i}", value=value),)))
    checkpoint = msgspec.structs.replace(_checkpoint(), task=task, turns=tuple(turns))
    assert decode_checkpoint(encode_checkpoint(checkpoint, KEY), "run_1", KEY) == checkpoint
