"""The questions of a durable run followed by ``run --temporal`` or ``attach``.

On a terminal (standard input and output both TTYs, no ``--json``) each question is
asked in place, as :func:`~deputy_runtime._cli.ask.prompt_answers` asks it, while the
live tree pauses, and the answers go to the run's ``answer`` update. Otherwise the
question stays pending on the server and a line on standard error says how to answer
it from another process (``deputy-runtime answer``). One question is asked at a time, in
the order they appear; a question answered elsewhere first is refused by the run and
said so.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from ..runtime import Event, QuestionEvent
from .answer import answer_command
from .ask import prompt_answers

__all__ = ["QuestionDesk"]

T = TypeVar("T")


def _read_line(prompt: str) -> str:
    """One line of standard input, the prompt on standard output (``input`` would write
    it to standard error on a terminal)."""
    sys.stdout.write(prompt)
    sys.stdout.flush()
    line = sys.stdin.readline()
    if not line:
        raise EOFError("standard input ended")
    return line.rstrip("\n")


async def _in_daemon_thread(fn: Callable[[], T]) -> T:
    """``fn()`` in a daemon thread: a prompt still waiting for a line when the command
    ends must not keep the process (``asyncio.to_thread``'s pool would be waited for)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)  # type: ignore[arg-type]

    def work() -> None:
        try:
            result = fn()
        except BaseException as exc:  # handed to the awaiting task
            loop.call_soon_threadsafe(settle, None, exc)
        else:
            loop.call_soon_threadsafe(settle, result, None)

    threading.Thread(target=work, name="deputy-ask", daemon=True).start()
    return await done


class QuestionDesk:
    """Takes a followed run's ``QuestionEvent`` s: prompts, or prints how to answer."""

    def __init__(
        self,
        client: Any,
        address: str,
        workflow_id: str,
        *,
        interactive: bool,
        view: Any,
        prog: str,
    ) -> None:
        self._client = client
        self._address = address
        self._workflow_id = workflow_id
        self._interactive = interactive
        self._view = view
        self._prog = prog
        self._turn = asyncio.Lock()  # one prompt at a time
        self._tasks: set[asyncio.Task[None]] = set()

    def handle(self, event: Event) -> None:
        """Take one followed event (anything but a question is ignored)."""
        if not isinstance(event, QuestionEvent):
            return
        if not self._interactive:
            self._hint(event)
            return
        task = asyncio.get_running_loop().create_task(self._ask(event))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def close(self) -> None:
        """Stop asking (the run ended or the command stops following it)."""
        for task in tuple(self._tasks):
            task.cancel()

    def _hint(self, event: QuestionEvent) -> None:
        example = {str(q.get("question", "")): "..." for q in event.questions}
        command = answer_command(self._address, self._workflow_id, event.question_id, example)
        who = event.agent_name or "agent"
        line = f"{self._prog}: {who} asks the user (question {event.question_id}); "
        print(f"{line}answer it with: {command}", file=sys.stderr, flush=True)

    async def _ask(self, event: QuestionEvent) -> None:
        from temporalio.client import WorkflowUpdateFailedError

        from ..temporal import answer_question

        async with self._turn:
            hold = getattr(self._view, "hold", None)
            if hold is not None:
                hold()
            try:
                answers = await _in_daemon_thread(
                    lambda: prompt_answers(
                        event.questions, _read_line, sys.stdout, asker=event.agent_name or "agent"
                    )
                )
            except EOFError:
                self._hint(event)
                return
            finally:
                resume = getattr(self._view, "resume", None)
                if resume is not None:
                    resume()
            try:
                await answer_question(self._client, self._workflow_id, event.question_id, answers)
            except WorkflowUpdateFailedError as exc:
                reason = exc.cause if exc.cause is not None else exc
                print(f"{self._prog}: the run refused the answer: {reason}", file=sys.stderr)
