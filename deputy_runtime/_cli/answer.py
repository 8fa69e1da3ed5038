"""``deputy-runtime answer --temporal ADDRESS WORKFLOW_ID [QUESTION_ID ANSWERS]``.

Answers a pending ``ask_user`` question of a durable run (the lead's ``answer`` update,
through ``deputy_runtime.temporal.answer_question``) from any process: ``ANSWERS`` is a
JSON object mapping each question to its answer, a string or a list of strings. On
success it prints what the asking model receives. Without ``QUESTION_ID`` and
``ANSWERS`` it prints the run's pending questions, one JSON object a line.

Exit status: 0 answered (or listed); 1 the run refused the answer (the reason, naming
the field, is printed) or the server or workflow could not be reached; 2 bad arguments
(``ANSWERS`` not a JSON object, only one of the two given) or the ``temporal`` extra is
missing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

import msgspec

from .._extras import install_hint

__all__ = ["answer", "answer_command"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
PROG = "deputy-runtime answer"


def answer_command(address: str, workflow_id: str, question_id: str, answers: Any) -> str:
    """The command line answering ``question_id`` (for hints printed by ``run``)."""
    text = json.dumps(answers, ensure_ascii=False)
    quoted = "'" + text.replace("'", "'\\''") + "'"
    return f"{PROG} --temporal {address} {workflow_id} {question_id} {quoted}"


def answer(args: argparse.Namespace) -> int:
    """Answer (or list) the run's questions; returns the exit status."""
    try:
        import temporalio  # noqa: F401
    except ImportError:
        print(f"{PROG}: needs the temporal extra ({install_hint('temporal')})",
              file=sys.stderr)  # fmt: skip
        return EXIT_USAGE
    if (args.question_id is None) != (args.answers is None):
        print(f"{PROG}: give both QUESTION_ID and ANSWERS, or neither (to list the pending "
              "questions)", file=sys.stderr)  # fmt: skip
        return EXIT_USAGE
    answers: Any = None
    if args.answers is not None:
        try:
            answers = json.loads(args.answers)
        except json.JSONDecodeError as exc:
            print(f"{PROG}: ANSWERS is not JSON ({exc}); give an object such as "
                  '\'{"Which option?": "A"}\'', file=sys.stderr)  # fmt: skip
            return EXIT_USAGE
        if not isinstance(answers, dict):
            print(f"{PROG}: ANSWERS must be a JSON object mapping each question to its "
                  f"answer, got {type(answers).__name__}", file=sys.stderr)  # fmt: skip
            return EXIT_USAGE
    status = asyncio.run(_answer(args, answers))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # as run --temporal: Temporal's native client threads stay behind


async def _answer(args: argparse.Namespace, answers: Any) -> int:
    from temporalio.client import Client, WorkflowUpdateFailedError

    from ..temporal import answer_question, data_converter, pending_questions

    try:
        client = await Client.connect(args.temporal, data_converter=data_converter)
        if args.question_id is None:
            for pending in await pending_questions(client, args.workflow_id):
                sys.stdout.write(msgspec.json.encode(pending).decode() + "\n")
            return EXIT_OK
        value = await answer_question(client, args.workflow_id, args.question_id, answers)
    except ValueError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except WorkflowUpdateFailedError as exc:
        reason = exc.cause if exc.cause is not None else exc
        print(f"{PROG}: the run refused the answer: {reason}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:
        print(f"{PROG}: cannot reach workflow {args.workflow_id} on Temporal at "
              f"{args.temporal}: {exc}", file=sys.stderr)  # fmt: skip
        return EXIT_FAILED
    sys.stdout.write(value + "\n")
    return EXIT_OK
