"""`harness approvals explain REQUEST.json | --id ID [--policy FILE] [--json]`: which rules (and grants)
match a request, which one decides and why (strictest wins), so an operator can test a policy before a run.

REQUEST.json is a request as a rule sees it: `{"tool": "http_request", "arguments": {"method": "GET",
"url": "https://docs.python.org/3/"}}`; `--id ID` explains a request of the queue (its arguments as they
run, and the grants in its scope). The policy is `--policy FILE`, else HARNESS_APPROVAL_POLICY; a policy
the gate would refuse (a malformed rule, an example that does not behave as stated) is refused here too.

Exit codes: 0 explained; 2 bad input (unreadable or malformed REQUEST.json, no such request, a refused
policy file).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from harness.approval.explain import explain, render
from harness.approval.policy import example_of, load_policy
from harness.approval.queue import ApprovalQueue
from harness.approval.records import UnknownRequest
from harness.cli.common import EXIT_USAGE
from harness.config import load
from harness.errors import ConfigError
from sandbox.text import escape_unsafe

REQUEST_EXAMPLE = '{"tool": "http_request", "arguments": {"method": "GET", "url": "https://docs.python.org/3/"}}'


def add_explain(cmds: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `explain` under `harness approvals` (it runs on its own: `func` is set here)."""
    p = cmds.add_parser("explain", help="which policy rules and grants match a request and which decides (and why)",
                        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("request", nargs="?", type=Path, metavar="REQUEST.json",
                   help=f"a request as a rule sees it, e.g. {REQUEST_EXAMPLE}")
    p.add_argument("--id", type=int, help="explain request ID of the queue instead")
    p.add_argument("--policy", type=Path, help="the policy file to test (default: HARNESS_APPROVAL_POLICY)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run_explain)


def run_explain(args: argparse.Namespace) -> int:
    config, _ = load()
    approval = config.approval if args.state_dir is None else dataclasses.replace(
        config.approval, state_dir=args.state_dir)
    if (args.request is None) == (args.id is None):
        print(f"harness approvals explain: give REQUEST.json or --id ID (one of them), e.g. a file holding "
              f"{REQUEST_EXAMPLE}", file=sys.stderr)
        return EXIT_USAGE
    try:
        policy = load_policy(args.policy or approval.policy_file)
        queue = ApprovalQueue(approval.state_dir)
        try:
            request = queue.get(args.id) if args.id is not None else None
            tool, arguments = (request.tool, request.args) if request is not None else _read(args.request)
            grants = queue.grants() if hasattr(queue, "grants") else []
            explained = explain(policy, tool, arguments, grants, request)
        finally:
            queue.close()
    except (ConfigError, UnknownRequest) as exc:
        print(f"harness approvals explain: {escape_unsafe(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    print(json.dumps(explained.to_dict(), indent=2) if args.json else render(explained))
    return 0


def _read(path: Path) -> tuple[str, dict[str, object]]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read the request {path}: {exc}; expected JSON such as {REQUEST_EXAMPLE}") from exc
    request = example_of(raw, str(path))
    return request.tool, request.arguments
