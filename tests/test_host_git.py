"""Git on the host runs no program a repository names: every command that touches a repository, run on
the armed corpus (tests/hostile_git.py: one repository per vector), leaves no mark and still does its
job; plain git on the same repositories runs every one of them (the positive control)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.core import hostgit
from harness.core.project import select_files
from harness.core.sources import clone_url
from harness.errors import TaskError
from harness.tools.outbound import git_push
from tests import hostile_git as corpus
from tests.hostile_git import COMMANDS, VECTORS, armed, attack, control, git, marks


@pytest.mark.parametrize("vector", VECTORS)
def test_plain_git_runs_the_program_of_every_armed_repository(tmp_path: Path, vector: str) -> None:
    repo = armed(tmp_path, vector)
    assert marks(tmp_path) == set()
    control(tmp_path, repo, vector)
    assert marks(tmp_path) == {vector}


@pytest.mark.parametrize("command", COMMANDS)
def test_no_command_runs_a_program_an_armed_repository_names_and_each_still_works(tmp_path: Path,
                                                                                  command: str) -> None:
    ran, broke = set(), {}
    for vector in VECTORS:
        started, what = attack(tmp_path, command, vector)
        if started:
            ran.add(vector)
        if what:
            broke[vector] = what
    assert ran == set(), f"`{command}` ran the program of {sorted(ran)}"
    assert broke == {}, f"`{command}` did not do its job on {broke}"


PROGRAM_KEYS = (
    "filter.v.clean", "filter.v.smudge", "filter.v.process", "diff.v.textconv", "diff.v.command", "diff.external",
    "merge.v.driver", "core.sshCommand", "core.gitProxy", "core.pager", "pager.log", "core.editor", "core.askPass",
    "core.alternateRefsCommand", "core.fsmonitor", "core.hooksPath", "credential.helper",
    "credential.https://example.invalid.helper", "gpg.program", "gpg.ssh.program", "gpg.x509.program",
    "sequence.editor", "remote.origin.uploadpack", "remote.origin.receivepack", "remote.origin.vcs",
    "url.ext::sh.insteadOf", "uploadpack.packObjectsHook", "submodule.sub.update", "alias.ls-files",
    "include.path", "includeIf.gitdir:/.path", "extensions.partialClone", "remote.origin.promisor",
    "protocol.allow", "core.worktree", "core.excludesFile", "core.attributesFile", "safe.directory",
)
VIEW_KEYS = {"core.repositoryformatversion", "core.bare", "core.fsmonitor", "core.hookspath", "core.attributesfile",
             "core.untrackedcache", "core.logallrefupdates", "core.filemode", "protocol.allow", "gc.auto",
             "maintenance.auto", "commit.gpgsign", "tag.gpgsign", "submodule.recurse", "index.skiphash"}


def test_a_view_reads_only_the_config_the_harness_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))                   # an operator with no ignore file of their own
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    repo = armed(tmp_path, "hooks")
    extra = tmp_path / "extra.config"
    for key in PROGRAM_KEYS:                                     # every key that names a program, or a file
        if key != "core.worktree":
            git(tmp_path, "config", "--file", str(extra), key, str(tmp_path / "programs" / "hooks"))
    git(tmp_path, "config", "--file", str(extra), "core.filemode", "false")
    git(tmp_path, "config", "--file", str(extra), "core.autocrlf", "sh -c id")   # not a value git knows: dropped
    with open(repo / ".git" / "config", "a") as f:
        f.write(extra.read_text())
    with hostgit.view(repo) as view:
        listed = view.run(["config", "--list", "--show-origin"]).stdout.decode()
    origins = {line.split("\t")[0] for line in listed.splitlines()}
    assert origins == {f"file:{view.dir / 'config'}"}, listed
    keys = {line.split("\t")[1].split("=")[0] for line in listed.splitlines()}
    assert keys == VIEW_KEYS, listed
    assert "core.filemode=false" in listed and "core.fsmonitor=false" in listed and "protocol.allow=never" in listed
    assert "programs" not in listed
    with open(repo / ".git" / "config", "a") as f:
        f.write(f"[core]\n\tworktree = {tmp_path}\n")
    with pytest.raises(TaskError, match="sets core.worktree"):
        with hostgit.view(repo):
            pass


def test_find_checkout_finds_what_git_finds(tmp_path: Path) -> None:
    repo = armed(tmp_path, "diff-external")
    git(repo, "worktree", "add", "-q", str(tmp_path / "linked"))
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    for where in (repo, repo / "shop", tmp_path / "linked" / "shop", bare, repo / ".git" / "refs"):
        found = hostgit.find_checkout(where)
        probe = git(where, "rev-parse", "--is-inside-work-tree", "--absolute-git-dir", "--git-common-dir").stdout
        inside, git_dir, common = probe.split()
        assert found is not None
        assert (found.top is not None) == (inside == "true"), where
        assert str(found.git_dir) == git_dir and str(found.common_dir) == str((where / common).resolve())
        if found.top is not None:
            assert str(found.top) == git(where, "rev-parse", "--show-toplevel").stdout.strip()
            assert found.prefix == git(where, "rev-parse", "--show-prefix").stdout.strip()
    assert hostgit.find_checkout(tmp_path) is None


@pytest.mark.parametrize("fmt", [["--object-format=sha256"], ["--ref-format=reftable"]])
def test_repositories_of_other_formats_are_read_and_written(tmp_path: Path, fmt: list[str]) -> None:
    repo = tmp_path / "repo"
    (repo / "shop").mkdir(parents=True)
    (repo / "shop" / "cart.py").write_text(corpus.CART)
    git(tmp_path, "init", "-q", "-b", "main", *fmt, str(repo))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "start")
    assert select_files(repo).files == ["shop/cart.py"]
    head = git(repo, "rev-parse", "HEAD").stdout.strip()
    assert hostgit.in_repository(repo, ["rev-parse", "HEAD"]).stdout.decode().strip() == head
    shown = hostgit.in_repository(repo, ["cat-file", "blob", "HEAD:shop/cart.py"]).stdout.decode()
    assert shown == corpus.CART
    if fmt == ["--ref-format=reftable"]:       # base.json records 40-digit commits: sha1 repositories only
        assert corpus.cmd_apply_branch(tmp_path, repo, "reftable") is None


def test_a_partial_clone_is_never_fetched_from_and_says_why_an_object_is_missing(tmp_path: Path) -> None:
    repo = armed(tmp_path, "lazy-uploadpack")
    with hostgit.view(repo) as view:
        proc = view.run(["cat-file", "-p", "HEAD"])
        said = view.said(proc)
    assert proc.returncode != 0 and "partial clone" in said and "never fetched" in said
    assert marks(tmp_path) == set()
    git(repo, "cat-file", "-p", "HEAD", check=False)               # the control: plain git fetches
    assert marks(tmp_path) == {"lazy-uploadpack"}


def test_a_clone_from_an_operator_url_never_uses_a_command_transport(tmp_path: Path) -> None:
    prog = tmp_path / "prog"
    prog.write_text(f"#!/bin/sh\necho ext >> {tmp_path / 'marks'}\nexit 1\n")
    prog.chmod(0o755)
    done = hostgit.remote_git(["clone", "-q", f"ext::{prog}", str(tmp_path / "a")])
    assert done.returncode == 128 and "transport 'ext' not allowed" in done.stderr
    assert marks(tmp_path) == set()
    subprocess.run(["git", "-c", "protocol.ext.allow=always", "clone", "-q", f"ext::{prog}", str(tmp_path / "b")],
                   capture_output=True, env=corpus.clean_env())
    assert marks(tmp_path) == {"ext"}                                 # the control
    with pytest.raises(TaskError, match="command transport"):
        clone_url("ext::sh -c {repo}", "acme/shop")


def test_a_repository_of_a_newer_format_is_refused_with_what_is_read(tmp_path: Path) -> None:
    repo = armed(tmp_path, "hooks")
    git(repo, "config", "core.repositoryformatversion", "2")
    with pytest.raises(TaskError, match="repositoryformatversion '2'; the harness reads versions 0 and 1"):
        with hostgit.view(repo):
            pass


def test_the_selection_through_a_view_is_what_plain_git_lists(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    repo = armed(tmp_path, "fsmonitor")
    home = tmp_path / "home"
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".config" / "git" / "ignore").write_text("*.swp\n")            # the operator's own ignore file
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    (repo / ".gitignore").write_text("build/\n")
    (repo / ".git" / "info" / "exclude").write_text("local.txt\n")
    for rel in ("build/out.bin", "local.txt", "shop/.cart.py.swp", "shop/new.py", "docs/a b.md", "café.txt"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text("x\n")
    env = {**corpus.clean_env(), "HOME": str(home)}
    for root in (repo, repo / "shop"):
        listed = git(root, "-c", "core.fsmonitor=false", "-c", "core.quotePath=false", "ls-files", "-z", "--cached",
                     "--others", "--exclude-standard", "--deduplicate", env=env).stdout.split("\0")
        assert select_files(root).files == sorted(p for p in listed if p)
    assert "shop/new.py" in select_files(repo).files and "local.txt" not in select_files(repo).files
    assert "shop/.cart.py.swp" not in select_files(repo).files
    assert marks(tmp_path) == set()


def test_git_push_reads_the_workspaces_commits_with_no_config_so_no_signer_or_driver_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The preview's `git log` and `diff --stat` run on commits the agent made: a signed commit and a
    `.gitattributes` diff driver meet the operator's own log.showSignature, gpg.program and textconv."""
    prog = tmp_path / "prog"
    prog.write_text(f"#!/bin/sh\necho operator >> {tmp_path / 'marks'}\ncat \"$1\" 2>/dev/null\nexit 0\n")
    prog.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(f"[log]\n\tshowSignature = true\n[gpg]\n\tprogram = {prog}\n"
                                     f"[diff \"v\"]\n\ttextconv = {prog}\n[diff]\n\texternal = {prog}\n")
    work = tmp_path / "work"
    work.mkdir()
    git(tmp_path, "init", "-q", "-b", "main", str(work))
    (work / ".gitattributes").write_text("* diff=v\n")
    (work / "a.py").write_text("x = 1\n")
    git(work, "add", "-A")
    tree = git(work, "write-tree").stdout.strip()
    signed = (f"tree {tree}\nauthor t <t@example.invalid> 1 +0000\ncommitter t <t@example.invalid> 1 +0000\n"
              "gpgsig -----BEGIN PGP SIGNATURE-----\n \n AAAA\n -----END PGP SIGNATURE-----\n\nsigned\n")
    commit = git(work, "hash-object", "-t", "commit", "-w", "--stdin", stdin=signed).stdout.strip()
    git(work, "update-ref", "refs/heads/main", commit)
    repo = tmp_path / "repo.git"
    git(tmp_path, "clone", "-q", "--bare", str(work), str(repo))
    env = {**corpus.clean_env(), "HOME": str(home)}
    git(repo, "log", "-1", env=env)                                   # the control: plain git verifies
    assert marks(tmp_path) == {"operator"}
    (tmp_path / "marks").unlink()
    monkeypatch.setenv("HOME", str(home))
    prepared = git_push._describe(repo, "origin", "https://example.invalid/x.git", "main", commit, None)
    assert commit in prepared.preview and "a.py" in prepared.preview
    assert marks(tmp_path) == set()
