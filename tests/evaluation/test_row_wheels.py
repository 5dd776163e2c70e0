"""A version's lock carries what each of its rows declares beyond it: the rows' trees read when the lock is
made, what the lock's packages do not satisfy resolved as of the row's date, its wheels put uninstalled in
the environment's wheelhouse, where the row's own offline `pip install -e .` finds them as pip online
would. Real uv, the real PyPI, real git; Docker where an image is built."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import subprocess
from pathlib import Path

import docker
import docker.errors
import pytest

from harness.core.task import Environment, Task
from harness.environments import EnvironmentBuildError, ensure_task_image, ensure_venv_image, environment_lock
from harness.environments.lock import Lock, LockError, RowFile, lock_from_text, shipped_locks, store_lock
from harness.environments.lock_files import LockUnsatisfiable
from harness.environments.locking import lock_identity, make_lock
from harness.environments.recipe import INSTALL_FAILED
from harness.environments.row_wheels import RowTree, declaration_tree, row_wheels, unmet
from harness.environments.venv_image import venv_tag
from sandbox.images import ensure_image, image_exists


def _commit(root: Path, when: str, setup_py: str) -> str:
    """`setup_py` committed as setup.py of the git repository `root` (made if missing) at `when`."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "setup.py").write_text(setup_py)
    env = {**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when, "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
    if not (root / ".git").exists():
        subprocess.run(["git", "init", "-q"], cwd=root, env=env, check=True, capture_output=True)
    for args in (["add", "setup.py"], ["commit", "-q", "-m", when]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True)
    return head.stdout.strip()


def _setup(requires: list[str]) -> str:
    return f"from setuptools import setup\nsetup(name='acme', packages=['acme'], install_requires={requires!r})\n"


def _version(tmp_path: Path) -> tuple[Path, str, str]:
    """acme's clone: its environment_setup_commit (June 2019) requires six; a row of it (a later commit)
    requires six<1.12 (the lock's six 1.12.0 violates it, as pylint-7080's tree does the lock's astroid)
    and attrs (which the lock lacks, as pytest-7168's tree does wcwidth)."""
    clone = tmp_path / "acme__lib"
    setup_commit = _commit(clone, "2019-06-01T12:00:00Z", _setup(["six"]))
    row_commit = _commit(clone, "2019-06-09T12:00:00Z", _setup(["six<1.12", "attrs", "acme"]))
    return clone, setup_commit, row_commit


def _env(clone: Path, setup_commit: str, created_at: str) -> Environment:
    return Environment(key="acme/lib 1.0 py3.9", python_requested="3.9", version_of=("acme/lib", "1.0"),
                       setup_commit=setup_commit, git_source=clone, as_of=created_at, any_requirements_file=False)


def _task(env: Environment, repo_dir: Path, task_id: str) -> Task:
    return Task(id=task_id, problem_statement="", repo_dir=repo_dir, python="3.9", environment=env,
                install_cmd="python -m pip install -e .")


def test_a_rows_requirements_beyond_the_lock_are_resolved_as_of_its_date_and_carried(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    clone, setup_commit, row_commit = _version(tmp_path)
    env = _env(clone, setup_commit, "2019-06-10")
    version_tree = declaration_tree(clone, setup_commit, tmp_path / "at-setup")
    row_tree = declaration_tree(clone, row_commit, tmp_path / "at-row")
    assert sorted(p.name for p in row_tree.iterdir()) == ["setup.py"]
    task = _task(env, row_tree, "acme__lib-2")
    key, recipe = lock_identity(task, env)
    lock = make_lock(task, env, key, recipe, "base:1")        # no rows: as before, from the setup commit's tree
    assert {f.name: f.version for f in lock.packages} == {"six": "1.12.0"} and lock.row_wheels == ()
    assert unmet(lock, env, version_tree, own="acme") == []                      # control: the version's own tree
    assert unmet(lock, env, row_tree, own="acme") == ["attrs", "six<1.12"]       # the project itself never
    (version_tree / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools<40", "six"]\n')
    assert unmet(lock, env, version_tree, own="acme") == ["setuptools<40"]      # its isolated build's too,
    assert unmet(lock, env, version_tree, own="acme", isolated=False) == []     # not with --no-build-isolation
    (version_tree / "pyproject.toml").unlink()
    rows = [RowTree("acme__lib-1", version_tree, "2019-06-02"), RowTree("acme__lib-2", row_tree, "2019-06-10")]
    files, notes = row_wheels(lock, env, rows, own="acme")
    assert notes == ()
    # as of the row's date, but never before Python 3.9's first usable date (2021-01-01): attrs 20.3.0
    assert [(f.name, f.version, f.rows) for f in files] == [("attrs", "20.3.0", ("acme__lib-2",)),
                                                           ("six", "1.11.0", ("acme__lib-2",))]
    assert all(f.kind == "wheel" and len(f.sha256) == 64 and f.filename.endswith(".whl") for f in files)
    carried = make_lock(task, env, key, recipe, "base:1", rows=rows)
    assert carried.row_wheels == files
    assert carried.packages == lock.packages and carried.inputs == lock.inputs      # the venv is the same
    assert carried.files_digest() != lock.files_digest()                           # the image is not
    assert lock_from_text(carried.text(), "here") == carried and '"row_wheels"' in carried.text()
    assert '"row_wheels"' not in lock.text()


def test_shipped_locks_read_and_write_back_byte_for_byte() -> None:
    # the optional field changes nothing of a lock without it: its text, hence its recipe digest and files
    found = [e for folder in shipped_locks().iterdir() if folder.is_dir() for e in folder.iterdir()]
    assert len(found) >= 50
    for entry in found:
        text = entry.read_text()
        lock = lock_from_text(text, entry.name)
        assert lock.text() == text, entry.name
        assert all(set(f.rows) and f.kind == "wheel" for f in lock.row_wheels)
    broken = Lock(lock.key, lock.inputs, lock.toolchain, lock.packages,
                  row_wheels=(RowFile(**dataclasses.asdict(lock.toolchain[0]), rows=()),))
    with pytest.raises(LockError, match="the rows that need it"):
        lock_from_text(broken.text(), "broken")


@pytest.fixture(scope="module")
def base39(docker_client: docker.DockerClient) -> str:
    return ensure_image(python="3.9")


def test_a_row_whose_tree_needs_wheels_beyond_the_environment_installs_offline_from_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, docker_client: docker.DockerClient, base39: str) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    clone, setup_commit, row_commit = _version(tmp_path)
    row = tmp_path / "acme__lib-2"                     # the row's own tree, as a run gets it
    subprocess.run(["git", "clone", "-q", str(clone), str(row)], check=True, capture_output=True)
    subprocess.run(["git", "checkout", "-q", row_commit], cwd=row, check=True, capture_output=True)
    (row / "acme").mkdir()
    (row / "acme" / "__init__.py").write_text("import attr, six\n")
    task = _task(_env(clone, setup_commit, "2019-06-10"), row, "acme__lib-2")
    lock = environment_lock(task, base39, client=docker_client)        # made on first use: this row is read
    assert [(f.pin(), f.rows) for f in lock.row_wheels] == [("attrs==20.3.0", ("acme__lib-2",)),
                                                           ("six==1.11.0", ("acme__lib-2",))]
    bare = dataclasses.replace(lock, row_wheels=())
    made = [t for t in (venv_tag(lock, base39), venv_tag(bare, base39)) if not image_exists(docker_client, t)]
    try:
        tag = ensure_task_image(task, base39, client=docker_client)
        made.append(tag)
        env_tag = venv_tag(lock, base39)
        venv = docker_client.containers.run(   # the environment: the lock's packages only, the rows' wheels lie by
            env_tag, ["sh", "-c", "python -c 'import six; print(six.__version__)'; python -c 'import attr' 2>&1 | "
                                  "tail -n 1; ls /opt/harness/env/wheels | grep -c -e ^attrs-20 -e ^six-1.11"],
            remove=True, network_disabled=True, labels={"harness.test": "1"})
        assert venv.decode().split("\n")[:3] == ["1.12.0", "ModuleNotFoundError: No module named 'attr'", "2"]
        out = docker_client.containers.run(
            tag, ["python", "-c", "import attr, six; print(six.__version__, attr.__version__)"],
            remove=True, network_disabled=True, labels={"harness.test": "1"}, working_dir="/")
        assert out.decode().split() == ["1.11.0", "20.3.0"]         # what pip online would have installed
        # control: the same row on the environment without the rows' wheels fails its offline install
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "bare-cache"))
        store_lock(bare)
        with pytest.raises(EnvironmentBuildError) as caught:
            ensure_task_image(dataclasses.replace(task, id="acme__lib-2-bare"), base39, client=docker_client)
        assert INSTALL_FAILED in str(caught.value) and "six<1.12" in str(caught.value)
        # a row's wheel whose file is not the lock's is an error naming it, as any file of a lock
        wrong = dataclasses.replace(lock, row_wheels=(dataclasses.replace(
            lock.row_wheels[0], sha256=hashlib.sha256(b"another file").hexdigest()), lock.row_wheels[1]))
        store_lock(wrong)
        with pytest.raises(LockUnsatisfiable) as unsatisfied:
            ensure_venv_image(dataclasses.replace(task, id="acme__lib-2-wrong"), base39, client=docker_client)
        assert unsatisfied.value.distribution == "attrs==20.3.0" and "has sha256" in str(unsatisfied.value)
    finally:
        for image in made:
            try:
                docker_client.images.remove(image, force=True)
            except docker.errors.NotFound:
                pass
