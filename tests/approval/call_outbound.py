"""One http_request tool call made by its own harness process (used by the exactly-once tests).

Prints one JSON line: {"ok": true, "text": observation} or {"ok": false, "error": type, "text": message}.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

from harness.approval.wiring import make_gate
from harness.config import Config
from harness.errors import ToolError
from harness.tools.base import ToolContext
from harness.tools.outbound.registry import outbound_tools


def main() -> int:
    p = argparse.ArgumentParser()
    for name in ("--state-dir", "--mode", "--url", "--key", "--body", "--policy"):
        p.add_argument(name)
    p.add_argument("--method", default="POST")
    p.add_argument("--timeout", type=float, default=60.0)
    a = p.parse_args()
    base = Config()
    config = base.replace(approval=dataclasses.replace(
        base.approval, state_dir=Path(a.state_dir), mode=a.mode, timeout_seconds=a.timeout,
        poll_seconds=0.05, policy_file=Path(a.policy) if a.policy else None))
    gate = make_gate(config)
    tool = {t.name: t for t in outbound_tools(config)}["http_request"]
    ctx = ToolContext(sandbox=None, session=f"proc-{os.getpid()}", tool_use_id="toolu_1",  # type: ignore[arg-type]
                      approver=gate, key_scope="run:the-resumed-run")   # each process: one run, resumed
    try:
        body = {} if a.method in ("GET", "HEAD") else {"body": a.body}
        text = tool.function(ctx, method=a.method, url=a.url, key=a.key, **body)
        print(json.dumps({"ok": True, "text": text}))
    except ToolError as exc:
        print(json.dumps({"ok": False, "error": type(exc).__name__, "text": str(exc)}))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
