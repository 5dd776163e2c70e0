"""`harness sandbox build|reap|prune`: the sandbox image, leftover containers and stale images."""

from __future__ import annotations

import argparse
import json
import sys

from harness.cli.common import print_safe, stderr_progress
from sandbox.docker_client import client_or_default
from sandbox.images import PYTHON_RELEASES, ensure_image, prune
from sandbox.reaper import reap


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
    r.add_argument("--all", action="store_true", help="remove every harness container, even of live runs")
    r.add_argument("--json", action="store_true", help="print the removed names as JSON")
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
    removed = reap(client_or_default(), everything=args.all)
    if args.json:
        print(json.dumps(removed))
    else:
        print_safe(sys.stdout, f"removed {len(removed)}: {', '.join(removed)}" if removed else "nothing to remove")
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
