"""A corpus of armed git repositories: one per way git can be made to run a program, each program writing
its vector's name into a marks file when git runs it.

    VECTORS            the names, one per repository
    armed(tmp, name)   a committed project (shop/cart.py, README.md) armed with vector `name`
    control(repo, name)   the plain-git operation that runs the vector's program (the positive control)
    marks(repo)        the vector names whose program ran since the repository was armed

Every program is a script in the corpus folder (never in the repository), so only git can start it.
"""

from __future__ import annotations

import hashlib
import json
import os
import pty
import shutil
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.agent.inplace import repo_task
from harness.cli.main import main
from harness.core.task import load_task
from harness.errors import TaskError
from harness.evaluation.instance_files import export_instances, instance_source

IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.invalid"}
CART = "def total(items):\n    return sum(items)\n"
FIXED = "def total(items, discount=0):\n    return sum(items) - discount\n"
PATCH = ("diff --git a/shop/cart.py b/shop/cart.py\n--- a/shop/cart.py\n+++ b/shop/cart.py\n"
         "@@ -1,2 +1,2 @@\n-def total(items):\n-    return sum(items)\n"
         "+def total(items, discount=0):\n+    return sum(items) - discount\n")

VECTORS = (
    "filter-clean", "filter-smudge", "filter-process", "diff-textconv", "diff-command", "diff-external",
    "merge-driver", "info-attributes", "core-sshCommand", "core-gitProxy", "core-pager", "core-editor",
    "core-askPass", "core-alternateRefsCommand", "credential-helper", "gpg-program", "sequence-editor",
    "lazy-uploadpack", "lazy-ext", "uploadpack-packObjectsHook", "include-path", "includeIf",
    "submodule-update", "hooks", "hooksPath", "fsmonitor", "operator-filter",
)
LAZY = ("lazy-uploadpack", "lazy-ext", "core-sshCommand", "core-gitProxy")
"""Vectors armed as a partial clone whose HEAD commit is missing: any read of it fetches lazily."""


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") and k not in ("PAGER", "EDITOR", "VISUAL")}
    return {**env, **IDENTITY, **extra}


def git(cwd: Path, *args: str, check: bool = True, env: dict[str, str] | None = None,
        stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=check,
                          env=env or clean_env(), input=stdin, timeout=120)


def _program(tmp: Path, name: str, passthrough: bool) -> str:
    """A script that notes `name` in tmp/marks; a passthrough one then copies its file argument or stdin
    (what filters and textconv must give back), the other fails (transports, editors, helpers)."""
    path = tmp / "programs" / name
    path.parent.mkdir(exist_ok=True)
    tail = 'if [ -n "$1" ] && [ -f "$1" ]; then cat "$1"; else cat; fi\nexit 0\n' if passthrough else "exit 1\n"
    path.write_text(f"#!/bin/sh\necho {name} >> {tmp / 'marks'}\n{tail}")
    path.chmod(0o755)
    return str(path)


def marks(tmp: Path) -> set[str]:
    f = tmp / "marks"
    return set(f.read_text().split()) if f.exists() else set()


def _project(repo: Path) -> None:
    (repo / "shop").mkdir(parents=True)
    (repo / "shop" / "cart.py").write_text(CART)
    (repo / "README.md").write_text("a shop\n")
    git(repo.parent, "init", "-q", "-b", "main", str(repo))


def _commit(repo: Path) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--no-gpg-sign", "--no-verify", "-m", "start")


def _attrs(repo: Path, line: str) -> None:
    (repo / ".gitattributes").write_text(line + "\n")


def armed(tmp: Path, name: str) -> Path:
    """A repository at tmp/name armed with vector `name` (tmp/marks is where its program writes)."""
    repo = tmp / name
    _project(repo)
    prog = _program(tmp, name, passthrough=name.startswith(("filter", "diff", "info", "include", "operator",
                                                            "merge")))
    cfg = ["config", "--local"]
    if name in ("filter-clean", "filter-smudge", "filter-process", "operator-filter"):
        _attrs(repo, "*.py filter=v")
        key = {"filter-clean": "clean", "filter-smudge": "smudge", "filter-process": "process"}.get(name)
        if key:
            git(repo, *cfg, f"filter.v.{key}", prog)
        else:                                   # defined by the operator's own (global) config
            (tmp / "operator.gitconfig").write_text(f"[filter \"v\"]\n\tclean = {prog}\n\tsmudge = {prog}\n")
    elif name in ("diff-textconv", "diff-command"):
        _attrs(repo, "*.py diff=v")
        git(repo, *cfg, "diff.v." + name.split("-")[1], prog)
    elif name == "diff-external":
        git(repo, *cfg, "diff.external", prog)
    elif name == "merge-driver":
        _attrs(repo, "*.py merge=v")
        git(repo, *cfg, "merge.v.driver", prog + " %O %A %B")
    elif name == "info-attributes":
        (repo / ".git" / "info").mkdir(exist_ok=True)
        (repo / ".git" / "info" / "attributes").write_text("* filter=v\n")
        git(repo, *cfg, "filter.v.clean", prog)
        git(repo, *cfg, "filter.v.smudge", prog)
    elif name in ("include-path", "includeIf"):
        inc = tmp / f"{name}.inc"
        inc.write_text(f"[filter \"v\"]\n\tclean = {prog}\n\tsmudge = {prog}\n[commit]\n\tgpgSign = true\n"
                       f"[gpg]\n\tprogram = {prog}\n")
        _attrs(repo, "*.py filter=v")
        git(repo, *cfg, "include.path" if name == "include-path" else "includeIf.gitdir:/.path", str(inc))
    elif name in ("core-pager", "core-editor", "core-askPass", "credential-helper", "sequence-editor",
                  "core-alternateRefsCommand", "core-sshCommand", "core-gitProxy"):
        key = {"core-pager": "core.pager", "core-editor": "core.editor", "core-askPass": "core.askPass",
               "core-sshCommand": "core.sshCommand", "core-gitProxy": "core.gitProxy",
               "credential-helper": "credential.helper", "sequence-editor": "sequence.editor",
               "core-alternateRefsCommand": "core.alternateRefsCommand"}[name]
        git(repo, *cfg, key, prog)
    elif name == "gpg-program":
        git(repo, *cfg, "gpg.program", prog)
        git(repo, *cfg, "commit.gpgSign", "true")
    elif name == "uploadpack-packObjectsHook":
        git(repo, *cfg, "uploadpack.packObjectsHook", prog)
    elif name == "fsmonitor":
        git(repo, *cfg, "core.fsmonitor", prog)
    _commit(repo)
    if name in ("hooks", "hooksPath"):
        hooks = repo / ".git" / "hooks" if name == "hooks" else tmp / "hookdir"
        hooks.mkdir(exist_ok=True)
        for hook in ("reference-transaction", "pre-commit", "post-commit", "post-checkout", "post-index-change",
                     "pre-auto-gc", "post-rewrite", "pre-push", "fsmonitor-watchman"):
            shutil.copy(prog, hooks / hook)
        if name == "hooksPath":
            git(repo, *cfg, "core.hooksPath", str(hooks))
    if name == "submodule-update":
        _submodule(tmp, repo, prog)
    if name == "core-alternateRefsCommand":
        other = tmp / "alternate"
        shutil.copytree(repo / ".git", other / ".git")
        (repo / ".git" / "objects" / "info" / "alternates").write_text(str(other / ".git" / "objects") + "\n")
    if name in LAZY:
        _lazy(tmp, repo, name, prog)
    (tmp / "marks").unlink(missing_ok=True)     # what arming itself ran does not count
    return repo


def _submodule(tmp: Path, repo: Path, prog: str) -> None:
    sub = tmp / "subproject"
    sub.mkdir()
    git(sub, "init", "-q", "-b", "main")
    for n in ("1", "2"):
        (sub / "f").write_text(n)
        _commit(sub)
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "sub")
    _commit(repo)
    git(repo, "config", "submodule.sub.update", "!" + prog)
    git(repo / "sub", "checkout", "-q", "HEAD~1")


def _lazy(tmp: Path, repo: Path, name: str, prog: str) -> None:
    """A partial clone from a remote that lazily fetching runs `prog` through; the HEAD commit deleted."""
    url = {"lazy-uploadpack": str(tmp / "upstream"), "lazy-ext": f"ext::{prog} %S",
           "core-sshCommand": "ssh://example.invalid/shop.git", "core-gitProxy": "git://example.invalid/shop.git"}
    cfg = ["config", "--local"]
    git(repo, *cfg, "core.repositoryformatversion", "1")
    git(repo, *cfg, "extensions.partialClone", "origin")
    git(repo, *cfg, "remote.origin.url", url[name])
    git(repo, *cfg, "remote.origin.promisor", "true")
    git(repo, *cfg, "remote.origin.partialclonefilter", "blob:none")
    if name == "lazy-uploadpack":
        git(repo, *cfg, "remote.origin.uploadpack", prog)
    if name == "lazy-ext":
        git(repo, *cfg, "protocol.allow", "always")
    head = git(repo, "rev-parse", "HEAD").stdout.strip()
    (repo / ".git" / "objects" / head[:2] / head[2:]).unlink()


def control(tmp: Path, repo: Path, name: str) -> None:
    """Run the plain-git operation that starts vector `name`'s program (on a copy, so `repo` stays as
    armed): the proof that the repository is armed."""
    copy = tmp / f"control-{name}"
    shutil.copytree(repo, copy, symlinks=True)
    env = clean_env()
    if name == "operator-filter":
        env["GIT_CONFIG_GLOBAL"] = str(tmp / "operator.gitconfig")
    if name != "sequence-editor":
        (copy / "shop" / "cart.py").write_text(FIXED)
    ops: dict[str, list[list[str]]] = {
        "core-pager": [], "core-editor": [["commit", "-q", "--allow-empty"]],
        "core-askPass": [["credential", "fill"]], "credential-helper": [["credential", "fill"]],
        "gpg-program": [["commit", "-q", "--allow-empty", "-m", "x"]],
        "sequence-editor": [["rebase", "-q", "-i", "HEAD"]],
        "core-alternateRefsCommand": [["fetch", "-q", str(tmp / "alternate"), "main"]],
        "uploadpack-packObjectsHook": [["clone", "-q", "--no-local", "--upload-pack",
                                        f"git -c uploadpack.packObjectsHook={tmp / 'programs' / name} upload-pack",
                                        f"file://{copy}", str(tmp / f"control-clone-{name}")]],
        "submodule-update": [["submodule", "update"]],
        "hooks": [["update-ref", "refs/heads/probe", "HEAD"]],
        "hooksPath": [["update-ref", "refs/heads/probe", "HEAD"]],
        "fsmonitor": [["status"]],
        "merge-driver": [["checkout", "-q", "-b", "side"], ["commit", "-q", "-a", "-m", "side"],
                         ["checkout", "-q", "main"], ["merge", "-q", "side"]],
        "include-path": [["diff"]], "includeIf": [["diff"]], "info-attributes": [["diff"]],
        "filter-smudge": [["archive", "HEAD"]], "filter-process": [["archive", "HEAD"]],
    }
    if name == "merge-driver":
        (copy / "shop" / "cart.py").write_text(CART)
        git(copy, "checkout", "-q", "-b", "side", env=env)
        (copy / "shop" / "cart.py").write_text(FIXED)
        git(copy, "commit", "-q", "-a", "-m", "side", env=env)
        git(copy, "checkout", "-q", "main", env=env)
        (copy / "shop" / "cart.py").write_text(CART + "# main\n")
        git(copy, "commit", "-q", "-a", "-m", "main", env=env)
        ops[name] = [["merge", "-q", "side"]]
    if name == "core-pager":
        _in_terminal(copy, ["git", "log", "-1"], env)
    for args in ops.get(name, [["rev-parse", "HEAD^{commit}"]] if name in LAZY else [["diff"]]):
        git(copy, *args, check=False, env=env, stdin="protocol=https\nhost=example.invalid\n\n")


def _in_terminal(cwd: Path, cmd: list[str], env: dict[str, str]) -> None:
    parent, child = pty.openpty()
    try:
        subprocess.run(cmd, cwd=cwd, env=env, stdin=child, stdout=child, stderr=child, timeout=60, check=False)
    finally:
        os.close(child)
        os.close(parent)


# --- the harness's commands that touch a repository, each run on an armed repository -----------------

def _run_folder(vtmp: Path, repo: Path) -> Path:
    """A run folder as `harness run --repo` leaves it: PATCH against the committed shop/cart.py."""
    run = vtmp / "run"
    run.mkdir()
    (run / "patch.diff").write_text(PATCH)
    head = git(repo, "rev-parse", "HEAD").stdout.strip()
    digest = hashlib.sha256(CART.encode()).hexdigest()
    (run / "base.json").write_text(json.dumps({"version": 1, "repo": str(repo), "mode": "git", "head": head,
                                               "files": {"shop/cart.py": digest}}))
    return run


def cmd_run_repo(vtmp: Path, repo: Path, name: str) -> str | None:
    """`harness run --repo` / `harness tasks new`: selection, staging and HEAD (`repo_task`)."""
    made = repo_task(repo, "total() ignores the discount")
    try:
        if made.project.mode != "git" or "shop/cart.py" not in made.project.files:
            return f"selection {made.project.mode} {made.project.files}"
        want = None if name in LAZY else git(repo, "rev-parse", "HEAD").stdout.strip()
        return None if made.head == want else f"head {made.head} (expected {want})"
    finally:
        made.cleanup()


def cmd_apply(vtmp: Path, repo: Path, name: str) -> str | None:
    """`harness apply RUN --yes` (a partial clone lacking the run's commit is refused; `--repo` applies)."""
    run = _run_folder(vtmp, repo)
    code = main(["apply", str(run), "--yes"])
    if name in LAZY:
        if code != 2 or (repo / "shop" / "cart.py").read_text() != CART:
            return f"exit {code} on a checkout lacking the run's commit"
        code = main(["apply", str(run), "--yes", "--repo", str(repo)])
    fixed = (repo / "shop" / "cart.py").read_text() == FIXED
    return None if code == 0 and fixed else f"exit {code}, cart.py fixed: {fixed}"


def cmd_apply_branch(vtmp: Path, repo: Path, name: str) -> str | None:
    """`harness apply RUN --yes --branch harness/fix` (a partial clone lacking HEAD is refused, saying so)."""
    code = main(["apply", str(_run_folder(vtmp, repo)), "--yes", "--branch", "harness/fix"])
    if name in LAZY:
        return None if code != 0 else "applied on a commit that is not there"
    shown = git(repo, "show", "harness/fix:shop/cart.py", check=False).stdout
    return None if code == 0 and shown == FIXED else f"exit {code}, branch holds {shown!r}"


def _task_dir(vtmp: Path, repo: Path) -> Path:
    task = vtmp / "task"
    task.mkdir()
    shutil.copytree(repo, task / "repo", symlinks=True)
    (task / "task.json").write_text(json.dumps({"id": "shop", "python": "3.11", "test_cmd": "python -m pytest",
                                                "FAIL_TO_PASS": ["tests/test_cart.py::test_discount"],
                                                "PASS_TO_PASS": [], "requirements": ["pytest==8.3.5"]}))
    (task / "problem.md").write_text("total() ignores the discount\n")
    (task / "gold.patch").write_text(PATCH)
    return task


def cmd_tasks_check(vtmp: Path, repo: Path, name: str) -> str | None:
    """`harness tasks check DIR` on a task whose repo/ is the armed checkout (.git included)."""
    code = main(["tasks", "check", str(_task_dir(vtmp, repo))])
    return None if code == 0 else f"exit {code}"


def cmd_tasks_export(vtmp: Path, repo: Path, name: str) -> str | None:
    """`harness tasks export`: the task's files committed and archived by a git the harness made."""
    task = load_task(_task_dir(vtmp, repo))
    rows = export_instances([task], vtmp / "out" / "instances.jsonl", vtmp / "out" / "repos")
    with tarfile.open(vtmp / "out" / "repos" / "shop.tar.gz") as tar:
        member = tar.extractfile("shop/shop/cart.py")
        held = member.read().decode() if member else None
    return None if rows and held == CART else f"archive holds {held!r}"


def _instance(repo: Path) -> dict[str, Any]:
    head = git(repo, "rev-parse", "HEAD").stdout.strip()
    return {"instance_id": "acme__shop-1", "repo": "acme/shop", "base_commit": head}


def cmd_eval_repos(vtmp: Path, repo: Path, name: str) -> str | None:
    """`harness eval --repos DIR` with DIR/acme__shop the armed clone: `git archive` of base_commit."""
    repos = vtmp / "repos"
    repos.mkdir()
    shutil.copytree(repo, repos / "acme__shop", symlinks=True)
    return _source(lambda: instance_source(_instance(repo), repos), name)


def cmd_repo_url(vtmp: Path, repo: Path, name: str) -> str | None:
    """`harness eval --repo-url file:///mirrors/{repo}` with the armed repository as the mirror."""
    mirrors = vtmp / "mirrors" / "acme"
    mirrors.mkdir(parents=True)
    shutil.copytree(repo, mirrors / "shop", symlinks=True)
    return _source(lambda: instance_source(_instance(repo), None, f"file://{vtmp / 'mirrors'}/{{repo}}"), name)


def _source(get: Callable[[], Path], name: str) -> str | None:
    try:
        dest = get()
    except TaskError as exc:
        return None if name in LAZY else f"refused: {exc}"
    if name in LAZY:
        return "got a commit that is not there"
    held = (dest / "shop" / "cart.py").read_text()
    return None if held == CART else f"source holds {held!r}"


COMMANDS: dict[str, Callable[[Path, Path, str], str | None]] = {
    "run --repo / tasks new": cmd_run_repo, "apply": cmd_apply, "apply --branch": cmd_apply_branch,
    "tasks check": cmd_tasks_check, "tasks export": cmd_tasks_export, "eval --repos": cmd_eval_repos,
    "eval --repo-url": cmd_repo_url,
}


def attack(base: Path, command: str, name: str) -> tuple[bool, str | None]:
    """Arm a repository with `name` under `base`, run `command` on it with a home and cache of its own
    (the operator's global config there is what `operator-filter` arms); (its program ran, what broke)."""
    vtmp = base / "".join(c if c.isalnum() else "_" for c in command) / name
    vtmp.mkdir(parents=True)
    repo = armed(vtmp, name)
    home = vtmp / "home"
    home.mkdir()
    if name == "operator-filter":
        shutil.copy(vtmp / "operator.gitconfig", home / ".gitconfig")
    saved = {k: os.environ.get(k) for k in ("HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME")}
    os.environ.update({"HOME": str(home), "XDG_CACHE_HOME": str(vtmp / "cache")})
    os.environ.pop("XDG_CONFIG_HOME", None)
    try:
        broke = COMMANDS[command](vtmp, repo, name)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return name in marks(vtmp), broke


if __name__ == "__main__":      # the table: python -m tests.hostile_git
    import contextlib
    import io
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'vector':28}" + "".join(f"{c[:15]:>17}" for c in COMMANDS))
        for vector in VECTORS:
            cells = []
            for command in COMMANDS:
                try:
                    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                        ran, broke = attack(Path(tmp), command, vector)
                    cells.append(("RAN" if ran else "-") + (" broke" if broke else ""))
                except Exception as exc:  # noqa: BLE001 - the table reports what failed
                    cells.append(f"error {type(exc).__name__}")
            print(f"{vector:28}" + "".join(f"{c:>17}" for c in cells), flush=True)
