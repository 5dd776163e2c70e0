"""No host read or write follows a link in any component of a path inside an operator's or a hostile
tree: a tracked `lnk/environ` whose folder became `lnk -> /proc/self` (or a folder outside, or /etc),
a link in the middle of a deep path, a link swapped in after the file was listed, and `..`.

Every entry point is tried: selection and staging (`harness run --repo`, `harness tasks new`), apply
and apply --branch, task folders (`harness tasks check`, loading a task), the outputs list the web
console reads, and the one primitive under all of them (`checks.open_beneath`), through openat2 and
through the one-component-at-a-time walk. Each refusal has its positive control: a real folder at the
same path goes in (is read, is patched)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import checks
from harness.agent.inplace import repo_task, selection_lines, write_task_dir
from harness.cli.main import main
from harness.core.apply import PatchConflict, apply_to_tree, check_branch, load_run
from harness.core.project import select_files, stage
from harness.core.sources import GIT_IDENTITY
from harness.core.task import check_task, find_task_dirs, load_task
from harness.errors import TaskError
from harness.outputs import record_output, recorded_outputs
from harness.web.records import NotFound, read_capped
from harness.web.runs import Roots

SECRET = "CANARY-outside-the-project-1f3e"


def git(repo: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={**env, **GIT_IDENTITY}).stdout


@pytest.fixture(params=["openat2", "walk"])
def method(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Both ways `checks.open_beneath` resolves a path: the kernel's openat2, and the per-component walk
    used where the kernel (or a seccomp filter) has no openat2."""
    monkeypatch.setattr(checks, "_openat2_ok", None if request.param == "openat2" else False)
    yield request.param
    if request.param == "openat2":
        assert checks._openat2_ok is True, "openat2 was not used: this kernel does not offer it"


@pytest.fixture()
def outside(tmp_path: Path) -> Path:
    """A folder outside every project, holding what a link would leak."""
    folder = tmp_path / "outside"
    (folder / "c").mkdir(parents=True)
    (folder / "environ").write_text(SECRET + "\n")
    (folder / "c" / "d.txt").write_text(SECRET + "\n")
    return folder


def link_targets(outside: Path) -> dict[str, tuple[str, str]]:
    """kind -> (where `lnk` points, the tracked file below it)."""
    return {"proc": ("/proc/self", "environ"), "outside": (str(outside), "environ"), "etc": ("/etc", "hostname")}


@pytest.fixture(params=["proc", "outside", "etc"])
def linked_checkout(request: pytest.FixtureRequest, tmp_path: Path, outside: Path) -> tuple[Path, str]:
    """A checkout tracking `lnk/<name>` and `real/<name>`, then `rm -rf lnk; ln -s <target> lnk`."""
    target, name = link_targets(outside)[request.param]
    repo = tmp_path / "proj"
    for folder in ("lnk", "real"):
        (repo / folder).mkdir(parents=True)
        (repo / folder / name).write_text(f"tracked {folder}\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "start")
    shutil.rmtree(repo / "lnk")
    (repo / "lnk").symlink_to(target)
    return repo, name


# --- the primitive -----------------------------------------------------------------------------------

def test_open_beneath_refuses_every_link_on_the_way_and_reads_the_real_folder(
        method: str, tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "root"
    (root / "real" / "c").mkdir(parents=True)
    (root / "real" / "c" / "d.txt").write_text("inside\n")
    (root / "a").mkdir()
    (root / "a" / "b").symlink_to(outside)                  # a link in the middle of a deep path
    (root / "proc").symlink_to("/proc/self")
    (root / "rel").symlink_to("real")                       # even a link that stays inside is not followed
    assert checks.read_beneath(root, "real/c/d.txt") == b"inside\n"          # positive control
    for rel, component in [("a/b/c/d.txt", "a/b"), ("proc/environ", "proc"), ("rel/c/d.txt", "rel"),
                           ("proc", "proc")]:
        with pytest.raises(checks.LinkInPath) as caught:
            checks.read_beneath(root, rel)
        assert caught.value.errno == errno.ELOOP and caught.value.component == component
        assert f"({component}) is a symbolic link" in str(caught.value)
    for rel in ("real/../real/c/d.txt", "../outside/environ", "/etc/hostname", ""):
        with pytest.raises(checks.LinkInPath, match="not a relative path inside") as caught:
            checks.read_beneath(root, rel)
        assert caught.value.errno == errno.EINVAL


def test_a_folder_swapped_for_a_link_after_it_was_opened_is_not_followed(
        method: str, tmp_path: Path, outside: Path) -> None:
    """The walk holds each folder it checked: the folder open at `held` keeps pointing at the real one
    after its path is replaced by a link, and a fresh resolution refuses the link."""
    root = tmp_path / "root"
    (root / "a" / "c").mkdir(parents=True)
    (root / "a" / "c" / "d.txt").write_text("inside\n")
    held = checks.dir_beneath(root, "a")
    try:
        os.rename(root / "a", tmp_path / "a-moved")
        (root / "a").symlink_to(outside)
        assert checks.read_beneath(held, "c/d.txt") == b"inside\n"
        with pytest.raises(checks.LinkInPath, match=r"\(a\) is a symbolic link"):
            checks.read_beneath(root, "a/c/d.txt")
    finally:
        os.close(held)


def test_dir_beneath_creates_folders_but_never_through_a_link(method: str, tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "lnk").symlink_to(outside)
    os.close(checks.dir_beneath(root, "new/deep/folder", create=True))         # positive control
    assert (root / "new" / "deep" / "folder").is_dir()
    with pytest.raises(checks.LinkInPath, match=r"\(lnk\) is a symbolic link"):
        checks.dir_beneath(root, "lnk/made", create=True)
    assert not (outside / "made").exists()


# --- selection and staging: harness run --repo, harness tasks new ------------------------------------

def test_a_tracked_file_under_a_folder_that_became_a_link_is_left_out_with_its_reason(
        method: str, linked_checkout: tuple[Path, str], tmp_path: Path) -> None:
    repo, name = linked_checkout
    project = select_files(repo)
    assert f"real/{name}" in project.files                                      # positive control
    assert f"lnk/{name}" not in project.files
    why = {item.path: item.why for item in project.left_out}
    assert why[f"lnk/{name}"] == "a folder on its path (lnk) is a symbolic link (never followed)"
    assert why["lnk"] == "a symbolic link that leads out of the project"
    assert f"left out: lnk/{name}: a folder on its path (lnk) is a symbolic link (never followed)" \
        in selection_lines(project)
    staged = stage(project, tmp_path / "staged")
    assert (staged / "real" / name).read_text() == "tracked real\n"
    assert not os.path.lexists(staged / "lnk")
    assert SECRET.encode() not in b"".join(p.read_bytes() for p in staged.rglob("*") if p.is_file())


def test_a_link_in_the_middle_of_a_deep_path_is_left_out(method: str, tmp_path: Path, outside: Path) -> None:
    repo = tmp_path / "proj"
    for top in ("a", "real"):
        (repo / top / "b" / "c").mkdir(parents=True)
        (repo / top / "b" / "c" / "d.txt").write_text(f"{top}\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "start")
    shutil.rmtree(repo / "a" / "b")
    (repo / "a" / "b").symlink_to(outside)
    project = select_files(repo)
    assert "real/b/c/d.txt" in project.files and "a/b/c/d.txt" not in project.files
    assert {i.path: i.why for i in project.left_out}["a/b/c/d.txt"] == \
        "a folder on its path (a/b) is a symbolic link (never followed)"


@pytest.mark.parametrize("git_checkout", [True, False], ids=["git", "folder"])
def test_a_link_swapped_in_between_selection_and_staging_is_left_out_not_copied(
        method: str, git_checkout: bool, tmp_path: Path, outside: Path) -> None:
    repo = tmp_path / "proj"
    for top in ("sub", "real"):
        (repo / top).mkdir(parents=True)
        (repo / top / "environ").write_text(f"{top}\n")
    if git_checkout:
        git(repo, "init", "-q")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "start")
    project = select_files(repo)
    assert "sub/environ" in project.files
    os.rename(repo / "sub", tmp_path / "sub-moved")                 # after the listing, before the copy
    (repo / "sub").symlink_to(outside)
    staged = stage(project, tmp_path / "staged")
    assert (staged / "real" / "environ").read_text() == "real\n"                # positive control
    assert not os.path.lexists(staged / "sub")
    assert "sub/environ" not in project.files
    assert {i.path: i.why for i in project.left_out}["sub/environ"] == \
        "a folder on its path (sub) is a symbolic link (never followed), found while copying"


def test_tasks_new_writes_no_file_read_through_a_linked_folder(method: str, tmp_path: Path, outside: Path) -> None:
    repo = tmp_path / "proj"
    for top in ("sub", "real"):
        (repo / top).mkdir(parents=True)
        (repo / top / "environ").write_text(f"{top}\n")
    made = repo_task(repo, "the bug")
    try:
        os.rename(repo / "sub", tmp_path / "sub-moved")
        (repo / "sub").symlink_to("/proc/self")
        new = write_task_dir(made, tmp_path / "task", {"id": "proj", "FAIL_TO_PASS": [], "PASS_TO_PASS": [],
                                                       "requirements": []})
    finally:
        made.cleanup()
    assert (new.path / "repo" / "real" / "environ").read_text() == "real\n"
    assert not os.path.lexists(new.path / "repo" / "sub")
    assert "sub/environ" in {i.path for i in made.project.left_out}


# --- apply and apply --branch ------------------------------------------------------------------------

def _run_folder(tmp: Path, repo: Path, rel: str, old: bytes, new: str, head: str | None) -> Path:
    """A run folder whose patch changes `rel` from `old` to `new`, recorded against `repo`."""
    run = tmp / f"run-{hashlib.sha256(rel.encode()).hexdigest()[:6]}"
    run.mkdir()
    patch = (f"diff --git a/{rel} b/{rel}\n--- a/{rel}\n+++ b/{rel}\n@@ -1 +1 @@\n-{old.decode().rstrip()}\n"
             f"+{new}\n")
    (run / "patch.diff").write_text(patch)
    (run / "base.json").write_text(json.dumps({"version": 1, "repo": str(repo), "mode": "git" if head else "folder",
                                               "head": head, "files": {rel: hashlib.sha256(old).hexdigest()}}))
    return run


@pytest.mark.parametrize("target", ["outside", "etc"])
def test_apply_refuses_a_touched_file_under_a_linked_folder_and_writes_nothing_there(
        method: str, target: str, tmp_path: Path, outside: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The link leads to a file holding exactly what base.json recorded, so only the folder check stops it."""
    where = outside if target == "outside" else Path("/etc")
    name = "environ" if target == "outside" else "hostname"
    before = (where / name).read_bytes()
    repo = tmp_path / "proj"
    (repo / "real").mkdir(parents=True)
    (repo / "real" / name).write_bytes(before)
    (repo / "lnk").symlink_to(where)
    control = _run_folder(tmp_path, repo, f"real/{name}", before, "patched", None)
    assert main(["apply", str(control), "--yes"]) == 0                           # positive control
    assert (repo / "real" / name).read_text() == "patched\n"
    run = _run_folder(tmp_path, repo, f"lnk/{name}", before, "patched", None)
    with pytest.raises(PatchConflict) as caught:
        apply_to_tree(load_run(run))
    assert [(c.path, c.how) for c in caught.value.changes] == [(f"lnk/{name}", "is a symbolic link")]
    assert main(["apply", str(run), "--yes"]) == 1
    assert f"lnk/{name} (is a symbolic link)" in capsys.readouterr().err
    assert (where / name).read_bytes() == before


def test_apply_never_follows_base_json_to_a_folder_reached_through_a_link(
        method: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    real = tmp_path / "elsewhere" / "proj"
    real.mkdir(parents=True)
    (real / "cart.py").write_text("A = 1\n")
    (tmp_path / "via").symlink_to(tmp_path / "elsewhere")
    run = _run_folder(tmp_path, tmp_path / "via" / "proj", "cart.py", b"A = 1\n", "A = 2", None)
    assert main(["apply", str(run), "--yes"]) == 2
    err = capsys.readouterr().err
    assert "is reached through a symbolic link" in err and f"--repo {tmp_path / 'via' / 'proj'}" in err
    assert (real / "cart.py").read_text() == "A = 1\n"
    assert main(["apply", str(run), "--yes", "--repo", str(real)]) == 0          # said explicitly: applied
    assert (real / "cart.py").read_text() == "A = 2\n"


def test_apply_branch_refuses_a_path_under_a_folder_that_is_a_link_in_the_commit(
        tmp_path: Path, outside: Path) -> None:
    repo = tmp_path / "proj"
    (repo / "real").mkdir(parents=True)
    (repo / "real" / "environ").write_text(SECRET + "\n")
    (repo / "lnk").symlink_to(outside)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "start")
    head = git(repo, "rev-parse", "HEAD").strip()
    control = _run_folder(tmp_path, repo, "real/environ", (SECRET + "\n").encode(), "patched", head)
    assert check_branch(load_run(control), "fix/control") == head                # positive control
    run = _run_folder(tmp_path, repo, "lnk/environ", (SECRET + "\n").encode(), "patched", head)
    with pytest.raises(PatchConflict) as caught:
        check_branch(load_run(run), "fix/lnk")
    assert [(c.path, c.how) for c in caught.value.changes] == [("lnk/environ", "deleted")]
    assert "fix/lnk" not in git(repo, "branch", "--list")
    assert (outside / "environ").read_text() == SECRET + "\n"


# --- task folders: harness tasks check, loading a task -----------------------------------------------

def _task(folder: Path) -> Path:
    (folder / "repo").mkdir(parents=True)
    (folder / "repo" / "app.py").write_text("X = 1\n")
    (folder / "task.json").write_text(json.dumps({"id": folder.name, "test_cmd": "true", "FAIL_TO_PASS": ["t::a"],
                                                  "requirements": []}))
    (folder / "problem.md").write_text("X is wrong\n")
    return folder


@pytest.mark.parametrize("name", ["problem.md", "task.json", "repo"])
@pytest.mark.parametrize("target", ["/proc/self/environ", "outside"])
def test_a_task_file_or_repo_that_is_a_link_is_a_problem_of_the_task_never_read(
        method: str, name: str, target: str, tmp_path: Path, outside: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    control = _task(tmp_path / "control")
    assert check_task(control, patches=False) == []                              # positive control
    assert load_task(control).problem_statement == "X is wrong\n"
    task = _task(tmp_path / "hostile")
    link = str(outside / "environ") if target == "outside" else target
    if name == "repo":
        link = str(outside) if target == "outside" else "/proc/self"
    (shutil.rmtree if name == "repo" else os.unlink)(task / name)
    (task / name).symlink_to(link)
    problems = check_task(task, patches=False)
    assert len(problems) == 1 and "is a symbolic link" in problems[0] and name in problems[0], problems
    with pytest.raises(TaskError, match="symbolic link"):
        load_task(task)
    assert main(["tasks", "check", str(task)]) != 0
    assert SECRET not in capsys.readouterr().out


def test_a_task_folder_that_is_a_link_inside_a_folder_of_tasks_is_refused_by_name(
        tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    _task(tasks / "real")
    assert find_task_dirs([tasks]) == [tasks / "real"]                           # positive control
    (tasks / "linked").symlink_to(_task(tmp_path / "elsewhere"))
    with pytest.raises(TaskError, match=r"linked is a symbolic link to a folder"):
        find_task_dirs([tasks])


# --- the outputs list the web console reads ----------------------------------------------------------

def test_a_recorded_output_folder_whose_parent_became_a_link_is_not_listed(
        method: str, tmp_path: Path, outside: Path) -> None:
    state = tmp_path / "state"
    (tmp_path / "runs" / "a").mkdir(parents=True)
    (tmp_path / "keep" / "b").mkdir(parents=True)
    record_output(state, tmp_path / "runs" / "a")
    record_output(state, tmp_path / "keep" / "b")
    assert recorded_outputs(state) == [(tmp_path / "runs" / "a").resolve(), (tmp_path / "keep" / "b").resolve()]
    (outside / "a").mkdir()
    shutil.rmtree(tmp_path / "runs")
    (tmp_path / "runs").symlink_to(outside)                          # runs/a now leads to outside/a
    assert recorded_outputs(state) == [(tmp_path / "keep" / "b").resolve()]


def test_the_web_console_reader_refuses_a_run_file_that_is_a_link_and_a_folder_reached_through_one(
        method: str, tmp_path: Path, outside: Path) -> None:
    runs = tmp_path / "runs"
    (runs / "r").mkdir(parents=True)
    (runs / "r" / "result.json").write_text('{"ok": true}')
    (runs / "r" / "environ").symlink_to("/proc/self/environ")
    (runs / "lnk").symlink_to(outside)
    assert read_capped(runs / "r" / "result.json") == (b'{"ok": true}', 12)    # positive control
    with pytest.raises(NotFound, match=r"environ cannot be read: it is a symbolic link \(links are not followed\)"):
        read_capped(runs / "r" / "environ")
    with pytest.raises(NotFound, match=r"\(lnk\) is a symbolic link"):
        Roots([runs]).resolve("0/lnk/c")


# --- end to end: the reproduction, in a real sandbox ----------------------------------------

@pytest.mark.docker
def test_run_repo_does_not_copy_the_harness_environment_through_a_linked_folder(
        sandbox_image: str, linked_checkout: tuple[Path, str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`lnk/environ` tracked, then `lnk -> /proc/self`: the agent's `cat lnk/environ` finds nothing, while
    the real folder's file is there; the operator is told why lnk/environ was left out."""
    repo, name = linked_checkout
    canary = "HARNESS-TEST-CANARY-9d41b7"
    monkeypatch.setenv("HARNESS_TEST_CANARY", canary)       # in the harness's own /proc/self/environ
    monkeypatch.setenv("HARNESS_STATE_DIR", str(tmp_path / "state"))
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "HARNESS_MODEL"):
        monkeypatch.delenv(key, raising=False)
    look = {"type": "tool_use", "name": "bash",
            "input": {"command": f"cat lnk/{name}; echo; cat real/{name}; ls -la lnk 2>&1"}}
    script = tmp_path / "look.json"
    script.write_text(json.dumps({"turns": [[{"type": "text", "text": "Looking."}, look],
                                            [{"type": "text", "text": "Done."}]]}))
    out = tmp_path / "run"
    code = main(["run", "--repo", str(repo), "--problem", "look around", "--model", f"scripted:{script}",
                 "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err[-3000:]
    trajectory = (out / "trajectory.jsonl").read_text()
    assert "tracked real" in trajectory                                          # positive control
    assert canary not in trajectory and SECRET not in trajectory and "No such file or directory" in trajectory
    assert f"left out: lnk/{name}: a folder on its path (lnk) is a symbolic link (never followed)" in captured.err
