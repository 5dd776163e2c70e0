"""The approve/deny prompt of `harness run` on a terminal.

The session pauses, the preview is shown inside a gutter (every line of it starts with "│ ", so text
from the model cannot pass for the prompt), and the operator types `yes` or `no`; `no` asks for an
optional reason, which the model receives. While the prompt waits, a decision made elsewhere
(`harness approvals approve ID`, the web page) is picked up from the database and ends the prompt.
"""

from __future__ import annotations

import select
import time
from dataclasses import dataclass
from typing import TextIO

from harness.approval.preview import gutter
from harness.approval.queue import ApprovalQueue
from harness.approval.records import Request
from harness.errors import ApprovalError

APPROVE_WORDS = ("y", "yes", "a", "approve")
DENY_WORDS = ("n", "no", "d", "deny")


@dataclass
class ConsolePrompt:
    stdin: TextIO
    stdout: TextIO
    actor: str = "console"
    poll_interval: float = 0.25

    def _say(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()

    def _line(self, queue: ApprovalQueue, request: Request, deadline: float) -> str | Request | None:
        """The next typed line; a Request when it was decided elsewhere; None at the deadline or EOF."""
        while time.time() < deadline:
            ready, _, _ = select.select([self.stdin], [], [], self.poll_interval)
            if ready:
                line = self.stdin.readline()
                return None if line == "" else line.strip()
            current = queue.get(request.id)
            if current.status != "pending":
                return current
        return None

    def ask(self, queue: ApprovalQueue, request: Request, deadline: float) -> Request:
        self._say(f"\n{gutter(request.preview, request.id)}\n"
                  f"tool {request.tool}, session {request.session}, key {request.key}, "
                  f"hash {request.request_hash[:12]}\n")
        question = (f"Approve outbound request #{request.id}? [yes/no] "
                    f"(or decide elsewhere: harness approvals approve {request.id}): ")
        while True:
            self._say(question)
            answer = self._line(queue, request, deadline)
            if isinstance(answer, Request):
                self._say(f"\nrequest #{answer.id} was {answer.status} by {answer.decided_by}\n")
                return answer
            if answer is None:
                self._say("\nno answer (time is up, or the input was closed): the request expires\n")
                return queue.expire(request.id, time.time() - request.created_at)
            if answer.lower() in APPROVE_WORDS:
                return self._decide(queue, request, True, "")
            if answer.lower() in DENY_WORDS:
                self._say("Reason for the model (optional, Enter to skip): ")
                reason = self._line(queue, request, deadline)
                if isinstance(reason, Request):
                    return reason
                return self._decide(queue, request, False, reason or "")
            self._say(f"please type yes or no (got {answer[:40]!r})\n")

    def _decide(self, queue: ApprovalQueue, request: Request, approve: bool, reason: str) -> Request:
        try:
            decided = queue.decide(request.id, approve, self.actor, reason, seen_hash=request.request_hash)
        except ApprovalError:   # decided elsewhere in the meantime: that decision stands
            decided = queue.get(request.id)
            if decided.status == "pending":
                raise
        self._say(f"request #{decided.id}: {decided.status}\n")
        return decided
