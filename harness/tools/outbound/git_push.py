"""`git_push`: push the workspace's commits to a remote the operator configured; credentials stay on
the host. The sandbox makes a git bundle, the host fetches it into a temporary bare repository and,
after approval, pushes the exact approved commit (never forced) to `approval.git_remotes[remote]`."""

from __future__ import annotations

import hashlib
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Any

from harness.config import Config
from harness.core import hostgit
from harness.errors import ToolArgumentsError, ToolError
from harness.tools.base import ToolContext
from harness.tools.outbound.action import OutboundAction, Prepared
from harness.tools.outbound.preview import field_lines, masked_url
from sandbox.text import escape_ident, escape_unsafe

EXAMPLE = {"remote": "origin", "branch": "fix-wordcount", "key": "push-fix-1"}
MAX_BUNDLE_BYTES = 200 * 1024 * 1024


def _git(*args: str, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    """git on the workspace's commits in the harness's repository `cwd` (or on none). What the workspace
    sent is data; it is read through a `core.hostgit` view, which reads no config at all (the operator's
    neither), so no filter, diff or merge driver, signer or hook runs on the workspace's files."""
    ran = (hostgit.in_repository(cwd, args, env={"GIT_ALLOW_PROTOCOL": "file"}) if cwd is not None
           else hostgit.in_folder(Path(tempfile.gettempdir()), args))
    return _checked(args, subprocess.CompletedProcess(ran.args, ran.returncode, ran.stdout.decode("utf-8", "replace"),
                                                      ran.stderr.decode("utf-8", "replace")), check)


def _remote(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    """git talking to the operator's remote from the harness's repository `cwd`: the operator's config is
    read (credentials), transports are limited, no prompt, no hook (`hostgit.remote_git`)."""
    return _checked(args, hostgit.remote_git(["-C", str(cwd), *args], timeout=300), check)


def _checked(args: tuple[str, ...], proc: subprocess.CompletedProcess[str], check: bool
             ) -> subprocess.CompletedProcess[str]:
    if check and proc.returncode != 0:
        raise ToolError(f"git {' '.join(args[:2])} failed on the host (exit {proc.returncode}): "
                        f"{escape_unsafe(proc.stderr.strip()[-1500:])}")
    return proc


def _bundle_to_host(ctx: ToolContext, tmp: Path) -> Path:
    """All branches of the sandbox's /workspace repository, fetched into a bare repo on the host."""
    inside = f"/tmp/harness/push-{uuid.uuid4().hex[:12]}.bundle"
    made = ctx.sandbox.exec(f"mkdir -p /tmp/harness && git bundle create {inside} --branches", timeout=300)
    if not made.ok:
        raise ToolError(f"could not bundle the workspace's git repository (exit {made.exit_code}): "
                        f"{made.stderr.text.strip()[-800:]}; is /workspace a git repository with commits?")
    data = ctx.sandbox.read_file(inside, max_bytes=MAX_BUNDLE_BYTES)
    ctx.sandbox.exec(f"rm -f {inside}", timeout=30)
    if data.size > MAX_BUNDLE_BYTES:
        raise ToolError(f"the workspace's git bundle is {data.size} bytes, over the {MAX_BUNDLE_BYTES} byte limit")
    bundle, repo = tmp / "workspace.bundle", tmp / "repo.git"
    bundle.write_bytes(data.data)
    _remote("init", "--bare", "-q", "--template=", str(repo), cwd=tmp)
    _git("fetch", "-q", str(bundle), "+refs/heads/*:refs/heads/*", cwd=repo)
    return repo


def _remote_url(config: Config, name: str) -> str:
    remotes = config.approval.git_remotes
    if name not in remotes:
        configured = sorted(remotes) or "none: the operator sets approval.git_remotes in the config"
        raise ToolArgumentsError(f"git_push: remote {escape_ident(name)!r} is not configured; configured remotes: "
                                 f"{configured}. Example call: {EXAMPLE}")
    return remotes[name]


def _prepare_with(config: Config) -> Any:
    def prepare(args: dict[str, Any], ctx: ToolContext) -> Prepared:
        name, branch = str(args["remote"]), str(args["branch"])
        url = _remote_url(config, name)
        if branch.startswith("-") or _git("check-ref-format", "--branch", branch, check=False).returncode != 0:
            raise ToolArgumentsError(f"git_push: {escape_ident(branch)!r} is not a valid branch name; e.g. {EXAMPLE}")
        with tempfile.TemporaryDirectory(prefix="harness-push-") as tmp:
            repo = _bundle_to_host(ctx, Path(tmp))
            tip = _git("rev-parse", "--verify", "-q", f"refs/heads/{branch}^{{commit}}", cwd=repo, check=False)
            if tip.returncode != 0:
                have = _git("branch", "--format=%(refname:short)", cwd=repo).stdout.split()
                raise ToolArgumentsError(f"git_push: the workspace has no branch {escape_ident(branch)!r}; it has "
                                         f"{[escape_ident(b) for b in have]}")
            commit = tip.stdout.strip()
            base = _remote_tip(repo, url, branch)
            return _describe(repo, name, url, branch, commit, base)
    return prepare


def _remote_tip(repo: Path, url: str, branch: str) -> str | None:
    """The remote branch's commit, fetched into `repo` (None when the branch is new)."""
    listed = _remote("ls-remote", "--end-of-options", url, f"refs/heads/{branch}", cwd=repo).stdout.split()
    if not listed:
        return None
    _remote("fetch", "-q", "--end-of-options", url, f"+refs/heads/{branch}:refs/remotes/target/{branch}", cwd=repo)
    return listed[0]


def _describe(repo: Path, name: str, url: str, branch: str, commit: str, base: str | None) -> Prepared:
    if base == commit:
        raise ToolError(f"nothing to push: {escape_ident(name)}/{escape_ident(branch)} is already at {commit[:12]}")
    if base and _git("merge-base", "--is-ancestor", base, commit, cwd=repo, check=False).returncode != 0:
        raise ToolError(f"{escape_ident(name)}/{escape_ident(branch)} has commits that your branch does not contain "
                        f"(remote at {base[:12]}); a push would be refused and force pushes are not offered. Push to a "
                        "new branch name instead.")
    span = f"{base}..{commit}" if base else commit
    log = _git("log", "--format=%h %an: %s", "-n", "50", span, cwd=repo).stdout.splitlines()
    count = _git("rev-list", "--count", span, cwd=repo).stdout.strip()
    empty_tree = _git("hash-object", "-t", "tree", "/dev/null", cwd=repo).stdout.strip()
    stat = _git("diff", "--stat", base or empty_tree, commit, cwd=repo).stdout.rstrip().splitlines()
    hidden = masked_url(url) != url
    fields = [("remote", f"{escape_ident(name)} = {escape_ident(masked_url(url))}"
               + ("  (*** = the user/password of the operator's configured URL, approval.git_remotes; used by "
                  "the host only)" if hidden else "")),
              ("branch", escape_ident(branch) + ("  (new on the remote)" if base is None else "  (fast-forward)")),
              ("commit", commit), ("commits", f"{count} to push" + (", first 50 listed" if int(count) > 50 else ""))]
    lines = field_lines(fields) + ["  " + escape_unsafe(line) for line in log] + ["diff stat:"]
    lines += ["  " + escape_unsafe(line) for line in stat[-60:]]
    resolved = {"remote": name, "remote_url_sha256": hashlib.sha256(url.encode()).hexdigest(),
                "branch": branch, "commit": commit, "base": base}
    return Prepared(args=resolved, preview="\n".join(lines), observed=("base",))


def _execute_with(config: Config) -> Any:
    def execute(args: dict[str, Any], ctx: ToolContext) -> str:
        url = _remote_url(config, args["remote"])
        if hashlib.sha256(url.encode()).hexdigest() != args["remote_url_sha256"]:
            raise ToolError(f"the URL of remote {escape_ident(args['remote'])!r} changed since the push was approved; "
                            "nothing was pushed. Ask again with a new key.")
        with tempfile.TemporaryDirectory(prefix="harness-push-") as tmp:
            repo = _bundle_to_host(ctx, Path(tmp))
            if _git("cat-file", "-e", f"{args['commit']}^{{commit}}", cwd=repo, check=False).returncode != 0:
                raise ToolError(f"the approved commit {args['commit'][:12]} is no longer in the workspace; "
                                "nothing was pushed")
            refspec = f"{args['commit']}:refs/heads/{args['branch']}"
            pushed = _remote("push", "--porcelain", "--end-of-options", url, refspec, cwd=repo, check=False)
        if pushed.returncode != 0:
            raise ToolError(f"git push to {escape_ident(args['remote'])}/{escape_ident(args['branch'])} "
                            "was refused (exit "
                            f"{pushed.returncode}): {escape_unsafe(pushed.stderr.strip()[-1500:])}")
        return (f"pushed {args['commit'][:12]} to {escape_ident(args['remote'])}/{escape_ident(args['branch'])} "
                f"({escape_ident(masked_url(url))})\n{escape_unsafe(pushed.stdout.strip())}")
    return execute


def git_push_action(config: Config) -> OutboundAction:
    return OutboundAction(
        name="git_push",
        description=("Push a branch of the workspace's git repository to a remote the operator configured "
                     "(`remote` is its name, e.g. \"origin\"). Commit your work first with the shell tool. "
                     "Never forced: if the remote branch has commits you lack, push to a new branch name."),
        parameters={"type": "object", "required": ["remote", "branch"], "additionalProperties": False,
                    "properties": {"remote": {"type": "string", "description": "configured remote name"},
                                   "branch": {"type": "string", "description": "branch to push (same name "
                                                                              "on the remote)"}}},
        prepare=_prepare_with(config), execute=_execute_with(config), example=EXAMPLE)
