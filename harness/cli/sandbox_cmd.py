"""`harness sandbox build|reap|prune`: the sandbox image, leftover containers and stale images."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from harness.cli.common import EXIT_USAGE, print_safe, stderr_progress
from sandbox.docker_client import client_or_default
from sandbox.images import PYTHON_RELEASES, ensure_image, prune
from sandbox.reaper import reap, reap_all


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("sandbox", help="build the sandbox image, remove leftover containers and stale images")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    b = actions.add_parser("build", help="build the sandbox image (only when its inputs changed)")
    b.add_argument("--python", default="3.11",
                   help=f"Python version in the image (offline: {', '.join(PYTHON_RELEASES)})")
    b.add_argument("--base", choices=["auto", "registry", "debootstrap"], default="auto",
                   help="auto: official python:X-slim image when a registry answers, else debootstrap Debian")
    b.add_argument("--force", action="store_true", help="rebuild even when an up-to-date image exists")
    b.set_defaults(func=_build)
    r = actions.add_parser("reap", help="remove containers left by crashed harness runs")
    r.add_argument("--all", action="store_true",
                   help="remove every harness container but those whose owner process is alive (named)")
    r.add_argument("--force", action="store_true", help="with --all: remove those of live owners too")
    r.add_argument("--json", action="store_true",
                   help="print the removed names as JSON (with --all: {removed, spared})")
    r.set_defaults(func=_reap)
    pr = actions.add_parser("prune", help="remove sandbox and environment images the present sources no longer use")
    pr.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    pr.add_argument("--json", action="store_true", help="print the result as JSON")
    pr.set_defaults(func=_prune)


def _build(args: argparse.Namespace) -> int:
    tag = ensure_image(python=args.python, base=args.base, progress=stderr_progress("sandbox build"),
                       force=args.force)
    print_safe(sys.stdout, tag)
    return 0


def _reap(args: argparse.Namespace) -> int:
    if args.force and not args.all:
        print_safe(sys.stderr, "harness sandbox reap: --force goes with --all (remove even the containers of live "
                               "owners), e.g. `harness sandbox reap --all --force`")
        return EXIT_USAGE
    if not args.all:
        removed = reap(client_or_default())
        if args.json:
            print(json.dumps(removed))
        else:
            print_safe(sys.stdout, f"removed {len(removed)}: {', '.join(removed)}" if removed else "nothing to remove")
        return 0
    result = reap_all(client_or_default(), force=args.force)
    if args.json:
        print(json.dumps({"removed": result.removed, "spared": [asdict(s) for s in result.spared]}))
        return 0
    removed = result.removed
    print_safe(sys.stdout, f"removed {len(removed)}: {', '.join(removed)}" if removed else "nothing to remove")
    if result.spared:
        count = sum(len(s.containers) for s in result.spared)
        print_safe(sys.stdout, f"spared {count} container(s) of {len(result.spared)} live owner process(es) "
                               "(--all --force removes them too):")
        for owner in result.spared:
            print_safe(sys.stdout, f"  pid {owner.pid} ({owner.command or 'command line unreadable'}): "
                                   f"{', '.join(owner.containers)}")
    return 0


def _prune(args: argparse.Namespace) -> int:
    removed, in_use = prune(client_or_default(), dry_run=args.dry_run)
    if args.json:
        print(json.dumps({"removed": removed, "in_use": in_use, "dry_run": args.dry_run}))
        return 0
    verb = "would remove" if args.dry_run else "removed"
    print_safe(sys.stdout, f"{verb} {len(removed)} image(s)" + (f": {', '.join(removed)}" if removed else ""))
    if in_use:
        print_safe(sys.stdout, f"kept {len(in_use)} still used by a container: {', '.join(in_use)}")
    return 0
