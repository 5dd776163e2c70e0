"""Human approval of every action that leaves the sandbox, run exactly once.

`queue` (SQLite: requests, decisions, the audit log), `policy` (rules that approve or deny before a
person is asked), `gate` (holds a call until it is decided, then runs it once), `console` and `web`
(where a person answers), `wiring` (the gate a session gets for its approval mode). Imports `tools`
(the outbound actions it holds); `tools` never imports it.
"""

from harness.approval.gate import ApprovalGate
from harness.approval.policy import Policy, load_policy
from harness.approval.queue import ApprovalQueue
from harness.approval.records import AuditEvent, DecisionRefused, Request, UnknownRequest
from harness.approval.wiring import make_gate, resolve_mode

__all__ = [
    "ApprovalGate", "ApprovalQueue", "AuditEvent", "DecisionRefused", "Policy", "Request", "UnknownRequest",
    "load_policy", "make_gate", "resolve_mode",
]
