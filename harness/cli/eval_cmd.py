"""`harness eval`: batch evaluation, SWE-bench style (see docs/evaluation.md); `harness eval compare A B`
compares two of them (`harness.cli.eval_compare`, its own exit codes).

Exit codes: 0 every instance was evaluated (resolved or not); 2 bad input; 3 some instance hit an
infrastructure error (its image did not build, Docker or the model API failed), listed in
report.json as error_ids, or preflight found the environment unable to run it (Docker, the model's
server, disk; `harness.evaluation.preflight`); 130 stopped by Ctrl-C or SIGTERM (the first lets the
running instances finish, the second cancels them; no container is left; continue with --resume).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console

from harness.cli import eval_compare
from harness.cli.common import EXIT_INFRA, print_safe, stderr_progress
from harness.cli.run_cmd import add_session_options, apply_options
from harness.config import Config, Secrets, load
from harness.core.records import EvalReport
from harness.core.sources import DEFAULT_URL_TEMPLATE
from harness.core.task import Task, find_task_dirs, load_task
from harness.errors import ConfigError
from harness.evaluation.instance_files import (
    Prediction,
    dataset_and_split,
    load_instances,
    load_predictions,
    read_jsonl,
)
from harness.evaluation.options import EvalOptions
from harness.evaluation.preflight import DEFAULT_RESERVE_GIB, check_repo_urls, raise_problems, run_preflight
from harness.evaluation.progress import LineEvents, LiveEvents, attempts_summary, repository_summary, summary_table
from harness.evaluation.ray_backend import check_address, import_ray
from harness.evaluation.runner import check_epochs, run_evaluation
from harness.mcp.connect import start_servers
from harness.outputs import record_output


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("eval", help="evaluate an agent (or given predictions) on many tasks, SWE-bench style",
                       description="Run an agent session per task in parallel sandboxes and grade each patch in "
                                   "a fresh container (FAIL_TO_PASS / PASS_TO_PASS), or grade existing "
                                   "predictions. Writes predictions.jsonl, report.json and a folder per "
                                   "instance into --out.",
                       epilog="harness eval compare A B [--json]: is evaluation B better than A, or is the "
                              "difference noise? The difference of pass@1 over the instances both graded, with "
                              "its 95% interval, and the instances that changed; exit 0, 1 when B is "
                              "significantly worse, 2 for bad input (docs/evaluation.md). A task folder named "
                              "compare is given as ./compare.")
    p.add_argument("tasks", nargs="*", type=Path, metavar="TASK_DIRS",
                   help="task directories or folders of them (default: tasks/ unless --instances)")
    p.add_argument("--instances", type=Path, metavar="FILE",
                   help="SWE-bench instances: JSONL, a JSON list, or parquet (with the parquet extra)")
    p.add_argument("--repos", type=Path, metavar="DIR",
                   help="sources of --instances: DIR/<instance_id>.tar.gz or git clones DIR/<owner>__<name> "
                        "(default: clone each repository once into the cache from --repo-url)")
    p.add_argument("--repo-url", metavar="TEMPLATE", default=DEFAULT_URL_TEMPLATE,
                   help="where to clone a repository from without --repos; {repo} is owner/name "
                        f"(default {DEFAULT_URL_TEMPLATE}; e.g. file:///mirrors/{{repo}}.git)")
    p.add_argument("--predictions", metavar="FILE",
                   help="grade these SWE-bench predictions instead of running an agent ('gold': the tasks' "
                        "gold patches)")
    p.add_argument("--instance-ids", nargs="+", metavar="ID", help="only these instances")
    p.add_argument("--dataset", metavar="NAME", help="what the instances are, recorded in run.json (default: the "
                                                      "--instances file), e.g. SWE-bench/SWE-bench_Lite")
    p.add_argument("--split", metavar="NAME", help="the dataset's split, recorded in run.json (default: the one a "
                                                    "published parquet file's name holds, else none), e.g. test")
    p.add_argument("--workers", type=int, default=1, help="instances run in parallel (default 1)")
    p.add_argument("--out", type=Path, help="output folder (default: runs/eval-MODEL-YYYYmmdd-HHMMSS)")
    p.add_argument("--resume", action="store_true", help="continue the evaluation in --out")
    p.add_argument("--timeout", type=float, metavar="S", help="wall-clock limit of each agent session, seconds")
    p.add_argument("--test-timeout", type=float, default=900.0, metavar="S",
                   help="limit of each test run at grading, seconds (default 900)")
    p.add_argument("--epochs", type=int, default=1, metavar="N",
                   help="run each instance's agent N times, each attempt in fresh sandboxes and graded; the report "
                        "gives per-instance pass counts, pass@1 with its 95%% interval, pass@k and the instances "
                        "that flipped (default 1; not with --predictions)")
    p.add_argument("--grade-runs", type=int, default=1, metavar="R",
                   help="run the tests R times in fresh sandboxes; instances whose verdict differs are "
                        "reported as flaky and count as resolved only if every run resolved them")
    p.add_argument("--pool", type=int, default=0, metavar="N",
                   help="start each instance's sandboxes ahead, up to N per image: its grading sandbox comes up "
                        "while its agent works (each sandbox is still fresh and used once; default 0: none)")
    p.add_argument("--label", action="append", default=[], metavar="KEY=VALUE",
                   help="an extra Docker label on every container of the run (repeatable)")
    p.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="local: --workers threads on this machine (default); ray: one Ray task per instance "
                        "on the cluster's Docker nodes (needs `pip install 'harness[ray]'`; see docs/ray.md)")
    p.add_argument("--ray-address", metavar="ADDR",
                   help="with --backend ray: the cluster's head, e.g. 10.0.0.5:6379 ('auto': the cluster started "
                        "on this machine); default: a one-machine Ray for this run")
    p.add_argument("--allow-direct-references", action="store_true",
                   help="let requirements and their dependencies be given as URLs of wheel files (`name @ "
                        "https://.../name-1.0-py3-none-any.whl`), fetched by the host without approval; "
                        "default: only versions from the package index")
    p.add_argument("--disk-reserve", type=float, default=DEFAULT_RESERVE_GIB, metavar="GIB",
                   help="disk to keep free in Docker's data root beyond the estimate of the environments to build "
                        f"(default {DEFAULT_RESERVE_GIB:g}); the run is refused before any work when it does not fit")
    p.add_argument("--skip-disk-check", action="store_true",
                   help="do not compare the estimate of the environments to build with Docker's free disk")
    p.add_argument("--json", action="store_true", help="print report.json instead of the summary table")
    add_session_options(p)
    p.set_defaults(func=lambda args: _compare(args, p) if args.tasks[:1] == [Path("compare")] else _run(args))


def _compare(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """`harness eval compare A B [--json]`: any other option of `harness eval` is refused, not ignored."""
    given = sorted(f"--{k.replace('_', '-')}" for k, v in vars(args).items()
                   if k not in ("tasks", "json", "func", "command") and v != parser.get_default(k))
    if given:
        raise ConfigError(f"harness eval compare takes only two folders and --json, not {', '.join(given)}; "
                          f"usage: {eval_compare.USAGE}")
    return eval_compare.run(args.tasks[1:], args.json)


def _run(args: argparse.Namespace) -> int:
    _check_numbers(args)
    _check_backend(args)
    config, secrets = load()
    config = apply_options(config, args)
    if args.timeout is not None:
        config = config.replace(loop=dataclasses.replace(config.loop, max_wall_seconds=args.timeout))
    if args.instances and args.repos is None:      # before anything is cloned from it
        raise_problems(check_repo_urls(_instance_repos(args), args.repo_url))
    tasks = _tasks(args)
    predictions = _predictions(args, tasks)
    check_epochs(args.epochs, predictions is not None)
    if predictions is None and not args.model:
        raise ConfigError("harness eval needs --model SPEC (e.g. --model gold, --model anthropic:MODEL) or "
                          "--predictions FILE")
    if args.resume and args.out is None:
        raise ConfigError("--resume needs --out DIR: the folder of the evaluation to continue")
    run_preflight([t for t in tasks if predictions is None or t.id in predictions],
                  None if predictions is not None else args.model, config, secrets, workers=args.workers,
                  reserve_gib=args.disk_reserve, check_disk=not args.skip_disk_check)
    if predictions is None:
        start_servers(config, say=stderr_progress())   # --mcp servers started now: a broken one fails here
    out = args.out or _default_out(args)
    dataset, split = dataset_and_split(args.instances, args.dataset, args.split)
    options = EvalOptions(out_dir=out, model=None if predictions is not None else args.model,
                          workers=args.workers, resume=args.resume, grade_runs=args.grade_runs,
                          test_timeout=args.test_timeout, labels=_labels(args.label), backend=args.backend,
                          ray_address=args.ray_address, allow_direct_references=args.allow_direct_references,
                          pool=args.pool, dataset=dataset, split=split, epochs=args.epochs)
    record_output(config.approval.state_dir, out)      # so `harness web` finds it wherever it is
    try:
        report = _evaluate(tasks, options, config, secrets, predictions, quiet=args.json)
    except KeyboardInterrupt:
        again = "again" if args.resume else f"with --resume --out {out}"
        print_safe(sys.stderr, f"harness eval: stopped; the finished attempts are kept in {out}/ (report.json "
                               f"counts them, the others as incomplete); to continue, run the same command {again}")
        raise
    _print(report, out, args.json)
    return EXIT_INFRA if report.error_instances else 0


def _check_backend(args: argparse.Namespace) -> None:
    if args.backend == "ray":
        import_ray()   # fails with the install line before anything is written
        check_address(args.ray_address)
    elif args.ray_address:
        raise ConfigError(f"--ray-address {args.ray_address} needs --backend ray; e.g. --backend ray "
                          f"--ray-address {args.ray_address}")


def _check_numbers(args: argparse.Namespace) -> None:
    for name in ("workers", "grade_runs"):
        if getattr(args, name) < 1:
            flag = "--" + name.replace("_", "-")
            raise ConfigError(f"{flag} must be at least 1, got {getattr(args, name)}; e.g. {flag} 2")
    if not args.disk_reserve >= 0:
        raise ConfigError(f"--disk-reserve {args.disk_reserve} is not a size in GiB; expected 0 or more, e.g. "
                          "--disk-reserve 2")
    if not 0 <= args.pool <= 16:
        raise ConfigError(f"--pool {args.pool} is not a count of sandboxes to start ahead; expected 0 to 16, "
                          "e.g. --pool 1")


def _labels(pairs: list[str]) -> dict[str, str]:
    labels = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--label must be KEY=VALUE, got {pair!r}; e.g. --label team=research")
        labels[key] = value
    return labels


def _tasks(args: argparse.Namespace) -> list[Task]:
    if args.instances:
        if args.tasks:
            raise ConfigError("give either TASK_DIRS or --instances FILE, not both")
        return load_instances(args.instances, args.repos, args.instance_ids, url_template=args.repo_url,
                              progress=lambda text: print_safe(sys.stderr, text))
    tasks = [load_task(d) for d in find_task_dirs(args.tasks or [Path("tasks")])]
    if args.instance_ids:
        unknown = sorted(set(args.instance_ids) - {t.id for t in tasks})
        if unknown:
            raise ConfigError(f"--instance-ids {unknown} are not among the tasks {sorted(t.id for t in tasks)}")
        tasks = [t for t in tasks if t.id in set(args.instance_ids)]
    if not tasks:
        raise ConfigError("no tasks to evaluate; pass task directories (e.g. tasks/) or --instances FILE")
    return tasks


def _instance_repos(args: argparse.Namespace) -> list[str]:
    """The `repo` of each selected row of --instances (checked later, with the whole row)."""
    wanted = set(args.instance_ids or ())
    return [str(r["repo"]) for r in read_jsonl(args.instances, "instances")
            if isinstance(r.get("repo"), str) and r.get("base_commit")
            and (not wanted or r.get("instance_id") in wanted)]


def _predictions(args: argparse.Namespace, tasks: list[Task]) -> dict[str, Prediction] | None:
    if args.predictions is None:
        return None
    if args.predictions == "gold":
        return {t.id: Prediction(t.id, "gold", t.gold_patch) for t in tasks if t.gold_patch}
    predictions = load_predictions(Path(args.predictions))
    unknown = sorted(set(predictions) - {t.id for t in tasks})
    if unknown and not args.instance_ids:
        print_safe(sys.stderr, f"harness eval: {len(unknown)} prediction(s) name no known instance and are "
                               f"skipped: {', '.join(unknown[:10])}")
    return predictions


def _default_out(args: argparse.Namespace) -> Path:
    label = "predictions" if args.predictions else re.sub(r"[^A-Za-z0-9_.-]+", "_", args.model or "model")
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"eval-{label}-{stamp}"


def _evaluate(tasks: list[Task], options: EvalOptions, config: Config, secrets: Secrets,
              predictions: dict[str, Prediction] | None, *, quiet: bool) -> EvalReport:
    console = Console(stderr=True)
    if quiet or not console.is_terminal:
        return run_evaluation(tasks, options, config, secrets, predictions=predictions,
                              events=LineEvents(sys.stderr))
    with LiveEvents(console) as events:
        return run_evaluation(tasks, options, config, secrets, predictions=predictions, events=events)


def _print(report: EvalReport, out: Path, as_json: bool) -> None:
    data = report.to_dict()
    if as_json:
        print(json.dumps(data, indent=2))
        return

    console = Console()
    console.print(summary_table(data))
    by_repo = repository_summary(data)
    if by_repo is not None:
        console.print(by_repo)
    for line in attempts_summary(data):
        print_safe(sys.stdout, line)
    print_safe(sys.stdout, f"results in {out}/ (report.json, predictions.jsonl, instances/)")
