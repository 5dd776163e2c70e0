"""`harness tasks check|list|export|new`: validate, list, export and make repair task directories.

Exit codes: 0 success; 2 a task is invalid or the input is wrong.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.agent.assembly import new_session_name, open_workspace, session_image, task_spec
from harness.agent.inplace import pinned_requirements, read_problem, repo_task, task_meta, write_task_dir
from harness.cli.common import EXIT_USAGE, print_safe, stderr_progress
from harness.config import load
from harness.core.task import check_task, find_task_dirs, load_task
from harness.evaluation.instance_files import export_instances
from harness.evaluation.log_parsers import parse_log

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
    new = actions.add_parser("new", help="make a task directory from your repository and a problem",
                             description="Select the repository's files as `harness run --repo` does, build its "
                                         "environment, run the test command once at the starting state and write "
                                         "a task directory: the failing tests become FAIL_TO_PASS, the passing "
                                         "ones PASS_TO_PASS, the resolved dependencies pinned requirements.",
                             epilog="e.g. harness tasks new --repo ~/code/shop --problem-file bug.md --test-cmd "
                                    "'python -m pytest -rA -q' --out tasks/shop-total")
    new.add_argument("--repo", type=Path, required=True, metavar="PATH", help="the project's folder")
    new.add_argument("--problem", metavar="TEXT", help="the bug report, as text")
    new.add_argument("--problem-file", type=Path, metavar="FILE", help="the bug report, from a file")
    new.add_argument("--test-cmd", required=True, metavar="CMD",
                     help="the project's tests with pytest's per-test summary, e.g. 'python -m pytest -rA -q'")
    new.add_argument("--fail-to-pass", action="append", default=[], metavar="TEST",
                     help="the failing tests the fix must make pass (default: every test failing now)")
    new.add_argument("--python", default="3.11", metavar="X", help="3.9, 3.11 or 3.13 (default 3.11)")
    new.add_argument("--include", action="append", default=[], metavar="PATTERN",
                     help="put back a file left out as a secret")
    new.add_argument("--requirements", type=Path, metavar="FILE",
                     help="the environment's requirements, instead of the project's own declarations")
    new.add_argument("--out", type=Path, required=True, help="the new task directory, e.g. tasks/shop-total")
    new.set_defaults(func=_new)


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


def _new(args: argparse.Namespace) -> int:
    config, _ = load()
    repo = repo_task(args.repo, read_problem(args.problem, args.problem_file), test_cmd=args.test_cmd,
                     python=args.python, include=tuple(args.include), requirements=args.requirements)
    progress = stderr_progress("tasks new")
    try:
        secrets = repo.project.secrets_told()
        if secrets:
            progress(f"left out as secrets: {', '.join(secrets[:20])}; put one back with --include PATH")
        pins = pinned_requirements(repo.task, progress)
        image = session_image(repo.task, config, progress)
        spec = task_spec(repo.task, image, config.sandbox.limits, "tasks-new", new_session_name("tasknew"))
        progress(f"running {args.test_cmd!r} once at the starting state, in the workspace a session gets")
        with open_workspace(spec, config, None) as workspace:
            result = workspace.sandbox.exec(args.test_cmd, timeout=config.loop.test_timeout)
        statuses = parse_log("pytest", result.stdout.text + "\n" + result.stderr.text)
        meta = task_meta(repo, statuses, tuple(args.fail_to_pass), tuple(pins))
        made = write_task_dir(repo, args.out, meta)
    finally:
        repo.cleanup()
    problems = check_task(made.path)
    for problem in problems:
        print_safe(sys.stdout, f"  - {problem}")
    print_safe(sys.stdout, f"wrote {made.path}: {len(made.fail_to_pass)} FAIL_TO_PASS, {len(made.pass_to_pass)} "
                           f"PASS_TO_PASS, {len(made.requirements)} pinned requirement(s); run it with "
                           f"`harness run {made.path}` or evaluate with `harness eval {made.path}`")
    return EXIT_USAGE if problems else 0
