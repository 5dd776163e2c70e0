"""What belongs to a (repository, version) rather than to one of its instances: the date its environment is
resolved as of, and the tree its declared requirements are read from. Both depend only on the version
(never on which rows a run holds, nor on what this machine did before), so every instance of it shares
one lock (`locking.py`).

    version_date(task, env)   the commit date of the version's environment_setup_commit: from a git
                              source holding it (`Environment.git_source`), else from the table shipped
                              in harness/data/locks/setup-commits.json; without either, the row's own
                              `created_at` (said so in the lock), else the day the lock is made
    version_tree(task, env)   the tree of the environment_setup_commit from that git source, else the
                              instance's own tree
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path

from harness import checks
from harness.core import hostgit
from harness.core.sources import checkout_commit, sources_root
from harness.core.task import Environment, Task
from harness.environments.lock import shipped_locks
from harness.errors import TaskError
from sandbox.api import Progress, quiet

SETUP_COMMITS = "setup-commits.json"


@dataclass(frozen=True)
class VersionDate:
    as_of: str          # ISO 8601, an instant or a day
    said: str           # where it comes from, for the lock (no machine's path in it: locks travel)


@lru_cache(maxsize=1)
def shipped_setup_commits() -> dict[tuple[str, str], tuple[str, str]]:
    """(repo, version) -> (environment_setup_commit, its commit date in UTC) of the shipped table."""
    entry = shipped_locks() / SETUP_COMMITS
    if not entry.is_file():
        return {}
    data = json.loads(entry.read_text(encoding="utf-8"))
    return {(repo, version): (str(v["commit"]), str(v["date"]))
            for repo, versions in data["versions"].items() for version, v in versions.items()}


@lru_cache(maxsize=256)
def commit_date(clone: Path, commit: str) -> str | None:
    """The committer date of `commit` in the git clone `clone`, in UTC ("2020-05-12T06:52:23Z"), or None
    when the clone does not hold it."""
    try:
        commit = checks.commit(commit, f"git clone {clone}")
    except TaskError:
        return None
    proc = hostgit.in_repository(clone, ["show", "-s", "--format=%cI", f"{commit}^{{commit}}", "--"])
    text = proc.stdout.decode("ascii", "replace").strip()
    if proc.returncode != 0 or not re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:]{8}(Z|[+-]\d\d:\d\d)", text):
        return None
    return utc(text)


def utc(instant: str) -> str:
    """An ISO 8601 instant with a zone as UTC: "2020-05-12T08:52:23+02:00" -> "2020-05-12T06:52:23Z"."""
    return datetime.fromisoformat(instant.replace("Z", "+00:00")).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def version_date(task: Task, env: Environment) -> VersionDate:
    """The date `env` is resolved as of (see the module docstring for the order)."""
    commit = env.setup_commit
    if env.version_of is not None and commit:
        found = commit_date(env.git_source, commit) if env.git_source is not None else None
        shipped = shipped_setup_commits().get(env.version_of)
        if found is None and shipped is not None and shipped[0] == commit:
            found = shipped[1]
        if found is not None:
            return VersionDate(found, f"the commit date of environment_setup_commit {commit[:12]}")
    if env.as_of:
        unknown = f" (no date known for environment_setup_commit {commit[:12]})" if commit else ""
        whose = f" of {task.id}" if env.version_of is not None else ""
        return VersionDate(env.as_of, f"created_at{whose}{unknown}")
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    return VersionDate(today, "the day the lock was made (the task gives no date)")


def version_tree(task: Task, env: Environment, progress: Progress = quiet) -> tuple[Path, str]:
    """The tree the version's declared requirements are read from, and what it is."""
    commit, clone = env.setup_commit, env.git_source
    if env.version_of is not None and commit and clone is not None and commit_date(clone, commit) is not None:
        root = sources_root()
        owner, name = env.version_of[0].split("/")
        dest = checks.child(root, f"{checks.identifier(owner, 'repo')}__{checks.identifier(name, 'repo')}-setup-"
                                  f"{checks.commit(commit, 'environment_setup_commit')[:12]}")
        try:
            if not dest.is_dir():
                checkout_commit(clone, commit, dest, root)
            return dest, f"environment_setup_commit {commit[:12]}"
        except TaskError as exc:
            progress(f"{task.id}: the tree of environment_setup_commit {commit[:12]} could not be had ({exc}); "
                     "reading the instance's own")
    return task.repo_dir, f"the tree of {task.id} at its base commit"
