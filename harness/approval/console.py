"""The approve/deny prompt of `harness run` on a terminal.

The session pauses, the preview is shown inside a gutter (every line of it starts with "│ ", so text
from the model cannot pass for the prompt), and the operator types `yes` or `no`; `no` asks for an
optional reason, which the model receives. While the prompt waits, a decision made elsewhere
(`harness approvals approve ID --hash H`, the web page) is picked up from the database and ends the
prompt. Every string shown that came from the model or the database (tool, key, session, decider)
is escaped first: a key holding `ESC[13A ESC[J` prints as `\x1b[13A\x1b[J` and moves nothing.
An approval typed here names the hash of the request shown, so it cannot approve anything else.

Besides yes and no the operator may answer `g` (approve this request and, by a grant for this run,
the later ones its derived rule covers) or `d` (deny it and, for this run, every later one to the same
place): the derived rule is printed in full, escaped, and confirmed before anything is decided; a
request no grant may be made from says why and asks again. A request a grant decides later is not
asked about, but it is shown: `request #7 (http_request ...) approved by grant G1`.
"""

from __future__ import annotations

import select
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from harness.approval.grants import NotGrantable
from harness.approval.queue import ApprovalQueue
from harness.approval.records import DecisionRefused, Request
from harness.errors import ApprovalError
from harness.tools.outbound.preview import gutter
from sandbox.text import escape_ident, escape_unsafe

APPROVE_WORDS = ("y", "yes", "a", "approve")
DENY_WORDS = ("n", "no", "deny")
GRANT_WORDS = ("g", "grant")
DENY_GRANT_WORDS = ("d", "deny-grant")


@dataclass
class ConsolePrompt:
    stdin: TextIO
    stdout: TextIO
    actor: str = "console"
    poll_interval: float = 0.25

    def _say(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()

    def _line(self, queue: ApprovalQueue, request: Request, deadline: float,
              ended: Callable[[], str | None]) -> str | Request | None:
        """The next typed line; a Request when it was decided elsewhere; None at the deadline, at EOF or
        once the session ended."""
        while time.time() < deadline and ended() is None:
            ready, _, _ = select.select([self.stdin], [], [], self.poll_interval)
            if ready:
                line = self.stdin.readline()
                return None if line == "" else line.strip()
            current = queue.get(request.id)
            if current.status != "pending":
                return current
        return None

    def ask(self, queue: ApprovalQueue, request: Request, deadline: float,
            ended: Callable[[], str | None] = lambda: None) -> Request:
        self._say(f"\n{gutter(request.preview, request.id)}\n{describe(request)}\n")
        question = (f"Approve outbound request #{request.id}? [yes/no] (g: approve by a grant for this run, d: "
                    f"deny by a grant for this run; or decide elsewhere: harness approvals "
                    f"approve {request.id} --hash {escape_ident(request.request_hash)}): ")
        while True:
            self._say(question)
            answer = self._line(queue, request, deadline, ended)
            if isinstance(answer, Request):
                self._say(f"\nrequest #{answer.id} was {answer.status} by {escape_ident(answer.decided_by or '')}\n")
                return answer
            if answer is None and ended() is not None:
                self._say(f"\nthe session ended: request #{request.id} is withdrawn\n")
                return request
            if answer is None:
                self._say("\nno answer (time is up, or the input was closed): the request expires\n")
                return queue.expire(request.id, time.time() - request.created_at)
            if answer.lower() in APPROVE_WORDS:
                return self._decide(queue, request, True, "")
            if answer.lower() in DENY_WORDS:
                self._say("Reason for the model (optional, Enter to skip): ")
                reason = self._line(queue, request, deadline, ended)
                if isinstance(reason, Request):
                    return reason
                return self._decide(queue, request, False, reason or "")
            if answer.lower() in GRANT_WORDS + DENY_GRANT_WORDS:
                granted = self._grant(queue, request, answer.lower() in GRANT_WORDS, deadline, ended)
                if granted is not None:
                    return granted
                continue
            self._say(f"please type yes, no, g or d (got {escape_unsafe(answer[:40])!r})\n")

    def _grant(self, queue: ApprovalQueue, request: Request, approve: bool, deadline: float,
               ended: Callable[[], str | None]) -> Request | None:
        """Show the derived rule and confirm it; the decided request, or None (nothing decided)."""
        try:
            rule = queue.derive_grant(request.id, approve)
        except NotGrantable as exc:
            self._say(f"no grant can be made from request #{request.id}: {escape_unsafe(exc.why)}\n")
            return None
        self._say(f"grant for this run: {escape_ident(rule.text())}\nMake this grant? [yes/no]: ")
        answer = self._line(queue, request, deadline, ended)
        if isinstance(answer, Request):
            return answer
        if answer is None or answer.lower() not in APPROVE_WORDS:
            self._say("no grant made; nothing decided\n")
            return None
        try:
            decided, grant = queue.decide_with_grant(request.id, approve, self.actor, seen_hash=request.request_hash,
                                                     shown_rule=rule, scope_kind="run")
        except DecisionRefused as exc:
            if exc.why != "decided":
                raise
            return queue.get(request.id)
        except ApprovalError as exc:
            self._say(f"no grant made: {escape_unsafe(str(exc))}\n")
            return None
        self._say(f"request #{decided.id}: {decided.status}; grant G{grant.id} made\n")
        return decided

    def tell(self, request: Request) -> None:
        """A request decided by a grant, without asking: one line, every value escaped."""
        self._say(f"\noutbound request #{request.id} ({escape_ident(request.tool)}, key {escape_ident(request.key)}) "
                  f"{request.status} by grant G{request.grant_id}: {escape_unsafe(request.reason or '')}\n")

    def _decide(self, queue: ApprovalQueue, request: Request, approve: bool, reason: str) -> Request:
        try:
            decided = queue.decide(request.id, approve, self.actor, reason, seen_hash=request.request_hash)
        except DecisionRefused as exc:
            if exc.why != "decided":      # changed since shown: nothing is approved, the operator is told
                raise
            decided = queue.get(request.id)   # decided elsewhere in the meantime: that decision stands
        self._say(f"request #{decided.id}: {decided.status}\n")
        return decided


def describe(request: Request) -> str:
    """The line under the preview: who asks and under which name, every value escaped."""
    return (f"tool {escape_ident(request.tool)}, session {escape_ident(request.session)}, key "
            f"{escape_ident(request.key)}, hash {escape_ident(request.request_hash)}")
