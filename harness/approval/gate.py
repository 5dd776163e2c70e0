"""Where an outbound call is held: the approver every outbound tool reports to.

`ApprovalGate.run(action, arguments, ctx)` is the whole life of one outbound call:

1. the idempotency key is the model's `key` argument, else the tool_use id;
2. keys are scoped: `ToolContext.key_scope` (a run and its resumes), else the session; another scope's
   key is another action. A key seen before in this scope returns what it became (a stored result, a
   denial, "outcome unknown"), and a key already pending waits on that same request; a key reused for
   different arguments, or whose call would now run other content (the exact arguments the request
   holds, e.g. apply_changes's patch), is refused, saying what differs;
3. a new request is prepared (the exact arguments that will run, and the preview), queued, and
   decided by a grant (`harness.approval.grants`: deny grants before the policy, approve grants after
   it), the policy, a human on this terminal, or a human elsewhere (CLI, web page), polled
   from the database; no decision before the timeout: expired, and the model is told (asking again
   with the same key then queues a new request, with a new id);
4. approved: claimed (`executing` recorded before anything is sent), run once from the host with
   the stored arguments, then recorded as `done` or `failed` with its result.

`end(why, session)` is for a process whose sessions end while their calls may still wait (an MCP
server whose client went away, or whose HTTP client deleted its session): that session's waits (every
session's, without one) stop at once, a request still pending is withdrawn (expired, saying why) so no
human approves what nothing would run, and the session queues nothing new. A decision made before the
withdrawal still stands: an approved request still runs, once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.approval.grants import GrantDecision
from harness.approval.policy import Policy
from harness.approval.queue import ApprovalQueue
from harness.approval.records import DecisionRefused, Request, canonical_hash
from harness.config import ApprovalMode
from harness.errors import ApprovalDenied, ToolError
from harness.tools.base import ToolContext
from harness.tools.outbound.action import OutboundAction, Prepared
from sandbox.text import escape_ident

ENDED_KEPT = 4096
"""How many ended sessions a gate remembers (their calls queue nothing new); a call still running
when its session ended is long over by then."""


class Prompt(Protocol):
    def ask(self, queue: ApprovalQueue, request: Request, deadline: float,
            ended: Callable[[], str | None]) -> Request:
        """The request decided, expired, or still pending once `ended()` says why the session ended."""
        ...

    def tell(self, request: Request) -> None:
        """Say that `request` was decided without asking (by grant G): it is still shown."""
        ...


@dataclass
class ApprovalGate:
    """The approver of a session (`ToolContext.approver`)."""

    queue: ApprovalQueue
    policy: Policy
    mode: ApprovalMode = "ask"        # ask: terminal prompt if any + elsewhere; queue: elsewhere only; deny
    timeout: float = 600.0
    prompt: Prompt | None = None
    poll_interval: float = 0.2
    _ended: dict[str | None, str] = field(default_factory=dict)   # session (None: every one) -> why
    _wake: threading.Condition = field(default_factory=threading.Condition)

    def end(self, why: str, session: str | None = None) -> None:
        """`session` ended (None: every session of this gate; see the module docstring); `why` is told to
        whoever reads its withdrawn requests, e.g. "the MCP client went away"."""
        with self._wake:
            self._ended[session] = why
            if len(self._ended) > ENDED_KEPT:      # a long-lived server's sessions: the oldest forgotten
                del self._ended[next(k for k in self._ended if k is not None)]
            self._wake.notify_all()

    def ended(self, session: str) -> str | None:
        """Why `session` ended, or None while it goes on."""
        with self._wake:
            return self._ended.get(None) or self._ended.get(session)

    def _pause(self, session: str) -> str | None:
        """One poll interval, cut short when a session ends; then why `session` ended, if it has."""
        with self._wake:
            if self.ended(session) is None:
                self._wake.wait(self.poll_interval)
        return self.ended(session)

    def run(self, action: OutboundAction, arguments: dict[str, Any], ctx: ToolContext) -> str:
        why = self.ended(ctx.session)
        if why is not None:
            raise ToolError(f"{action.name} was not asked for: {why}")
        call_args = {k: v for k, v in arguments.items() if k != "key"}
        # A key is the caller's: it names an action of its scope only (an MCP session; a run and its
        # resumes), so another session's same key neither reaches nor blocks it. The default, the
        # tool_use id, is only unique within a session (scripted ids repeat across runs).
        scope = ctx.key_scope or ctx.session
        key = str(arguments.get("key") or (f"{ctx.session}/{ctx.tool_use_id}" if ctx.tool_use_id else ""))
        if not key:
            raise ToolError(f"{action.name}: no idempotency key: pass `key` (e.g. \"key\": \"fetch-docs-1\")")
        request = self.queue.find(action.name, key, scope)
        prepared = None
        if request is not None:
            self._same_call(request, call_args)
            if request.status != "expired":      # it ran or will run: with the content this call has
                prepared = action.prepare(dict(call_args), ctx)
                _same_content(request, prepared)
        if request is None or request.status == "expired":
            prepared = prepared or action.prepare(dict(call_args), ctx)
            request, created = self.queue.submit(session=ctx.session, scope=scope, tool=action.name, key=key,
                                                 call_args=call_args, args=prepared.args,
                                                 preview=prepared.preview)
            if not created:
                self._same_call(request, call_args)
                _same_content(request, prepared)
        if request.status == "pending":   # new, or left pending by a caller killed before the policy ran
            request = self._apply_policy(request)
        return self._conclude(request, action, ctx)

    def _same_call(self, request: Request, call_args: dict[str, Any]) -> None:
        if canonical_hash(call_args) != request.call_hash:
            raise ToolError(
                f"key {escape_ident(request.key)!r} was already used for a different {request.tool} request "
                f"(#{request.id}, {request.status}); a key names one action. Nothing was queued for this call. "
                f"Use a new key for a new action, e.g. \"key\": \"{escape_ident(request.key)}-2\"")

    def _apply_policy(self, request: Request) -> Request:
        """Strictest first: a deny grant, then a policy rule, then an approve grant (none when a rule says
        "ask": that rule wants a person every time), then the mode; else a person decides."""
        verdict = self.policy.decide(request.tool, request.args)
        try:
            decided = self._by_grant(request, "deny")
            if decided is not None:
                return decided
            if verdict.decision in ("approve", "deny"):
                return self.queue.decide(request.id, verdict.decision == "approve", "policy",
                                         verdict.reason, rule=verdict.rule)
            decided = None if verdict.rule is not None else self._by_grant(request, "approve")
            if decided is not None:
                return decided
            if self.mode == "deny":
                return self.queue.decide(
                    request.id, False, "policy", "this run is unattended (--approve deny) and no policy rule "
                    "approves this request", rule="default-deny")
        except DecisionRefused:     # decided meanwhile (a human, another session): that decision stands
            return self.queue.get(request.id)
        return request

    def _by_grant(self, request: Request, decision: GrantDecision) -> Request | None:
        decided = self.queue.decide_by_grant(request.id, (decision,))
        if decided is not None and self.prompt is not None:
            self.prompt.tell(decided)
        return decided

    def _await_decision(self, request: Request, session: str) -> Request:
        deadline = request.created_at + self.timeout
        if self.prompt is not None and self.mode == "ask":
            request = self.prompt.ask(self.queue, request, deadline, lambda: self.ended(session))
        else:
            while time.time() < deadline and self._pause(session) is None:
                request = self.queue.get(request.id)
                if request.status != "pending":
                    return request
        why = self.ended(session)
        if request.status == "pending" and why is not None:
            return self.queue.withdraw(request.id, f"withdrawn before a decision: {why}")
        if request.status == "pending":
            return self.queue.expire(request.id, time.time() - request.created_at)
        return request

    def _conclude(self, request: Request, action: OutboundAction, ctx: ToolContext) -> str:
        give_up = time.time() + self.timeout       # bounds the wait on another process's execution
        while True:
            if request.status == "pending":
                request = self._await_decision(request, ctx.session)
            elif request.status == "approved":
                claimed = self.queue.claim(request.id)
                if claimed is not None:
                    return self._execute(claimed, action, ctx)
                request = self.queue.get(request.id)
            elif request.status == "executing":
                if request.outcome_unknown or time.time() > give_up:
                    raise ToolError(_unknown(request))
                why = self._pause(ctx.session)
                if why is not None:
                    raise ToolError(f"request #{request.id} ({request.tool}) is being executed by "
                                    f"{request.executor}; this session stopped waiting for its result: {why}")
                request = self.queue.get(request.id)
            else:
                return _final(request)

    def _execute(self, request: Request, action: OutboundAction, ctx: ToolContext) -> str:
        try:
            result = action.execute(dict(request.args), ctx)
        except ToolError as exc:
            self.queue.finish(request.id, False, str(exc))
            raise ToolError(f"request #{request.id} ({request.tool}) was approved, ran once and failed: "
                            f"{exc}") from exc
        except Exception as exc:
            self.queue.finish(request.id, False, f"the harness failed while executing: "
                              f"{type(exc).__name__}: {exc}; whether it took effect is unknown; not retried")
            raise
        self.queue.finish(request.id, True, result)
        return result


def _same_content(request: Request, prepared: Prepared) -> None:
    """A key is bound to the content it ran (or will run) with: the exact arguments the human approves,
    which for some tools come from the session, not the call (apply_changes: the sandbox's patch and the
    folder; git_push: the commit). A repeat whose content differs is refused, saying what differs."""
    fields = sorted((set(prepared.args) | set(request.args)) - set(prepared.observed))
    if all(prepared.args.get(name) == request.args.get(name) for name in fields):
        return
    changed = [f"{name} (sha256 {_digest(request.args.get(name))} then, {_digest(prepared.args.get(name))} now)"
               for name in fields if prepared.args.get(name) != request.args.get(name)]
    key = escape_ident(request.key)
    raise ToolError(
        f"key {key!r} already names {request.tool} request #{request.id} ({request.status}) of this session, made "
        f"with other content: {escape_ident(', '.join(changed))} differ from what this call would run. Nothing was "
        f"queued or run for this call, and request #{request.id} is unchanged. A key names one action with one "
        f"content: to ask for this one, use a new key, e.g. \"key\": \"{key}-2\"")


def _digest(value: Any) -> str:
    return "(absent)" if value is None else canonical_hash(value)[:12]


def _unknown(request: Request) -> str:
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(request.started_at or 0))
    return (f"outcome unknown, not retried: request #{request.id} ({request.tool}, key {request.key!r}) was "
            f"being executed from {started} by {request.executor}, which stopped (or did not finish in time) "
            "before recording the result. "
            "It may or may not have taken effect; it will not run again under this key. Check the "
            "remote side; if it must be redone, ask again with a new key.")


def _final(request: Request) -> str:
    """The observation for a request that has reached an end: stored result or the reason why not."""
    who = request.decided_by or "nobody"
    if request.status == "done":
        return (f"(request #{request.id} with key {request.key!r} already ran once; its stored result "
                f"follows, nothing was sent again)\n{request.result}")
    if request.status == "failed":
        raise ToolError(f"request #{request.id} (key {request.key!r}) already ran once and failed; not "
                        f"retried under this key: {request.result}")
    if request.status == "denied":
        rule = f" (rule {request.rule})" if request.rule else ""
        raise ApprovalDenied(f"request #{request.id} ({request.tool}) was denied by {who}{rule}: "
                             f"{request.reason or 'no reason given'}. Nothing was sent. Do not repeat it; "
                             "continue without it or explain in your answer why it is needed.")
    if request.status == "expired":
        raise ApprovalDenied(f"request #{request.id} ({request.tool}) expired: {request.reason}. Nothing was "
                             "sent. Call again with the same key to ask once more.")
    raise ToolError(f"request #{request.id} is in an unexpected state {request.status!r}")
