"""What the policy (and the grants) would do with one request, and why: `harness approvals explain`.

    explain(policy, tool, args, grants=..., request=...)   an `Explanation`: every rule with what each of
                                                           its parts matched, the grants that cover the
                                                           request, and which one decides
    render(explanation)                                    the text an operator reads, every value from the
                                                           request escaped (`escape_unsafe` / `escape_ident`)

The decision is found as the gate finds it (`harness.approval.gate.ApprovalGate._apply_policy`): a deny
grant first, then the strictest applying rule (deny over ask over approve), then an approve grant when no
rule applies, else the run's mode asks a person (or denies, unattended).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from harness.approval.policy import Check, Decision, Policy, applies
from sandbox.text import escape_ident, escape_unsafe

if TYPE_CHECKING:
    from harness.approval.records import Grant, Request

try:  # grants are optional here: a tree without harness.approval.grants explains rules only
    from harness.approval.grants import GrantRule, covers
except ImportError:  # pragma: no cover - only in a tree without grants
    GrantRule = None  # type: ignore[assignment,misc]

SHOWN = 300
"""Characters of one value shown on a line of `render` (the rest is counted, not shown; --json has all)."""


@dataclass(frozen=True)
class RuleTrace:
    name: str
    decision: Decision
    applies: bool
    checks: tuple[Check, ...]


@dataclass(frozen=True)
class GrantTrace:
    id: int
    decision: str
    rule_text: str
    scope: str
    in_scope: bool | None     # None: no request to hold its scope against (a REQUEST.json)


@dataclass(frozen=True)
class Explanation:
    tool: str
    arguments: dict[str, Any]
    rules: tuple[RuleTrace, ...]
    grants: tuple[GrantTrace, ...]
    decision: Decision
    decided_by: str           # "rule NAME", "grant G3", "MCP tool hints", "no rule: the run's mode"
    why: str
    source: str
    warnings: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def explain(policy: Policy, tool: str, args: Mapping[str, Any], grants: list[Grant] | None = None,
            request: Request | None = None) -> Explanation:
    """How `policy` (and the active `grants` covering it) decide `tool` called with `args` (as it runs)."""
    traces = []
    for rule in policy.rules:
        checks = rule.checks(tool, args)
        traces.append(RuleTrace(rule.name, rule.decision, applies(checks), tuple(checks)))
    covering = _covering(grants or [], tool, dict(args), request)
    verdict = policy.decide(tool, args)
    deciding = [g for g in covering if g.in_scope is not False]
    deny = next((g for g in deciding if g.decision == "deny"), None)
    approve = next((g for g in deciding if g.decision == "approve"), None)
    if deny is not None:
        decision, by, said = "deny", f"grant G{deny.id}", "a deny grant covers it; deny grants come before the rules"
    elif verdict.rule is not None:
        decision, by, said = verdict.decision, _by(verdict.rule, policy), verdict.reason
    elif approve is not None:
        decision, by, said = "approve", f"grant G{approve.id}", "no rule applies and an approve grant covers it"
    else:
        decision, by, said = "ask", "no rule: the run's mode", ("no rule applies: a person decides (with "
                                                                "--approve deny, an unattended run, it is denied)")
    return Explanation(tool, dict(args), tuple(traces), tuple(covering), decision, by, said,  # type: ignore[arg-type]
                       policy.source, policy.warnings)


def _by(rule: str, policy: Policy) -> str:
    return "MCP tool hints" if rule not in {r.name for r in policy.rules} else f"rule {rule}"


def _covering(grants: list[Grant], tool: str, args: dict[str, Any], request: Request | None) -> list[GrantTrace]:
    if GrantRule is None:
        return []
    now = time.time()
    out = []
    for grant in grants:
        if grant.active(now) and covers(GrantRule.from_json(grant.rule), tool, args):
            in_scope = None if request is None else grant.applies_to(request)
            out.append(GrantTrace(grant.id, grant.decision, grant.rule_text, grant.shown_scope, in_scope))
    return out


def render(e: Explanation) -> str:
    """The explanation as text; every value that came from the request is escaped."""
    shown = repr(e.arguments)
    shown = shown if len(shown) <= 4 * SHOWN else f"{shown[:4 * SHOWN]}... ({len(shown)} characters)"
    lines = [f"request: {escape_ident(e.tool)} {escape_unsafe(shown)}", f"policy: {escape_unsafe(e.source)}"]
    lines += [f"warning: {escape_unsafe(w)}" for w in e.warnings]
    for trace in e.rules:
        state = "applies" if trace.applies else "does not apply"
        lines.append(f"rule {escape_ident(trace.name)} ({trace.decision}): {state}")
        lines += [f"    {escape_unsafe(_check(c))}" for c in trace.checks]
    if not e.rules:
        lines.append("no rules in the policy")
    for g in e.grants:
        scope = {None: "", True: ", in scope", False: ", not this request's scope"}[g.in_scope]
        lines.append(f"grant G{g.id} ({g.decision}, {escape_unsafe(g.scope)}{scope}) covers it: "
                     f"{escape_unsafe(g.rule_text)}")
    lines.append(f"decision: {e.decision}, by {escape_ident(e.decided_by)}: {escape_unsafe(e.why)}")
    lines.append("(strictest wins: a deny grant, then deny over ask over approve among the applying rules, "
                 "then an approve grant when no rule applies)")
    return "\n".join(lines)


def _check(c: Check) -> str:
    value = repr(c.value) if len(c.value) <= SHOWN else f"{c.value[:SHOWN]!r}... ({len(c.value)} characters)"
    verb = "matches" if c.matched else "does not match"
    where = "tool" if c.part == "tool" else f"{c.part} {c.key}"
    return f"{where} {value} {verb} {c.pattern!r}"
