"""`harness run`: not built yet (placeholder registered so the command list is complete)."""

from __future__ import annotations

import argparse


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("run", help="(not available yet)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    print("harness run: not available in this version")
    return 2
