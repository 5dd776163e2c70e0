"""The approver a session's outbound tools report to, for the session's approval mode.

A session's workspace (`harness.agent.assembly.open_workspace`) takes `make_gate(config, mode)` as its
`ToolContext.approver`; its outbound tools come with its catalog (`harness.agent.assembly.session_catalog`).
`mode` is the run's `--approve` value:

    ask     a human decides: on this terminal when there is one (prompt), and from anywhere else
            (`harness approvals approve ID --hash H`, the web page); policy rules decide first
    queue   like ask, without the terminal prompt (a supervised run watched from the web page)
    deny    unattended: only policy rules can approve; everything else is denied at once
    auto    ask when stdin and stdout are terminals, deny otherwise
"""

from __future__ import annotations

import sys
from typing import TextIO

from harness.approval.console import ConsolePrompt
from harness.approval.gate import ApprovalGate
from harness.approval.policy import load_policy
from harness.approval.queue import ApprovalQueue
from harness.config import APPROVAL_MODES, ApprovalMode, Config
from harness.errors import ConfigError


def resolve_mode(mode: str | None, stdin: TextIO | None = None, stdout: TextIO | None = None) -> ApprovalMode:
    """The effective mode: `auto` (or None) becomes ask on a terminal and deny otherwise."""
    mode = mode or "auto"
    if mode == "auto":
        stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
        return "ask" if stdin.isatty() and stdout.isatty() else "deny"
    for known in APPROVAL_MODES:
        if mode == known:
            return known
    raise ConfigError(f"approval mode {mode!r} is not one of {['auto', *APPROVAL_MODES]}; "
                      "e.g. `harness run --approve deny` for an unattended run")


def make_gate(config: Config, mode: str | None = None, *, stdin: TextIO | None = None,
              stdout: TextIO | None = None) -> ApprovalGate:
    """The approver for a session: queue in config.approval.state_dir, policy file, mode, prompt."""
    approval = config.approval
    effective = resolve_mode(mode or approval.mode, stdin, stdout)
    stdin = stdin or sys.stdin
    prompt = None
    if effective == "ask" and stdin.isatty():
        prompt = ConsolePrompt(stdin, stdout or sys.stdout, actor="console", poll_interval=approval.poll_seconds)
    return ApprovalGate(queue=ApprovalQueue(approval.state_dir), policy=load_policy(approval.policy_file),
                        mode=effective, timeout=approval.timeout_seconds, prompt=prompt,
                        poll_interval=approval.poll_seconds)

