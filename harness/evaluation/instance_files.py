"""SWE-bench instances (JSONL) as tasks, predictions files, and our tasks exported as instances.

An instance line has SWE-bench's fields (`instance_id`, `repo`, `base_commit`, `patch`, `test_patch`,
`problem_statement`, `FAIL_TO_PASS`, `PASS_TO_PASS`; the last two as JSON lists or JSON-encoded
strings) plus the fields that let it run offline: `requirements` (pinned pip requirements, the
project excluded), `install_cmd`, `test_cmd` (pytest with -rA output) and `python` ("3.9", ...).
Its source comes from `--repos DIR`: `DIR/<instance_id>.tar.gz` (the tree at base_commit, possibly
under one top folder) or a git clone `DIR/<owner>__<name>` that contains base_commit. A SWE-bench 5.0
row's own `eval_script`, `log_parser` and `image` are read by `eval_scripts` and graded with.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import checks
from harness.core import hostgit
from harness.core.sources import (
    DEFAULT_URL_TEMPLATE,
    GIT_IDENTITY,
    checkout_commit,
    extract_tarball,
    mirror_clone,
    sources_root,
)
from harness.core.task import Task, check_meta, task_from_meta
from harness.errors import TaskError
from harness.evaluation import eval_scripts, swebench
from harness.evaluation.specs import Spec
from sandbox.api import Progress, quiet
from sandbox.text import safe_json

INSTANCE_EXAMPLE = ('{"instance_id": "owner__name-1", "repo": "owner/name", "base_commit": "<sha>", '
                    '"problem_statement": "...", "patch": "...", "test_patch": "...", '
                    '"FAIL_TO_PASS": ["tests/test_x.py::test_y"], "PASS_TO_PASS": [], '
                    '"requirements": ["pytest==8.3.5"], "test_cmd": "python -m pytest -rA", "python": "3.9"}')
_OFFLINE_KEYS = ("FAIL_TO_PASS", "PASS_TO_PASS", "requirements", "install_cmd", "test_cmd", "python",
                 "repo", "base_commit", "version", "created_at")


PARQUET_INSTALL = ".venv/bin/pip install -e '.[parquet]'   (or: pip install pyarrow)"


def read_jsonl(path: Path, what: str) -> list[dict[str, Any]]:
    """The objects of a JSONL file (a JSON list is accepted too), with line-numbered errors; a `.parquet`
    file (the format SWE-bench's datasets are published in) is read with pyarrow when it is installed."""
    if Path(path).suffix.lower() == ".parquet":
        return read_parquet(Path(path), what)
    text = Path(path).read_text()
    if text.lstrip().startswith("["):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TaskError(f"{path} is not valid JSON: {exc}") from exc
        return [dict(r) for r in rows]
    rows, problems = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"{path}:{number} is not a JSON object ({exc}); each line of a {what} file is one object")
            continue
        if not isinstance(row, dict):
            problems.append(f"{path}:{number} is {type(row).__name__}, expected a JSON object")
            continue
        rows.append(row)
    if problems:      # every bad line at once, so the file is fixed in one go
        raise TaskError(f"{len(problems)} bad line(s) in {path}:\n  - " + "\n  - ".join(problems))
    return rows


def read_parquet(path: Path, what: str) -> list[dict[str, Any]]:
    """The rows of a parquet file as JSON-like objects (timestamps as ISO 8601 text, bytes as UTF-8 text).

    Raises:
        TaskError: pyarrow is not installed (the install line is in the message), or the file is not
            a readable parquet file.
    """
    try:
        import pyarrow.parquet as pq  # noqa: PLC0415 - an optional extra, imported only for parquet files
    except ImportError as exc:
        raise TaskError(f"{path} is a parquet file, which needs pyarrow (the optional extra `parquet`); install it "
                        f"with:\n  {PARQUET_INSTALL}\nor give the {what} as JSONL (one JSON object per line)") from exc
    try:
        rows = pq.read_table(path).to_pylist()
    except (OSError, ValueError) as exc:     # pyarrow's ArrowInvalid is a ValueError
        raise TaskError(f"{path} is not a readable parquet file ({exc}); expected a table with one {what} "
                        "per row, e.g. SWE-bench's published data/test-00000-of-00001.parquet") from exc
    return [{str(k): _plain(v) for k, v in row.items()} for row in rows]


def _plain(value: Any) -> Any:
    """A parquet cell as JSON would have held it."""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _json_list(value: Any) -> Any:
    """SWE-bench stores FAIL_TO_PASS/PASS_TO_PASS as JSON-encoded strings; accept both forms."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def instance_meta(row: dict[str, Any]) -> dict[str, Any]:
    meta = {k: row[k] for k in _OFFLINE_KEYS if k in row and row[k] is not None}
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS", "requirements"):
        if key in meta:
            meta[key] = _json_list(meta[key])
    meta["id"] = row.get("instance_id")
    return meta


def load_instances(path: Path, repos: Path | None, ids: Iterable[str] | None = None, *,
                   url_template: str = DEFAULT_URL_TEMPLATE, progress: Progress = quiet) -> list[Task]:
    """Tasks for the instances in `path` (only `ids`, when given), sources taken from `repos`, or
    without it cloned from `url_template` into the cache (`core.sources.mirror_clone`)."""
    rows = read_jsonl(path, "instances")
    wanted = set(ids) if ids else None
    if wanted is not None:
        unknown = sorted(wanted - {r.get("instance_id") for r in rows})
        if unknown:
            raise TaskError(f"--instance-ids {unknown} are not in {path}")
        rows = [r for r in rows if r.get("instance_id") in wanted]
    problems: list[str] = []
    metas: list[tuple[dict[str, Any], dict[str, Any], Spec | None]] = []
    for number, row in enumerate(rows, 1):
        where = f"{path} instance {row.get('instance_id', f'#{number}')!r}"
        if not isinstance(row.get("instance_id"), str):
            problems.append(f"{where}: instance_id is missing; example line: {INSTANCE_EXAMPLE}")
        if not isinstance(row.get("problem_statement"), str):
            problems.append(f"{where}: problem_statement is missing")
        meta, spec, found = _completed(row, where)
        problems += (found + check_meta(meta, where, "instance_id") + check_source_fields(row, where)
                     + eval_scripts.row_problems(row, where))
        metas.append((row, meta, spec))
    if problems:
        raise TaskError("invalid instances:\n  - " + "\n  - ".join(problems))
    tasks, missing = [], []
    for row, meta, spec in metas:     # every instance without a source is named, not the first only
        try:
            tasks.append(_instance_task(row, meta, spec, repos, url_template, progress))
        except TaskError as exc:
            missing.append(str(exc))
    if missing:
        raise TaskError(f"{len(missing)} instance(s) have no source:\n  - " + "\n  - ".join(missing))
    return tasks


def _completed(row: dict[str, Any], where: str) -> tuple[dict[str, Any], Spec | None, list[str]]:
    """The row's task metadata, completed from the specification table when the row has no `test_cmd`
    (an unmodified SWE-bench row); the problems found on the way."""
    meta = instance_meta(row)
    if not swebench.needs_spec(row):
        return meta, None, []
    try:
        spec = swebench.spec_of(row)
        return swebench.completed_meta(row, meta, spec), spec, []
    except TaskError as exc:
        return meta, None, [f"{where}: {exc}"]


def _instance_task(row: dict[str, Any], meta: dict[str, Any], spec: Spec | None, repos: Path | None,
                   url_template: str, progress: Progress) -> Task:
    source = instance_source(row, repos, url_template, progress)
    task = task_from_meta(meta, default_id=row["instance_id"],
                          problem=row["problem_statement"], repo_dir=source,
                          gold_patch=row.get("patch") or None, test_patch=row.get("test_patch") or None)
    if spec is not None:
        environment = swebench.environment_of(row, spec, task.python, swebench.git_source(row, repos))
        task = dataclasses.replace(task, environment=environment, log_parser=spec.parser)
    return with_row_script(task, row)


def with_row_script(task: Task, row: dict[str, Any]) -> Task:
    """`task` graded with its row's own log parser and eval script, when the row gives them (5.0 rows)."""
    parser, script = eval_scripts.row_parser(row), eval_scripts.row_script(row)
    if script is not None:
        task = dataclasses.replace(task, extra={**task.extra, eval_scripts.EXTRA_KEY: script})
    return task if parser is None else dataclasses.replace(task, log_parser=parser)


def check_source_fields(row: dict[str, Any], where: str) -> list[str]:
    """Problems of the fields that become paths or git arguments: `base_commit` (hex), `repo`
    (owner/name). `instance_id` is checked by `check_meta` as the task id."""
    problems = []
    if row.get("base_commit") is not None:
        try:
            checks.commit(row["base_commit"], where)
        except TaskError as exc:
            problems.append(str(exc))
    repo = row.get("repo")
    if repo is not None and not _owner_name(repo):
        problems.append(f"{where}: repo {repo!r} is not owner/name (two parts of letters, digits, '_', '.' "
                        "and '-', each starting with a letter or digit); expected e.g. \"django/django\"")
    return problems


def _owner_name(value: object) -> bool:
    parts = value.split("/") if isinstance(value, str) else []
    try:
        return len(parts) == 2 and all(checks.identifier(p, "repo") for p in parts)
    except TaskError:
        return False


def instance_source(row: dict[str, Any], repos: Path | None, url_template: str = DEFAULT_URL_TEMPLATE,
                    progress: Progress = quiet) -> Path:
    """The instance's files at base_commit, extracted once into the cache (its fields were checked by
    `load_instances`, and every path is checked again to stay inside its root). Without `repos`, from
    a bare clone of `repo` made once in the cache from `url_template`."""
    iid = checks.identifier(row["instance_id"], "instance")
    commit = checks.commit(row["base_commit"], f"instance {iid}") if row.get("base_commit") else ""
    root = sources_root()
    dest = checks.child(root, f"{iid}-{commit[:12] or 'tarball'}")
    if repos is None:
        if not (_owner_name(row.get("repo")) and commit):
            raise TaskError(f"instance {iid} needs its source: pass --repos DIR holding {iid}.tar.gz, or give "
                            "the row `repo` (owner/name) and `base_commit` so that it can be cloned")
        if not dest.is_dir():
            checkout_commit(mirror_clone(str(row["repo"]), commit, url_template, progress), commit, dest, root)
        return dest
    # one checked component each under the operator's --repos folder (which may hold links of its own)
    tarball = repos / f"{iid}.tar.gz"
    clone = repos / str(row["repo"]).replace("/", "__") if _owner_name(row.get("repo")) else None
    if tarball.is_file():
        if not dest.is_dir() or tarball.stat().st_mtime > dest.stat().st_mtime:
            extract_tarball(tarball, dest, root)
    elif clone is not None and (clone / ".git").exists() and commit:
        if not dest.is_dir():
            checkout_commit(clone, commit, dest, root)
    else:
        raise TaskError(f"no source for instance {iid} in {repos}: expected {tarball} or a git clone "
                        f"{clone or repos / 'owner__name'} containing base_commit {commit or '(missing)'}")
    return dest


_PARQUET_SPLIT = re.compile(r"([A-Za-z0-9_.]+)-\d{5}-of-\d{5}\.parquet")
_SPLIT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
MAX_DATASET_CHARS = 300


def dataset_and_split(instances: Path | None, dataset: str | None, split: str | None) -> tuple[str | None, str | None]:
    """What run.json says the rows are (SWE-bench 5.0's `dataset` and `split`): the names given, else the
    --instances file (its absolute path) and the split a published parquet file's name holds
    (`data/test-00000-of-00001.parquet` -> "test"); None where nothing says, never a guess.

    Raises:
        TaskError: a name given is not a dataset or split name (each problem listed).
    """
    problems = []
    if dataset is not None and not (0 < len(dataset) <= MAX_DATASET_CHARS and dataset.isprintable()):
        problems.append(f"--dataset {dataset[:80]!r} is not a dataset name (1 to {MAX_DATASET_CHARS} printable "
                        "characters); expected e.g. --dataset SWE-bench/SWE-bench_Lite")
    if split is not None and not _SPLIT.fullmatch(split):
        problems.append(f"--split {split[:80]!r} is not a split name (letters, digits, '_', '.', '-'); expected e.g. "
                        "--split test")
    if problems:
        raise TaskError("; ".join(problems))
    if instances is not None:
        named = _PARQUET_SPLIT.fullmatch(instances.name)
        dataset = dataset if dataset is not None else str(instances.resolve())
        split = split if split is not None or named is None else named.group(1)
    return dataset, split


@dataclass(frozen=True)
class Prediction:
    instance_id: str
    model_name_or_path: str
    model_patch: str | None


def load_predictions(path: Path) -> dict[str, Prediction]:
    """SWE-bench predictions: `{"instance_id", "model_name_or_path", "model_patch"}` per line."""
    out: dict[str, Prediction] = {}
    for number, row in enumerate(read_jsonl(path, "predictions"), 1):
        iid, patch = row.get("instance_id"), row.get("model_patch")
        if not isinstance(iid, str) or (patch is not None and not isinstance(patch, str)):
            raise TaskError(f"{path} prediction #{number}: expected {{\"instance_id\": str, "
                            f"\"model_name_or_path\": str, \"model_patch\": str}}, got keys {sorted(row)}")
        checks.identifier(iid, f"{path} prediction #{number}")
        if iid in out:
            raise TaskError(f"{path} prediction #{number}: instance {iid} appears twice")
        out[iid] = Prediction(iid, str(row.get("model_name_or_path") or "unknown"), patch)
    return out


def export_instances(tasks: list[Task], out: Path, repos: Path) -> list[dict[str, Any]]:
    """Write `tasks` as SWE-bench instances into `out` (JSONL) and their sources into `repos`; no file
    is written through a link (`checks.write_file`)."""
    repos.mkdir(parents=True, exist_ok=True)
    rows = []
    for task in tasks:
        commit = _archive(task, repos / f"{task.id}.tar.gz")
        rows.append({"instance_id": task.id, "repo": str(task.extra.get("repo", f"local/{task.id}")),
                     "base_commit": commit, "patch": task.gold_patch or "",
                     "test_patch": task.test_patch or "", "problem_statement": task.problem_statement,
                     "FAIL_TO_PASS": list(task.fail_to_pass), "PASS_TO_PASS": list(task.pass_to_pass),
                     "requirements": list(task.requirements), "install_cmd": task.install_cmd,
                     "test_cmd": task.test_cmd, "python": task.python,
                     "version": str(task.extra.get("version", "1.0"))})
    out.parent.mkdir(parents=True, exist_ok=True)
    checks.write_file(out, "".join(safe_json(r) + "\n" for r in rows))
    return rows


def _archive(task: Task, tarball: Path) -> str:
    """Commit the task's files with fixed metadata (a reproducible base_commit) and archive them."""
    env = {**GIT_IDENTITY, "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
           "GIT_WORK_TREE": str(Path(task.repo_dir).resolve())}
    with hostgit.scratch() as repo:      # a git dir and config the harness made: no driver, hook or signing
        outputs = [_exported(repo, args, env, task) for args in (
            ["add", "-A"], ["commit", "-q", "--no-gpg-sign", "--no-verify", "-m", f"{task.id} base"],
            ["rev-parse", "HEAD"])]
        commit = outputs[-1].decode().strip()
        archive = _exported(repo, ["archive", "--format=tar.gz", f"--prefix={task.id}/", "--end-of-options", commit],
                            env, task)
    checks.write_file(tarball, archive)
    return commit


def _exported(repo: hostgit.GitView, args: list[str], env: dict[str, str], task: Task) -> bytes:
    proc = repo.run(args, cwd=Path(env["GIT_WORK_TREE"]), env=env, timeout=600)
    if proc.returncode != 0:
        raise TaskError(f"exporting task {task.id}: `git {args[0]}` on {task.repo_dir} failed: {repo.said(proc)}")
    return proc.stdout
