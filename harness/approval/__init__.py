"""Human approval of every action that leaves the sandbox, run exactly once.

`queue` (SQLite: requests, decisions, the audit log), `policy` (rules that approve or deny before a
person is asked), `gate` (holds a call until it is decided, then runs it once), `console` and `web`
(where a person answers), `wiring` (the gate a session gets for its approval mode). Imports `tools`
(the outbound actions it holds); `tools` never imports it.
"""

from typing import TYPE_CHECKING

from harness.approval.gate import ApprovalGate
from harness.approval.policy import Policy, load_policy
from harness.approval.queue import ApprovalQueue
from harness.approval.records import AuditEvent, DecisionRefused, Request, UnknownRequest
from harness.approval.wiring import make_gate, resolve_mode
from sandbox.surface import lazy_names

__all__ = [
    "ApprovalGate", "ApprovalQueue", "AuditEvent", "DecisionRefused", "derive", "describe", "example_of",
    "explain", "GrantScope", "load_policy", "make_gate", "NotGrantable", "Policy", "render", "Request",
    "resolve_mode", "STATUSES", "UnknownRequest",
]


# Names other packages use, loaded on first use: importing the package costs nothing (sandbox.surface).
if TYPE_CHECKING:
    from harness.approval import explain
    from harness.approval.console import describe
    from harness.approval.explain import render
    from harness.approval.grants import NotGrantable, derive
    from harness.approval.policy import example_of
    from harness.approval.records import STATUSES, GrantScope

__getattr__ = lazy_names(__name__, {
    "harness.approval.console": ("describe",),
    "harness.approval.explain": ("explain", "render"),
    "harness.approval.grants": ("NotGrantable", "derive"),
    "harness.approval.policy": ("example_of",),
    "harness.approval.records": ("GrantScope", "STATUSES"),
})
