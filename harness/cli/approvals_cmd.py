"""`harness approvals`: list, show, approve, deny outbound requests; serve the web page; export the audit log.

An approval names the hash of the request the human saw: `approve ID --hash H` (the hash printed by
`show` and by the prompt of `harness run`), or, without `--hash` on a terminal, the preview is shown
and confirmed here. Every string from the model or the database is escaped before it is printed.

`approve ID --hash H --grant run|session|DURATION` (and `deny ... --grant`) also makes a grant: the
rule derived from this request (`harness.approval.grants`) is printed in full and confirmed (`--yes`
for scripts); `--narrow KEY=PATTERN` narrows it, never widens it. `grants` lists them, `revoke G`
ends one at once.

Exit codes: 0 done; 1 the request cannot take that decision (already decided, or not the request
that was seen: its hash differs); 2 bad input (no such request; approve without --hash and no
terminal to show the preview on); 3 not confirmed at the terminal (the request stays pending).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import getpass
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from harness.approval.console import describe
from harness.approval.grants import NotGrantable
from harness.approval.queue import ApprovalQueue
from harness.approval.records import STATUSES, DecisionRefused, GrantScope, UnknownRequest
from harness.cli.approvals_explain import add_explain
from harness.cli.common import EXIT_FAILED, EXIT_NOT_CONFIRMED, EXIT_USAGE
from harness.cli.web_cmd import add_server_options, serve_console
from harness.config import load
from harness.errors import ApprovalError
from harness.tools.outbound.preview import gutter
from sandbox.text import escape_ident, escape_unsafe


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("approvals", help="decide outbound requests held for approval; web page; audit log",
                       description="Outbound requests (HTTP, package downloads, git pushes) wait here for a human.")
    p.add_argument("--state-dir", type=Path, help="where approvals.sqlite3 lives (default: $HARNESS_STATE_DIR "
                                                  "or the user's state dir)")
    cmds = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    ls = cmds.add_parser("list", help="pending requests (all with --all)")
    ls.add_argument("--status", choices=STATUSES, action="append", help="only these statuses (repeatable)")
    ls.add_argument("--all", action="store_true", help="every request, newest first")
    ls.add_argument("--json", action="store_true")
    show = cmds.add_parser("show", help="one request with its full preview")
    show.add_argument("id", type=int)
    show.add_argument("--json", action="store_true")
    for name, verb in (("approve", "approve"), ("deny", "deny")):
        d = cmds.add_parser(name, help=f"{verb} a pending request; a waiting session resumes at once")
        d.add_argument("id", type=int)
        d.add_argument("--hash", dest="seen_hash", metavar="H",
                       help="the full hash of the request as you saw it (`show ID` prints it); without it "
                            + ("the preview is shown and confirmed on this terminal, and refused off a terminal"
                               if name == "approve" else "the request is denied whatever it holds"))
        d.add_argument("--reason", default="", help="why (a denial's reason is passed to the model)")
        d.add_argument("--by", default=f"cli:{getpass.getuser()}", help="who decides (recorded)")
        d.add_argument("--grant", metavar="SCOPE", type=_scope,
                       help=f"also {verb} later requests the rule derived from this one covers, for this run "
                            "(`run`), this session (`session`) or a time (`30m`, `2h`, `1d`); needs --hash")
        d.add_argument("--narrow", metavar="KEY=PATTERN", action="append", default=[], type=_narrowing,
                       help="narrow the derived rule: path=/docs/3/api/, version=2.*, headers= (repeatable)")
        d.add_argument("--yes", action="store_true", help="make the grant without asking (it is still printed)")
        d.add_argument("--json", action="store_true")
    grants = cmds.add_parser("grants", help="grants: rule, scope, expiry, who, from which request, how many decided")
    grants.add_argument("--json", action="store_true")
    revoke = cmds.add_parser("revoke", help="end a grant at once (a request already claimed still runs once)")
    revoke.add_argument("grant", type=_grant_id, metavar="GRANT", help="a grant id as `grants` lists it: G3 or 3")
    revoke.add_argument("--by", default=f"cli:{getpass.getuser()}", help="who revokes (recorded)")
    serve = cmds.add_parser("serve", help="the web console opened on its approvals view (same as `harness web`): "
                                          "pending requests with approve/deny, and history")
    add_server_options(serve, default_port_help="8765")
    ex = cmds.add_parser("export", help="the audit log of every decision and execution")
    ex.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    ex.add_argument("--output", "-o", type=Path, help="file to write (default: standard output)")
    add_explain(cmds)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    config, _ = load()
    approval = config.approval if args.state_dir is None else dataclasses.replace(
        config.approval, state_dir=args.state_dir)
    queue = ApprovalQueue(approval.state_dir)
    try:
        if args.action == "serve":
            return _serve(queue, args, approval.web_host, approval.web_port)
        return {"list": _list, "show": _show, "approve": _decide, "deny": _decide, "grants": _grants,
                "revoke": _revoke, "export": _export}[args.action](queue, args)
    except DecisionRefused as exc:
        print(f"harness approvals: {escape_unsafe(str(exc))}", file=sys.stderr)
        return EXIT_USAGE if exc.why == "unseen" else EXIT_FAILED
    except NotGrantable as exc:
        print(f"harness approvals: no grant can be made from request #{args.id}: {escape_unsafe(exc.why)}; nothing "
              f"was decided (decide it without --grant)", file=sys.stderr)
        return EXIT_FAILED
    except (UnknownRequest, ApprovalError) as exc:
        print(f"harness approvals: {escape_unsafe(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        queue.close()


def _serve(queue: ApprovalQueue, args: argparse.Namespace, host: str, port: int) -> int:
    return serve_console(queue, args, [], host, port, landing="approvals", label="approvals page")


def _when(ts: float | None) -> str:
    return "-" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def _list(queue: ApprovalQueue, args: argparse.Namespace) -> int:
    statuses = tuple(args.status or ()) if (args.status or args.all) else ("pending",)
    requests = queue.requests(statuses)
    if args.json:
        print(json.dumps([r.to_dict() for r in requests], indent=2))
        return 0
    if not requests:
        print(f"no {'/'.join(statuses) or ''} requests in {queue.path}".replace("no  ", "no "))
        return 0
    for r in requests:
        print(f"#{r.id:<5} {r.shown_status:<10} {escape_ident(r.tool):<14} key={escape_ident(r.key)[:40]:<20} "
              f"session={escape_ident(r.session)[:24]}  {_when(r.created_at)}"
              + (f"  by {escape_ident(r.decided_by)}" if r.decided_by else ""))
    return 0


def _show(queue: ApprovalQueue, args: argparse.Namespace) -> int:
    r = queue.get(args.id)
    if args.json:
        print(json.dumps(r.to_dict(), indent=2))
        return 0
    print(gutter(r.preview, r.id))
    rows: list[tuple[str, Any]] = [
        ("status", escape_ident(r.shown_status)), ("tool", escape_ident(r.tool)), ("key", escape_ident(r.key)),
        ("session", escape_ident(r.session)), ("created", _when(r.created_at)), ("hash", escape_ident(r.request_hash)),
        ("decided", f"{_when(r.decided_at)} by {escape_ident(r.decided_by)}" if r.decided_by else "-"),
        ("rule", escape_ident(r.rule or "-")), ("reason", escape_unsafe(r.reason or "-")),
        ("executed", f"{_when(r.started_at)} .. {_when(r.finished_at)}" if r.started_at else "-")]
    for label, value in rows:
        print(f"{label:<9} {value}")
    if r.result is not None:
        print("result:\n" + "\n".join("  " + line for line in escape_unsafe(r.result).splitlines()))
    return 0


def _confirm(queue: ApprovalQueue, request_id: int) -> str | None:
    """Show the request on this terminal and ask; the hash of what was shown, or None if not confirmed."""
    r = queue.get(request_id)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise DecisionRefused(
            f"approve {request_id}: no --hash and no terminal to show the request on; an approval must name "
            f"the request you saw. Read it with `harness approvals show {request_id}`, then run `harness "
            f"approvals approve {request_id} --hash <the hash it prints>`", request_id=request_id,
            status=r.status, why="unseen")
    print(f"{gutter(r.preview, r.id)}\n{describe(r)}\nstatus {escape_ident(r.shown_status)}")
    print(f"Approve request #{r.id} as shown above? [yes/no]: ", end="", flush=True)
    answer = sys.stdin.readline().strip().lower()
    return r.request_hash if answer in ("y", "yes") else None


DURATION = re.compile(r"([1-9][0-9]*)([smhd])")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _scope(text: str) -> tuple[GrantScope, float | None]:
    if text in ("run", "session"):
        return ("run" if text == "run" else "session"), None
    found = DURATION.fullmatch(text)
    if found is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not run, session or a duration such as 30m, 2h, 1d")
    return "until", time.time() + int(found.group(1)) * UNITS[found.group(2)]


def _narrowing(text: str) -> tuple[str, str]:
    key, sep, pattern = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=PATTERN, e.g. path=/docs/3/api/")
    return key.strip(), pattern.strip()


def _grant_id(text: str) -> int:
    digits = text[1:] if text[:1] in ("G", "g") else text
    if not digits.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a grant id; `harness approvals grants` lists them, e.g. G3")
    return int(digits)


def _decide_with_grant(queue: ApprovalQueue, args: argparse.Namespace, approve: bool) -> int:
    if args.seen_hash is None:
        raise DecisionRefused(f"a grant is made from the request you saw: pass --hash (`harness approvals show "
                              f"{args.id}` prints it)", request_id=args.id, status="pending", why="unseen")
    kind, until = args.grant
    rule = queue.derive_grant(args.id, approve, tuple(args.narrow))
    scope = "until " + _when(until) if kind == "until" else f"this {kind}"
    print(f"grant from request #{args.id}, for {scope}: {escape_ident(rule.text())}")
    if not args.yes:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            print("harness approvals: a grant is confirmed on a terminal, or with --yes; nothing decided",
                  file=sys.stderr)
            return EXIT_USAGE
        print("Make this grant? [yes/no]: ", end="", flush=True)
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            print(f"no grant made; request #{args.id} is unchanged", file=sys.stderr)
            return EXIT_NOT_CONFIRMED
    r, grant = queue.decide_with_grant(args.id, approve, args.by, seen_hash=args.seen_hash, shown_rule=rule,
                                       scope_kind=kind, expires_at=until, reason=args.reason,
                                       narrowings=tuple(args.narrow))
    if args.json:
        print(json.dumps({"request": r.to_dict(), "grant": grant.to_dict()}, indent=2))
    else:
        print(f"request #{r.id} ({escape_ident(r.tool)}) {r.status} by {escape_ident(r.decided_by or '')}; "
              f"grant G{grant.id} made")
    return 0


def _grants(queue: ApprovalQueue, args: argparse.Namespace) -> int:
    grants = queue.grants()
    if args.json:
        print(json.dumps([g.to_dict() for g in grants], indent=2))
        return 0
    if not grants:
        print(f"no grants in {queue.path}")
    now = time.time()
    for g in grants:
        state = (f"revoked {_when(g.revoked_at)} by {escape_ident(g.revoked_by or '')}" if g.revoked_at
                 else "active" if g.active(now) else "expired")
        print(f"G{g.id:<4} {state:<8} {g.shown_scope:<22} by {escape_ident(g.granted_by)} from request "
              f"#{g.from_request} (hash {g.preview_hash[:16]}...), decided {g.decided}\n      "
              f"{escape_ident(g.rule_text)}")
    return 0


def _revoke(queue: ApprovalQueue, args: argparse.Namespace) -> int:
    g = queue.revoke(args.grant, args.by)
    print(f"grant G{g.id} revoked by {escape_ident(g.revoked_by or '')}: it decides no request from now on")
    return 0


def _decide(queue: ApprovalQueue, args: argparse.Namespace) -> int:
    approve, seen = args.action == "approve", args.seen_hash
    if args.grant is not None:
        return _decide_with_grant(queue, args, approve)
    if args.narrow:
        print("harness approvals: --narrow narrows a grant; give --grant run (or session, 30m)", file=sys.stderr)
        return EXIT_USAGE
    if approve and seen is None:
        seen = _confirm(queue, args.id)
        if seen is None:
            print(f"not approved; request #{args.id} is unchanged", file=sys.stderr)
            return EXIT_NOT_CONFIRMED
    r = queue.decide(args.id, approve, args.by, args.reason, seen_hash=seen)
    if args.json:
        print(json.dumps(r.to_dict(), indent=2))
    else:
        print(f"request #{r.id} ({escape_ident(r.tool)}) {r.status} by {escape_ident(r.decided_by or '')}"
              + (f": {escape_unsafe(r.reason)}" if r.reason else ""))
    return 0


def _export(queue: ApprovalQueue, args: argparse.Namespace) -> int:
    events = [e.to_dict() for e in queue.audit()]
    out = args.output.open("w", newline="") if args.output else sys.stdout
    try:
        if args.format == "jsonl":
            for event in events:
                out.write(json.dumps(event, sort_keys=True) + "\n")
        else:
            writer = csv.writer(out)
            writer.writerow(["id", "at", "request_id", "event", "actor", "detail"])
            for e in events:
                writer.writerow([e["id"], e["at"], e["request_id"], escape_ident(e["event"]), escape_ident(e["actor"]),
                                 json.dumps(e["detail"], sort_keys=True)])
    finally:
        if args.output:
            out.close()
    if args.output:
        print(f"wrote {len(events)} audit events to {args.output}", file=sys.stderr)
    return 0

