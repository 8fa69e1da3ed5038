"""A lead run's checkpoint: its value type and its validated, digested encoding.

A checkpoint is what a lead run needs to continue after its process is gone, taken at a
turn boundary (before a model request, every delegation of the previous turn settled):
the conversation, the usage so far and the limits, the settled delegations' records and
results, and the run's ids and task. It holds no provider, tool, hook, environment or key:
only conversation data, records and usage, so a checkpoint file can be read by anyone
who may read the conversation.

On the wire it is an envelope around the body: ``format`` (``deputy_checkpoint``),
``version`` (:data:`CHECKPOINT_VERSION`), ``run_id``, ``digest`` and ``body`` (the
checkpoint's JSON). The digest covers the format, the version, the run id and the body
bytes: ``sha256:<hex>`` by default (it detects damage, not an attacker), or
``hmac-sha256:<hex>`` with a key (it detects tampering by anyone without the key). Loading
checks, in this order and each with an error naming what is wrong: the envelope's fields,
the format, the version, the run id asked for, the digest (a keyed one when a key is
given), then the body's structure against the types, field by field.
"""

from __future__ import annotations

import hashlib
import hmac

import msgspec

from ..chat import Turn, plain_value
from ..errors import CheckpointError
from ._records import SubagentRecord
from ._result import AgentResult
from ._usage import AgentUsage, UsageLimits

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_VERSION",
    "Checkpoint",
    "check_key",
    "decode_checkpoint",
    "encode_checkpoint",
]

#: The ``format`` field of every checkpoint envelope.
CHECKPOINT_FORMAT = "deputy_checkpoint"
#: The checkpoint version this release writes and reads.
CHECKPOINT_VERSION = 1

_SHA256 = "sha256:"
_HMAC = "hmac-sha256:"


class Checkpoint(msgspec.Struct, frozen=True, gc=False, kw_only=True, forbid_unknown_fields=True):
    """A lead run at a turn boundary, as it is saved and restored.

    Attributes:
        run_id: The run's id (a resumed run keeps it).
        agent_id: The lead's agent id (the delegations' ``parent_agent_id``).
        agent_name: The lead's name; a lead of another name refuses the checkpoint.
        task: The task the run started with.
        limits: The limits the run runs under (``max_seconds``: what was left of it).
        usage: What the run used so far, settled delegations included.
        requests: The model requests the run's loop sent so far.
        seconds_left: What was left of the run's time limit (``None``: no limit).
        turns: The conversation, the task and every answered tool call included.
        subagents: The run's settled delegations' records, in admission order.
        subagent_results: Their results, in the same order (``None`` where none).
        delegation_counts: Delegations counted per sub-agent name (``max_delegations``).
        hook_errors: ``"EVENT: message"`` lines of the lead's hooks that raised.
        output_attempts: Final answers the lead's output contract rejected so far.
        cost_warned: Whether the "no cost reported" warning was given.
        saved_at: Unix seconds when it was taken.
    """

    run_id: str
    agent_id: str
    agent_name: str | None
    task: str
    limits: UsageLimits
    usage: AgentUsage
    requests: int
    seconds_left: float | None
    turns: tuple[Turn, ...]
    subagents: tuple[SubagentRecord, ...] = ()
    subagent_results: tuple[AgentResult | None, ...] = ()
    delegation_counts: dict[str, int] = msgspec.field(default_factory=dict)
    hook_errors: tuple[str, ...] = ()
    output_attempts: int = 0
    cost_warned: bool = False
    saved_at: float = 0.0


class _Envelope(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    format: str
    version: int
    run_id: str
    digest: str
    body: msgspec.Raw


# Values JSON cannot hold (a tool's Python object) are written as the text the model saw.
_encoder = msgspec.json.Encoder(enc_hook=plain_value)
_envelope_decoder = msgspec.json.Decoder(_Envelope)
_body_decoder = msgspec.json.Decoder(Checkpoint)


def _digest(version: int, run_id: str, body: bytes, key: bytes | None) -> str:
    # Length-prefixed parts, so no two (run id, body) pairs give the same message.
    parts = (CHECKPOINT_FORMAT.encode(), str(version).encode(), run_id.encode(), body)
    message = b"".join(len(p).to_bytes(8, "big") + p for p in parts)
    if key is None:
        return _SHA256 + hashlib.sha256(message).hexdigest()
    return _HMAC + hmac.new(key, message, hashlib.sha256).hexdigest()


def check_key(key: object) -> bytes | None:
    """``key`` if it can sign checkpoints: ``None``, or bytes of at least 16 bytes.

    Raises:
        TypeError: It is neither.
    """
    if key is not None and (not isinstance(key, bytes) or len(key) < 16):
        raise TypeError("checkpoint_key must be bytes of at least 16 bytes, or None")
    return key if isinstance(key, bytes) else None


def encode_checkpoint(checkpoint: Checkpoint, key: bytes | None = None) -> bytes:
    """The checkpoint's envelope bytes, digested (keyed with ``key``).

    Args:
        checkpoint: The checkpoint.
        key: The HMAC key (at least 16 bytes), or ``None`` for a plain SHA-256 checksum.

    Returns:
        The JSON bytes to store.

    Raises:
        TypeError: ``key`` is not bytes of at least 16 bytes.
    """
    check_key(key)
    body = _encoder.encode(checkpoint)
    envelope = _Envelope(
        format=CHECKPOINT_FORMAT,
        version=CHECKPOINT_VERSION,
        run_id=checkpoint.run_id,
        digest=_digest(CHECKPOINT_VERSION, checkpoint.run_id, body, key),
        body=msgspec.Raw(body),
    )
    return _encoder.encode(envelope)


def decode_checkpoint(data: bytes, run_id: str, key: bytes | None = None) -> Checkpoint:
    """Validate and decode a checkpoint saved for ``run_id``.

    Args:
        data: What :func:`encode_checkpoint` returned (as a store gave it back).
        run_id: The run the checkpoint must belong to.
        key: The key it was saved with; ``None`` when it was saved without one.

    Returns:
        The checkpoint.

    Raises:
        CheckpointError: It is not a checkpoint, its format or version is not this
            release's, it belongs to another run, its digest does not match (damaged or
            tampered with, or saved with another key or none), or its body does not
            match the checkpoint's structure; the message says which.
        TypeError: ``key`` is not bytes of at least 16 bytes.
    """
    check_key(key)
    where = f"checkpoint of run {run_id!r}"
    try:
        envelope = _envelope_decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise CheckpointError(
            f"{where} is not a checkpoint envelope (a JSON object with format, version, "
            f"run_id, digest and body): {exc}",
            run_id=run_id,
        ) from None
    if envelope.format != CHECKPOINT_FORMAT:
        raise CheckpointError(
            f"{where}: format is {envelope.format[:64]!r}, expected {CHECKPOINT_FORMAT!r}",
            run_id=run_id,
            field="format",
        )
    if envelope.version != CHECKPOINT_VERSION:
        raise CheckpointError(
            f"{where}: version {envelope.version} is not supported (this release reads "
            f"version {CHECKPOINT_VERSION})",
            run_id=run_id,
            field="version",
        )
    if envelope.run_id != run_id:
        raise CheckpointError(
            f"{where}: it is the checkpoint of run {envelope.run_id[:128]!r}",
            run_id=run_id,
            field="run_id",
        )
    _verify(envelope, run_id, key, where)
    try:
        checkpoint = _body_decoder.decode(bytes(envelope.body))
    except msgspec.DecodeError as exc:
        raise CheckpointError(
            f"{where}: the body does not match the checkpoint structure: {exc}",
            run_id=run_id,
            field="body",
        ) from None
    if checkpoint.run_id != run_id:
        raise CheckpointError(
            f"{where}: body.run_id is {checkpoint.run_id[:128]!r}", run_id=run_id, field="run_id"
        )
    if len(checkpoint.subagent_results) != len(checkpoint.subagents):
        raise CheckpointError(
            f"{where}: body.subagent_results has {len(checkpoint.subagent_results)} entries "
            f"for {len(checkpoint.subagents)} subagents",
            run_id=run_id,
            field="subagent_results",
        )
    return checkpoint


def _verify(envelope: _Envelope, run_id: str, key: bytes | None, where: str) -> None:
    digest = envelope.digest
    if key is not None and not digest.startswith(_HMAC):
        raise CheckpointError(
            f"{where} is not signed with a key (digest {digest[:16]!r}...), but a "
            "checkpoint key was given: refusing an unauthenticated checkpoint",
            run_id=run_id,
            field="digest",
        )
    if key is None and digest.startswith(_HMAC):
        raise CheckpointError(
            f"{where} is signed with a key: pass the checkpoint key it was saved with",
            run_id=run_id,
            field="digest",
        )
    if not digest.startswith((_SHA256, _HMAC)):
        raise CheckpointError(
            f"{where}: digest {digest[:32]!r} is neither 'sha256:<hex>' nor 'hmac-sha256:<hex>'",
            run_id=run_id,
            field="digest",
        )
    expected = _digest(envelope.version, envelope.run_id, bytes(envelope.body), key)
    if not hmac.compare_digest(digest.encode(), expected.encode()):
        raise CheckpointError(
            f"{where}: the digest does not match its contents (the checkpoint was damaged "
            "or changed after it was saved"
            + (", or saved with another key)" if key is not None else ")"),
            run_id=run_id,
            field="digest",
        )
