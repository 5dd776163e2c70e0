"""`harness tasks check|list|export`: validate, list and export repair task directories.

Exit codes: 0 success; 2 a task is invalid or the input is wrong.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.cli.common import EXIT_USAGE, print_safe
from harness.core.task import check_task, find_task_dirs, load_task
from harness.evaluation.instances import export_instances

DEFAULT_DIRS = [Path("tasks")]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("tasks", help="check, list or export repair tasks",
                       description="Work with task directories (task.json, problem.md, repo/, gold.patch, "
                                   "test.patch). DIRS are task directories or folders of them (default: tasks/).")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    check = actions.add_parser("check", help="validate tasks, listing every problem; patches must apply")
    check.add_argument("dirs", nargs="*", type=Path, metavar="DIRS")
    check.set_defaults(func=_check)
    listing = actions.add_parser("list", help="list tasks with their Python, tests and requirements")
    listing.add_argument("dirs", nargs="*", type=Path, metavar="DIRS")
    listing.add_argument("--json", action="store_true", help="one JSON object per task")
    listing.set_defaults(func=_list)
    export = actions.add_parser("export", help="write tasks as SWE-bench instances (JSONL) plus source tarballs",
                                description="Write the tasks as a SWE-bench-style instances file and their "
                                            "sources as REPOS/<instance_id>.tar.gz, ready for "
                                            "`harness eval --instances FILE --repos REPOS`.")
    export.add_argument("dirs", nargs="*", type=Path, metavar="DIRS")
    export.add_argument("--out", type=Path, required=True, help="the instances file to write, e.g. tasks.jsonl")
    export.add_argument("--repos", type=Path, required=True, help="folder for the source tarballs")
    export.set_defaults(func=_export)


def _check(args: argparse.Namespace) -> int:
    dirs = find_task_dirs(args.dirs or DEFAULT_DIRS)
    bad = 0
    for d in dirs:
        problems = check_task(d)
        if problems:
            bad += 1
            print_safe(sys.stdout, f"{d}: INVALID")
            for problem in problems:
                print_safe(sys.stdout, f"  - {problem}")
        else:
            print_safe(sys.stdout, f"{d}: ok")
    print_safe(sys.stdout, f"{len(dirs) - bad} of {len(dirs)} task(s) valid")
    return EXIT_USAGE if bad or not dirs else 0


def _list(args: argparse.Namespace) -> int:
    tasks = [load_task(d) for d in find_task_dirs(args.dirs or DEFAULT_DIRS)]
    for t in tasks:
        row = {"id": t.id, "python": t.python, "FAIL_TO_PASS": len(t.fail_to_pass),
               "PASS_TO_PASS": len(t.pass_to_pass), "requirements": list(t.requirements),
               "gold_patch": t.gold_patch is not None, "test_patch": t.test_patch is not None,
               "repo_dir": str(t.repo_dir)}
        if args.json:
            print(json.dumps(row))
        else:
            reqs = ", ".join(t.requirements) or "-"
            print_safe(sys.stdout, f"{t.id:<14} python {t.python:<5} F2P {len(t.fail_to_pass):>2}  "
                                   f"P2P {len(t.pass_to_pass):>2}  gold {'yes' if t.gold_patch else 'no ':<3}  "
                                   f"test.patch {'yes' if t.test_patch else 'no ':<3}  {reqs}")
    return 0


def _export(args: argparse.Namespace) -> int:
    tasks = [load_task(d) for d in find_task_dirs(args.dirs or DEFAULT_DIRS)]
    rows = export_instances(tasks, args.out, args.repos)
    print_safe(sys.stdout, f"wrote {len(rows)} instance(s) to {args.out} and their sources to {args.repos}/; "
                           f"evaluate them with `harness eval --instances {args.out} --repos {args.repos} "
                           "--model gold`")
    return 0
