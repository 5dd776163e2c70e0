"""Locks: one per (repository, version, interpreter), made as of the version's date as a function of their
inputs only, the same on two clean caches, shipped for the SWE-bench Lite versions, and followed
exactly: building from a lock never resolves, and a file that is gone or changed is an error naming
its distribution. Real uv, the real PyPI, real git; Docker where an image is built."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import os
import subprocess
import threading
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import docker
import pytest

from harness.config import load
from harness.core.task import Environment, Task
from harness.environments import EnvironmentUnsupported, ensure_venv_image
from harness.environments.lock import (
    LOCK_FORMAT,
    Lock,
    LockedFile,
    LockError,
    LockInputs,
    find_lock,
    lock_from_text,
    shipped_locks,
    store_lock,
)
from harness.environments.lock_files import LockUnsatisfiable, fetch_files, locked_files
from harness.environments.locking import lock_identity, make_lock
from harness.environments.venv_image import venv_tag
from harness.environments.versions import SETUP_COMMITS, shipped_setup_commits, version_date
from harness.evaluation import swebench
from harness.evaluation.preflight import estimate_build_bytes
from harness.evaluation.specs import TABLE
from sandbox.images import ensure_image, image_exists
from tests.approval.helpers import CountingServer, make_wheel
from tests.evaluation.conftest import SWEBENCH_DATA

LITE = SWEBENCH_DATA / "lite-test.jsonl"


def _rows(version: tuple[str, str]) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in LITE.read_text().splitlines() if line.strip()]
    return [r for r in rows if (r["repo"], r["version"]) == version]


def _task(env: Environment, repo_dir: Path, task_id: str = "acme__lib-1", python: str = "3.9") -> Task:
    return Task(id=task_id, problem_statement="", repo_dir=repo_dir, python=python, environment=env,
                install_cmd="python -m pip install -e .")


def test_instances_of_one_version_share_one_lock_whatever_their_creation_dates(tmp_path: Path) -> None:
    first, second = _rows(("django/django", "3.1"))[:2]
    assert first["created_at"][:10] != second["created_at"][:10]      # control: their own dates differ
    found = [swebench.environment_of(r, swebench.spec_of(r), "3.9") for r in (first, second)]
    envs = [e for e in found if e is not None]
    assert len(envs) == 2 and envs[0].as_of != envs[1].as_of
    tasks = [_task(e, tmp_path, str(r["instance_id"])) for e, r in zip(envs, (first, second), strict=True)]
    assert lock_identity(tasks[0], envs[0]) == lock_identity(tasks[1], envs[1])
    key, _ = lock_identity(tasks[0], envs[0])
    assert key.relative_path() == f"django__django/3.1-py3.9-{key.platform.split('-')[0]}.json"
    # the date is the version's: the commit date of its environment_setup_commit (shipped table, no git here)
    dates = [version_date(t, e) for t, e in zip(tasks, envs, strict=True)]
    assert dates[0] == dates[1] and dates[0].as_of == "2020-05-12T06:52:23Z"
    assert dates[0].said == "the commit date of environment_setup_commit 0668164b4ac9"


def test_every_lite_version_the_table_can_build_offline_ships_a_lock_made_from_its_recipe() -> None:
    rows = [json.loads(line) for line in LITE.read_text().splitlines() if line.strip()]
    versions = {(r["repo"], r["version"]): r for r in rows}
    buildable = {v: r for v, r in versions.items() if not TABLE[v].offline_blocker}
    missing, stale = [], []
    for (repo, version), row in sorted(buildable.items()):
        spec = swebench.spec_of(row)
        env = swebench.environment_of(row, spec, spec.python_used)
        assert env is not None
        task = _task(env, Path("/nonexistent"), str(row["instance_id"]), spec.python_used)   # django 5.0: 3.11
        key, recipe = lock_identity(task, env)
        entry = shipped_locks().joinpath(*key.relative_path().split("/"))
        if not entry.is_file():
            missing.append(f"{repo} {version}")
        elif lock_from_text(entry.read_text(), key.relative_path()).inputs.recipe != recipe:
            stale.append(f"{repo} {version}")
    assert stale == [], f"shipped locks made from another recipe: {stale} (bench/lock_versions.py --locks)"
    # astropy 1.3 has none: its pins numpy 1.16.0 and Cython 0.27.3 do not build on 3.9 (pytest 4.5's has
    # been made since its atomicwrites 1.4.1 is built with its build requirements alone: build-sdists.sh)
    assert missing == ["astropy/astropy 1.3"], f"no shipped lock for {missing}"
    dated = shipped_setup_commits()
    assert all(dated[v][0] == r["environment_setup_commit"] for v, r in versions.items() if v in dated)
    assert len([v for v in versions if v in dated]) >= 50, f"{SETUP_COMMITS} dates too few Lite versions"


def _project(root: Path, when: str, install_requires: list[str]) -> tuple[Path, str]:
    """A git repository holding a setup.py, committed at `when`; (its folder, the commit)."""
    root.mkdir(parents=True)
    (root / "setup.py").write_text("from setuptools import setup\n"
                                   f"setup(name='lib', install_requires={install_requires!r})\n")
    env = {**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when, "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
    for args in (["init", "-q"], ["add", "setup.py"], ["commit", "-q", "-m", "setup"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True)
    return root, head.stdout.strip()


def _version_env(clone: Path, commit: str, created_at: str) -> Environment:
    return Environment(key="acme/lib 1.0 py3.9", python_requested="3.9", version_of=("acme/lib", "1.0"),
                       setup_commit=commit, git_source=clone, as_of=created_at, any_requirements_file=False)


def test_two_clean_caches_make_the_same_lock_and_the_same_image_tag(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    clone, commit = _project(tmp_path / "lib", "2019-06-01T12:00:00+02:00", ["six", "attrs"])
    instance = tmp_path / "instance"        # an instance's own tree: not where the version's requirements are read
    instance.mkdir()
    locks = []
    for cache, created in (("a", "2021-03-01"), ("b", "2019-08-09")):
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / cache))
        env = _version_env(clone, commit, created)
        task = _task(env, instance)
        key, recipe = lock_identity(task, env)
        locks.append(make_lock(task, env, key, recipe, "base:1"))
    assert locks[0].text() == locks[1].text()
    assert venv_tag(locks[0], "base:1") == venv_tag(locks[1], "base:1")
    lock = locks[0]
    assert (lock.inputs.as_of, lock.inputs.declarations_from) == ("2019-06-01T10:00:00Z",
                                                                   f"environment_setup_commit {commit[:12]}")
    pinned = {f.name: f for f in lock.packages}
    assert pinned["six"].version == "1.12.0" and pinned["attrs"].version == "19.1.0"     # as of June 2019
    assert all(f.kind == "wheel" and len(f.sha256) == 64 and f.url.startswith("https://") for f in lock.packages)
    assert [f.name for f in lock.toolchain] == ["pip", "setuptools", "wheel"]
    # control: another version date is another lock, and another tag
    later_clone, later = _project(tmp_path / "later", "2023-06-01T12:00:00Z", ["six", "attrs"])
    env = _version_env(later_clone, later, "2021-03-01")
    key, recipe = lock_identity(_task(env, instance), env)
    other = make_lock(_task(env, instance), env, key, recipe, "base:1")
    assert {f.name: f.version for f in other.packages}["attrs"] != "19.1.0"
    assert venv_tag(other, "base:1") != venv_tag(lock, "base:1")


def test_a_lock_is_found_shipped_or_cached_only_for_its_recipe_and_a_damaged_one_is_made_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    clone, commit = _project(tmp_path / "lib", "2019-06-01T12:00:00Z", ["six"])
    env = _version_env(clone, commit, "2019-06-02")
    task = _task(env, tmp_path)
    key, recipe = lock_identity(task, env)
    lock = make_lock(task, env, key, recipe, "base:1")
    said: list[str] = []
    assert find_lock(key, recipe, said.append) is None and said == []          # nothing stored yet
    path = store_lock(lock)
    assert find_lock(key, recipe, said.append) == lock
    assert find_lock(key, "another-recipe", said.append) is None
    assert "was made from another recipe" in said[-1]
    path.write_text('{"format": ')
    assert find_lock(key, recipe, said.append) is None and "is not a lock" in said[-1]
    path.write_text(json.dumps({**json.loads(lock.text()), "format": LOCK_FORMAT + 1}))
    with pytest.raises(LockError, match=f"this harness reads format {LOCK_FORMAT}"):
        lock_from_text(path.read_text(), str(path))


def test_a_lock_that_cannot_be_satisfied_names_the_distribution(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    data = make_wheel("acme", "1.0")
    with CountingServer() as server:
        server.routes["/acme-1.0-py3-none-any.whl"] = ("application/octet-stream", data)
        good = LockedFile("acme", "1.0", "acme-1.0-py3-none-any.whl", hashlib.sha256(data).hexdigest(),
                          server.url("/acme-1.0-py3-none-any.whl"), "wheel")
        fetch_files([good], tmp_path / "ok")                                  # control: as the lock says
        assert (tmp_path / "ok" / good.filename).read_bytes() == data
        changed = dataclasses.replace(good, sha256=hashlib.sha256(b"the file the lock was made from").hexdigest())
        with pytest.raises(LockUnsatisfiable) as caught:
            fetch_files([changed], tmp_path / "changed")
    assert caught.value.distribution == "acme==1.0" and "has sha256" in str(caught.value)
    assert not (tmp_path / "changed" / good.filename).exists()
    [six] = locked_files(["six==1.12.0"], "3.9")        # the real file, then a name the index does not have
    gone = dataclasses.replace(six, filename="six-1.12.0-py2.py3-none-any.whl",
                               url=six.url.replace("six-1.12.0-py2.py3", "six-1.12.0.post99-py2.py3"))
    with pytest.raises(LockUnsatisfiable, match=r"six==1\.12\.0 .* is no longer on the index \(404"):
        fetch_files([gone], tmp_path / "gone")


def test_two_builds_fetching_the_same_file_at_once_both_get_it(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # two environments building at once share a file (pytest 7.0's and sphinx 4.0's setuptools): both
    # downloads pass the cache check, and neither may take the other's half-written file away
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    both_writing = threading.Barrier(2, timeout=30)
    real_urlopen = urllib.request.urlopen

    class Answer:                   # its first read waits until both downloads have their file open
        def __init__(self, answer: Any) -> None:
            self.answer, self.first = answer, True

        def __enter__(self) -> Answer:
            return self

        def __exit__(self, *exc: object) -> None:
            self.answer.close()

        @property
        def length(self) -> int | None:       # what the download checks for a cut connection
            return self.answer.length

        def read(self, size: int) -> bytes:
            if self.first:
                self.first = False
                both_writing.wait()
            return bytes(self.answer.read(size))

    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: Answer(real_urlopen(*a, **k)))
    data = make_wheel("acme", "1.0")
    with CountingServer() as server:
        server.routes["/acme-1.0-py3-none-any.whl"] = ("application/octet-stream", data)
        locked = LockedFile("acme", "1.0", "acme-1.0-py3-none-any.whl", hashlib.sha256(data).hexdigest(),
                            server.url("/acme-1.0-py3-none-any.whl"), "wheel")
        with ThreadPoolExecutor(2) as pool:
            builds = [pool.submit(fetch_files, [locked], tmp_path / name) for name in ("first", "second")]
            for build in builds:
                build.result(timeout=60)
        assert server.count("/acme-1.0-py3-none-any.whl") == 2          # control: both downloaded it
    assert [(tmp_path / n / locked.filename).read_bytes() for n in ("first", "second")] == [data, data]
    assert [p.name for p in (tmp_path / "cache").rglob("acme-1.0*")] == [locked.filename]   # no part left


@pytest.fixture(scope="module")
def base39(docker_client: docker.DockerClient) -> str:
    return ensure_image(python="3.9")


def test_an_environment_is_built_from_its_lock_and_never_resolved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   docker_client: docker.DockerClient,
                                                                   base39: str) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    # a recipe that uv cannot resolve (no such mpmath): only a lock can make its environment
    env = Environment(key="acme/lib 2.0 py3.9", python_requested="3.9", pins=("mpmath==99.0",), as_of="2020-12-12",
                      version_of=("acme/lib", "2.0"), setup_commit="0" * 40)
    task = _task(env, tmp_path)
    with pytest.raises(EnvironmentUnsupported, match="mpmath"):             # control: resolving fails
        ensure_venv_image(task, base39, client=docker_client)
    key, recipe = lock_identity(task, env)
    inputs = LockInputs(recipe, "2020-12-13T00:00:00Z", "written by hand", "none", (), env.pins)
    lock = Lock(key, inputs, toolchain=locked_files(["pip==20.3.3", "setuptools==51.1.1", "wheel==0.36.2"], "3.9"),
                packages=locked_files(["six==1.16.0"], "3.9"))
    store_lock(lock)
    built_before = image_exists(docker_client, venv_tag(lock, base39))   # the tag is the lock's: a shared daemon
    said: list[str] = []                                                # may hold it from an earlier run
    tag = ensure_venv_image(task, base39, client=docker_client, progress=said.append)
    assert tag == venv_tag(lock, base39)
    assert sum(s.startswith("building environment") for s in said) == (0 if built_before else 1), said
    assert not any("resolving" in s for s in said), said
    out = docker_client.containers.run(tag, ["python", "-c", "import six, sys; print(six.__version__, sys.prefix)"],
                                       remove=True, network_disabled=True, labels={"harness.test": "1"})
    assert out.decode().split() == ["1.16.0", "/opt/harness/venv"]
    again: list[str] = []                                    # a second task of the lock builds nothing
    assert ensure_venv_image(dataclasses.replace(task, id="acme__lib-2"), base39, client=docker_client,
                             progress=again.append) == tag and again == []


def test_the_project_itself_is_never_locked_even_when_a_dependency_requires_it(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # packaging's own tests run on pytest, which requires packaging: the venv must not hold a copy that the
    # project's editable install (run as the sandbox's user) would have to uninstall
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = tmp_path / "packaging"
    root.mkdir()
    (root / "pyproject.toml").write_text('[build-system]\nrequires = ["flit_core >=3.3"]\n'
                                         'build-backend = "flit_core.buildapi"\n[project]\nname = "packaging"\n')
    env = Environment(key="own", python_requested="3.9", pins=("pytest==7.4.2",), as_of="2023-10-02",
                      any_requirements_file=False)
    task = _task(env, root)
    key, recipe = lock_identity(task, env)
    lock = make_lock(task, env, key, recipe, "base:1")
    names = {f.name for f in lock.packages}
    assert "pytest" in names and "pluggy" in names and "packaging" not in names
    assert any("packaging, the project itself" in note for note in lock.outcome.notes)
    assert "flit-core" in names                            # its build backend is there, for the offline install
    control = dataclasses.replace(env, pins=("pytest==7.4.2", "attrs==23.1.0"))   # another project's view:
    (root / "pyproject.toml").write_text('[project]\nname = "acme"\n')          # packaging is just a dependency
    key, recipe = lock_identity(_task(control, root), control)
    assert "packaging" in {f.name for f in make_lock(_task(control, root), control, key, recipe, "base:1").packages}


def test_preflight_counts_one_environment_per_version(tmp_path: Path, docker_client: docker.DockerClient) -> None:
    rows = _rows(("django/django", "3.1"))[:3] + _rows(("django/django", "4.0"))[:1]
    tasks = []
    for row in rows:
        env = swebench.environment_of(row, swebench.spec_of(row), "3.9")
        assert env is not None
        tasks.append(_task(env, tmp_path, str(row["instance_id"])))
    _, counts = estimate_build_bytes(docker_client, tasks, load({})[0])
    assert counts["resolved environment(s)"] == 2         # django 3.1 and 4.0, whatever the instances


def _lock_versions() -> ModuleType:
    path = Path(__file__).parents[2] / "bench" / "lock_versions.py"
    spec = importlib.util.spec_from_file_location("lock_versions", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_shipped_lock_without_its_setup_commit_is_made_from_the_newest_row_of_the_version(tmp_path: Path) -> None:
    # django 3.0's was made from its oldest row (May 2019), before setup.py required asgiref: later rows failed
    clone, commit = _project(tmp_path / "acme__lib", "2020-01-01T00:00:00Z", [])
    rows = [{"instance_id": f"acme__lib-{n}", "created_at": when, "environment_setup_commit": "f" * 40}
            for n, when in ((1, "2019-05-28T00:00:00Z"), (2, "2019-09-04T08:30:14Z"), (3, "2019-06-10T00:00:00Z"))]
    lock_row = _lock_versions().lock_row
    assert lock_row(rows, clone)["instance_id"] == "acme__lib-2"
    at_hand = [{**row, "environment_setup_commit": commit} for row in rows]   # the commit's own tree is read then
    assert lock_row(at_hand, clone)["instance_id"] == "acme__lib-1"
