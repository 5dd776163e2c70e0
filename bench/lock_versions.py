"""Make the locks and the version dates the package ships (harness/data/locks/), from dataset rows and git
clones of their repositories: what another machine needs to build the same environments without
resolving anything.

For every (repository, version) of the rows that the specification table knows:

- its date: the commit date of the rows' `environment_setup_commit`, read from the clone
  `REPOS/<owner>__<name>` (a clone or a git folder whose objects reach the repository's history), into
  harness/data/locks/setup-commits.json (versions already there are kept);
- with `--locks`: its lock for the interpreter the table maps it to, made as `harness eval` makes one
  (resolved as of that date from the tree of the environment_setup_commit, its source-only releases
  built in a network-less container to learn which build) and written to
  harness/data/locks/<owner>__<name>/<version>-py<X>-<machine>.json. A lock already there that was made
  from the same recipe is kept; one in the user's cache is never taken (it may have been made from
  another instance's tree and date), so a shipped lock is a function of the rows and clones only.
  Versions the table marks as not buildable offline are skipped, and so are those whose lock cannot be
  made (the reason is printed);
- with `--locks`, every lock (kept or made) carries the wheels that each row of the version requires beyond
  it (`row_wheels.py`: the declaration files of the row's base_commit read from the clone, what the lock
  does not satisfy resolved as of the row's created_at). A kept lock whose rows' wheels differ is written
  again with only that field changed; one whose rows need nothing stays byte for byte.

    .venv/bin/python bench/lock_versions.py --rows lite-test.jsonl --rows lite-dev.jsonl --repos DIR [--locks]
        [--repo django/django ...] [--version 3.1 ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import docker

from harness import checks
from harness.config import Config
from harness.core.task import Task
from harness.environments import EnvironmentUnsupported, sandbox_image
from harness.environments.declarations import project_name
from harness.environments.errors import EnvironmentBuildError
from harness.environments.lock import Lock, lock_from_text, store_lock
from harness.environments.locking import lock_identity, lock_with_rows, make_lock
from harness.environments.row_wheels import RowTree, declaration_tree, isolated_build
from harness.environments.versions import SETUP_COMMITS, commit_date
from harness.errors import TaskError
from harness.evaluation import swebench
from harness.evaluation.instance_files import load_instances, read_jsonl
from harness.evaluation.specs import TABLE, Spec

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "harness" / "data" / "locks"


Rows = dict[tuple[str, str], list[dict[str, Any]]]


def versions_of(rows: list[dict[str, Any]], repos: list[str], versions: list[str]) -> Rows:
    by_version: Rows = defaultdict(list)
    for row in rows:
        key = (str(row.get("repo")), str(row.get("version")))
        if key in TABLE and (not repos or key[0] in repos) and (not versions or key[1] in versions):
            by_version[key].append(row)
    return dict(sorted(by_version.items()))


def write_dates(by_version: Rows, clones: Path) -> None:
    path = OUT / SETUP_COMMITS
    table: dict[str, dict[str, dict[str, str]]] = json.loads(path.read_text())["versions"] if path.is_file() else {}
    for (repo, version), rows in by_version.items():
        commits = {str(r.get("environment_setup_commit") or "") for r in rows} - {""}
        if len(commits) != 1:
            print(f"{repo} {version}: {len(commits)} environment_setup_commits among its rows; not dated")
            continue
        commit = commits.pop()
        date = commit_date(clones / repo.replace("/", "__"), commit)
        if date is None:
            print(f"{repo} {version}: environment_setup_commit {commit[:12]} is not in {clones}; not dated")
            continue
        table.setdefault(repo, {})[version] = {"commit": commit, "date": date}
    ordered = {repo: dict(sorted(v.items())) for repo, v in sorted(table.items())}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": 1, "versions": ordered}, indent=1) + "\n")
    print(f"{sum(len(v) for v in ordered.values())} version(s) dated in {path}")


def lock_row(rows: list[dict[str, Any]], clone: Path) -> dict[str, Any]:
    """The row whose lock the version ships: any, when the clone holds the environment_setup_commit (the
    lock is read from that commit's tree); else the newest row, whose tree is the nearest to that commit
    (SWE-bench takes it at the version's end): django 3.0's lock made from its oldest row (May 2019)
    lacked asgiref, which django's setup.py requires from June 2019, and the later rows' installs failed."""
    commit = str(rows[0].get("environment_setup_commit") or "")
    if commit and commit_date(clone, commit) is not None:
        return rows[0]
    return max(rows, key=lambda r: (str(r.get("created_at") or ""), str(r.get("instance_id"))))


def make_locks(by_version: Rows, clones: Path) -> None:
    client = docker.from_env()
    for (repo, version), rows in by_version.items():
        spec = TABLE[(repo, version)]
        if spec.offline_blocker:
            print(f"{repo} {version}: skipped, not buildable offline ({spec.offline_blocker[:80]}...)")
            continue
        started = time.monotonic()
        clone = clones / repo.replace("/", "__")
        row = lock_row(rows, clone)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                trees = row_trees(rows, clone, Path(tmp), isolated_build(spec.install))
                if keep(row, spec, clones, trees, started):
                    continue
                rows_file = Path(tmp) / "rows.jsonl"
                rows_file.write_text(json.dumps(row) + "\n")
                [task] = load_instances(rows_file, clones)
                assert task.environment is not None
                key, recipe = lock_identity(task, task.environment)
                # never the user's cache: a lock there may come from another instance's tree and date
                base = sandbox_image(Config(), task.python, task=task)
                lock = make_lock(task, task.environment, key, recipe, base, rows=trees, client=client,
                                 progress=lambda m: print(f"  {m}"))
            path = store_lock(lock, OUT)
            print(f"{repo} {version}: {len(lock.packages)} distribution(s), {len(lock.sdists())} sdist(s), as of "
                  f"{lock.inputs.as_of} -> {path.relative_to(REPO)} ({time.monotonic() - started:.0f} s)"
                  f"{_rows_said(lock, None)}")
        except (EnvironmentUnsupported, EnvironmentBuildError, TaskError) as exc:
            print(f"{repo} {version}: no lock: {str(exc)[:600]}")


def keep(row: dict[str, Any], spec: Spec, clones: Path, trees: list[RowTree], started: float) -> bool:
    """Whether the shipped lock of `row`'s version was made from its present recipe (the lock's key and
    recipe need no checkout of the row's tree); if so, it is kept, carrying the wheels of `trees`."""
    env = swebench.environment_of(row, spec, spec.python_used, swebench.git_source(row, clones))
    assert env is not None
    task = Task(id=str(row["instance_id"]), problem_statement="", repo_dir=Path("/nonexistent"),
                python=spec.python_used, environment=env, install_cmd=spec.install)
    key, recipe = lock_identity(task, env)
    shipped = OUT / key.relative_path()
    kept = lock_from_text(shipped.read_text(), str(shipped)) if shipped.is_file() else None
    if kept is None or kept.inputs.recipe != recipe:
        return False
    own = next((name for t in trees if t.task_id == task.id and (name := project_name(t.root))), None)
    carried = lock_with_rows(kept, env, trees, own=own, task_id=task.id, progress=lambda m: print(f"  {m}"))
    if carried.text() != kept.text():
        store_lock(carried, OUT)
    print(f"{spec.repo} {spec.version}: kept {shipped.relative_to(REPO)}{_rows_said(carried, kept)} "
          f"({time.monotonic() - started:.0f} s)")
    return True


def row_trees(rows: list[dict[str, Any]], clone: Path, tmp: Path, isolated: bool) -> list[RowTree]:
    """Each row's declaration files (its base_commit's, from `clone`) under `tmp`, with its date (`isolated`:
    whether the version's install builds in an isolated environment); a row whose commit the clone does not
    hold is named and left out."""
    trees = []
    for row in rows:
        instance, created = str(row["instance_id"]), str(row.get("created_at") or "")[:10]
        if not created:
            print(f"  {instance}: its requirements are not read: the row has no created_at to resolve them as of")
            continue
        try:
            root = declaration_tree(clone, str(row["base_commit"]), checks.child(tmp, instance))
        except TaskError as exc:
            print(f"  {instance}: its requirements are not read, no tree: {str(exc)[:200]}")
            continue
        trees.append(RowTree(instance, root, created, isolated))
    return trees


def _rows_said(lock: Lock, before: Lock | None) -> str:
    if not lock.row_wheels:
        return ""
    changed = "" if before is None else " (updated)" if lock.row_wheels != before.row_wheels else " (unchanged)"
    return (f"; rows' wheels{changed}: "
            + ", ".join(f"{f.pin()} for {len(f.rows)} row(s)" for f in lock.row_wheels))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=Path, action="append", required=True)
    parser.add_argument("--repos", type=Path, required=True, help="git clones <owner>__<name>")
    parser.add_argument("--locks", action="store_true", help="make the locks too (network and Docker)")
    parser.add_argument("--repo", action="append", default=[])
    parser.add_argument("--version", action="append", default=[])
    args = parser.parse_args()
    rows = [row for path in args.rows for row in read_jsonl(path, "instances")]
    by_version = versions_of(rows, args.repo, args.version)
    print(f"{len(by_version)} (repository, version) pair(s) of the table in {len(rows)} row(s)")
    write_dates(by_version, args.repos)
    if args.locks:
        make_locks(by_version, args.repos)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
