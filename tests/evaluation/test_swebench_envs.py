"""Resolved environments on real SWE-bench sources: a venv environment image shared per recipe, a thin
instance image per task whose install products reach the sandbox's /workspace, one real test of the
project passing in it; a setup.py that never runs on the host; unsupported recipes said precisely."""

from __future__ import annotations

import dataclasses
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from harness.config import Config
from harness.core.sources import extract_tarball
from harness.core.task import Environment, Task
from harness.environments import (
    EnvironmentBuildError,
    EnvironmentUnsupported,
    ensure_task_image,
    ensure_venv_image,
    environment_lock,
    sandbox_image,
)
from harness.environments.lock import lock_from_text, shipped_locks
from harness.environments.recipe import INSTALL_FAILED, env_lines, system_packages, unsupported
from harness.environments.sdist_image import ensure_sdists_image, sdists_tag
from harness.environments.tags import KIND_LABEL
from sandbox.api import SandboxSpec
from sandbox.docker_sandbox import DockerSandbox
from sandbox.images import BASE_LABEL, ensure_image, image_exists, prune
from tests.evaluation.conftest import SWEBENCH_DATA, TEST_LABELS

SWEBENCH = SWEBENCH_DATA
INSTALL = "python -m pip install -e ."


@pytest.fixture(scope="module")
def base39(docker_client: docker.DockerClient) -> str:
    return ensure_image(python="3.9")


def _source(instance_id: str, root: Path) -> Path:
    dest = root / instance_id
    extract_tarball(SWEBENCH / "repos" / f"{instance_id}.tar.gz", dest, root)
    return dest


def _task(instance_id: str, repo: Path, env: Environment, version: str, install: str = INSTALL) -> Task:
    return Task(id=instance_id, problem_statement="", repo_dir=repo, python="3.9", install_cmd=install,
                environment=env, extra={"version": version})


@pytest.fixture
def box(docker_client: docker.DockerClient) -> Iterator[object]:
    opened: list[DockerSandbox] = []

    def start(image: str, project: Path) -> DockerSandbox:
        spec = SandboxSpec(image=image, session=f"test-{uuid.uuid4().hex[:8]}", project_dir=project,
                           labels={"harness.test": "1"})
        sandbox = DockerSandbox(spec)
        opened.append(sandbox)
        sandbox.start()
        return sandbox

    yield start
    for sandbox in opened:
        sandbox.close()


def _timed(task: Task, base: str, client: docker.DockerClient,
           said: list[str] | None = None) -> tuple[str, str, float, float]:
    progress = said.append if said is not None else (lambda _: None)
    started = time.monotonic()
    env_tag = ensure_venv_image(task, base, client=client, progress=progress)
    middle = time.monotonic()
    tag = ensure_task_image(task, base, client=client, env_tag=env_tag, progress=progress)
    return env_tag, tag, middle - started, time.monotonic() - middle


def _builds(said: list[str], kind: str) -> int:
    return sum(1 for line in said if line.startswith(f"building {kind} "))


def test_django_instances_share_one_environment_and_run_their_tests(tmp_path, docker_client, base39, box, request):
    repo = _source("django__django-11099", tmp_path)
    (repo / "RUN.txt").write_text(uuid.uuid4().hex)   # this run's own instance images, whatever the daemon holds
    env = Environment(key="django/django 3.0", python_requested="3.6", as_of="2019-03-20T03:46:18Z",
                      test_env=(("DJANGO_TEST_MARK", 'a "quoted" $value'),))
    first = _task("django__django-11099", repo, env, "3.0")
    said: list[str] = []
    env_tag, tag, env_time, inst_time = _timed(first, base39, docker_client, said)
    print(f"\ndjango 3.0: environment {env_tag} {env_time:.1f}s, instance {tag} {inst_time:.1f}s")
    assert _builds(said, "instance") == 1     # (the environment image may exist from an earlier run)
    request.addfinalizer(lambda: docker_client.images.remove(tag, force=True))

    other = tmp_path / "other" / "django"
    shutil.copytree(repo, other)
    (other / "NOTE.txt").write_text("a second instance of the same version\n")
    second = dataclasses.replace(first, id="django-second", repo_dir=other)
    again: list[str] = []
    env_tag2, tag2, env_time2, inst_time2 = _timed(second, base39, docker_client, again)
    print(f"second instance: environment {env_time2:.1f}s (reused), instance {inst_time2:.1f}s")
    assert env_tag2 == env_tag and tag2 != tag
    assert (_builds(again, "environment"), _builds(again, "instance")) == (0, 1), again   # no environment build
    labels = docker_client.images.get(tag2).labels
    assert labels[KIND_LABEL] == "instance" and labels[BASE_LABEL] == base39
    assert docker_client.images.get(env_tag).labels[KIND_LABEL] == "environment"
    env_layers = docker_client.images.get(env_tag).attrs["RootFS"]["Layers"]
    instance_layers = docker_client.images.get(tag2).attrs["RootFS"]["Layers"]
    assert instance_layers[:-1] == env_layers                      # one layer over the environment's
    print(f"instance layer: {docker_client.images.get(tag2).history()[0]['Size'] / 1e6:.1f} MB")
    docker_client.images.remove(tag2)

    sandbox = box(tag, repo)
    probe = sandbox.exec('cd / && python -c "import django, sys; print(django.__file__, sys.prefix)" && '
                         'ls -d /workspace/Django.egg-info && echo "$DJANGO_TEST_MARK" && command -v pip && '
                         'command -v django-admin && stat -c "%U %a" /opt/harness/project/workspace.tar', timeout=60)
    assert probe.exit_code == 0, probe.stderr.text
    assert probe.stdout.text.splitlines() == ["/workspace/django/__init__.py /opt/harness/venv",
                                              "/workspace/Django.egg-info", 'a "quoted" $value', "/usr/local/bin/pip",
                                              "/usr/local/bin/django-admin", "root 444"]
    # tox-current-env runs the tests through a link to the venv's python made elsewhere (.tox/py39/bin/python),
    # which Python 3.9 starts without the venv; the instance gives it the venv's packages (and the system
    # interpreter through any other link stays without them)
    linked = sandbox.exec("mkdir -p .tox/py39/bin /tmp/sys/bin && "
                          "ln -s /opt/harness/venv/bin/python .tox/py39/bin/python && "
                          "ln -s /usr/bin/python3 /tmp/sys/bin/python && cd / && /workspace/.tox/py39/bin/python -c "
                          "'import django, sqlparse, pytz; print(django.__file__)' && "
                          "! /tmp/sys/bin/python -c 'import pytz' 2>/dev/null && rm -rf /workspace/.tox", timeout=60)
    assert (linked.exit_code, linked.stdout.text) == (0, "/workspace/django/__init__.py\n"), linked.stderr.text
    run = sandbox.exec("./tests/runtests.py --settings=test_sqlite --parallel 1 basic", timeout=600)
    assert run.exit_code == 0, run.stderr.text[-3000:]
    assert "OK" in run.stderr.text


def test_sympy_instance_runs_bin_test(tmp_path, docker_client, base39, box):
    repo = _source("sympy__sympy-20590", tmp_path)
    env = Environment(key="sympy/sympy 1.7", python_requested="3.9", pins=("mpmath>=0.19",),
                      as_of="2020-12-12T18:18:38Z",
                      test_env=(("PYTHONWARNINGS", "ignore::UserWarning,ignore::SyntaxWarning"),))
    env_tag, tag, env_time, inst_time = _timed(_task("sympy__sympy-20590", repo, env, "1.7"), base39, docker_client)
    print(f"\nsympy 1.7: environment {env_tag} {env_time:.1f}s, instance {tag} {inst_time:.1f}s")
    sandbox = box(tag, repo)
    probe = sandbox.exec("cd / && python -c 'import sympy, mpmath; print(sympy.__file__)' && "
                         "ls -d /workspace/*.egg-info", timeout=120)
    assert probe.exit_code == 0, probe.stderr.text
    assert probe.stdout.text.split() == ["/workspace/sympy/__init__.py", "/workspace/sympy.egg-info"]
    run = sandbox.exec("bin/test sympy/core/tests/test_basic.py", timeout=600)
    assert run.exit_code == 0, run.stdout.text[-3000:]
    assert "tests finished" in run.stdout.text and "failed" not in run.stdout.text.split("tests finished")[1]


def _hostile(root: Path, marker: Path) -> Path:
    (root / "hostile").mkdir(parents=True)
    (root / "hostile" / "__init__.py").write_text("VALUE = 1\n\ndef main():\n    print('hostile-cli ran')\n")
    (root / "setup.py").write_text(
        "import os, pathlib\n"
        f"os.makedirs({str(marker.parent)!r}, exist_ok=True)\n"
        f"pathlib.Path({str(marker)!r}).write_text('setup.py ran')\n"
        "pathlib.Path('ran-in-build.txt').write_text('setup.py ran here')\n"
        "pathlib.Path('/opt/harness/venv/bin/activate').unlink(missing_ok=True)\n"   # a whiteout in the layer
        # the layer is written by root where the install cannot reach: no forged layer
        "try:\n    open('/opt/harness/layer/layer.tar', 'wb').close(); said = 'written'\n"
        "except OSError as exc:\n    said = type(exc).__name__\n"
        "pathlib.Path('layer-probe.txt').write_text(said)\n"
        "from setuptools import setup\n"
        "setup(name='hostile', version='0.1', packages=['hostile'],\n"
        "      entry_points={'console_scripts': ['hostile-cli=hostile:main']})\n")
    return root


def test_setup_py_runs_only_in_the_network_less_build_and_a_failed_install_is_a_build_error(
        tmp_path, docker_client, base39, box):
    marker = tmp_path / "host" / "marker.txt"
    repo = _hostile(tmp_path / "hostile", marker)
    env = Environment(key="hostile 0.1", python_requested="3.9", as_of="2024-01-01")
    tag = ensure_task_image(_task("hostile", repo, env, "0.1"), base39, client=docker_client)
    assert not marker.exists() and not marker.parent.exists()
    sandbox = box(tag, repo)
    probe = sandbox.exec("cat ran-in-build.txt; echo; ls -d hostile.egg-info; "
                         "cd / && python -c 'import hostile; print(hostile.__file__)' && hostile-cli && "
                         "test ! -e /opt/harness/venv/bin/activate && echo removed && cat /workspace/layer-probe.txt "
                         "&& echo && test ! -e /opt/harness/layer && echo no-layer-folder", timeout=60)
    assert probe.exit_code == 0, probe.stderr.text
    assert probe.stdout.text.split("\n")[:7] == ["setup.py ran here", "hostile.egg-info",
                                                 "/workspace/hostile/__init__.py", "hostile-cli ran", "removed",
                                                 "PermissionError", "no-layer-folder"]
    broken = _task("hostile-broken", repo, env, "0.1", install="echo 'cannot build this' >&2; exit 3")
    with pytest.raises(EnvironmentBuildError) as caught:
        ensure_task_image(broken, base39, client=docker_client)
    assert not isinstance(caught.value, EnvironmentUnsupported)
    assert INSTALL_FAILED in str(caught.value) and "cannot build this" in str(caught.value)


def test_an_sdist_only_dependency_is_built_offline_and_no_remembered_failure_changes_its_lock(
        tmp_path, monkeypatch, docker_client, base39, box):
    repo = tmp_path / "needs-markupsafe"
    (repo / "app").mkdir(parents=True)
    (repo / "app" / "__init__.py").write_text("import markupsafe\n")
    (repo / "requirements.txt").write_text("markupsafe<2\n")   # 1.1.1 of 2019 has no wheel for 3.9: its sdist
    env = Environment(key="markupsafe sdist", python_requested="3.9", as_of="2019-06-01")
    task = _task("sdist", repo, env, "0.1", install="")
    locks = []
    for cache in ("clean", "seen-failures"):
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / cache))
        if cache == "seen-failures":   # what earlier versions of the harness remembered from other environments
            (tmp_path / cache / "harness" / "resolutions").mkdir(parents=True)
            (tmp_path / cache / "harness" / "resolutions" / "failed-sdists.json").write_text('{"3.9": ["markupsafe"]}')
        locks.append(environment_lock(task, base39, client=docker_client))
    assert locks[0].text() == locks[1].text()
    assert [(f.name, f.version, f.kind) for f in locks[0].packages] == [("markupsafe", "1.1.1", "sdist")]
    assert locks[0].outcome.sdists_failed == () and locks[0].outcome.forward == ()   # it built: nothing moved
    tag = ensure_task_image(task, base39, client=docker_client)
    sandbox = box(tag, repo)
    probe = sandbox.exec("python -c 'import app, markupsafe; print(markupsafe.__version__)'", timeout=60)
    assert (probe.exit_code, probe.stdout.text.strip()) == (0, "1.1.1"), probe.stderr.text


def test_a_compiled_project_is_built_with_the_toolchain_variant_and_its_extension_loads(tmp_path, docker_client,
                                                                                      box):
    repo = tmp_path / "cext"
    (repo / "fast").mkdir(parents=True)
    (repo / "fast" / "__init__.py").write_text("from fast._speed import add\n")
    (repo / "fast" / "speed.c").write_text(
        "#include <Python.h>\n"
        "static PyObject *add(PyObject *self, PyObject *args) { long a, b;\n"
        "  if (!PyArg_ParseTuple(args, \"ll\", &a, &b)) return NULL; return PyLong_FromLong(a + b); }\n"
        "static PyMethodDef methods[] = {{\"add\", add, METH_VARARGS, \"\"}, {NULL, NULL, 0, NULL}};\n"
        "static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, \"_speed\", NULL, -1, methods};\n"
        "PyMODINIT_FUNC PyInit__speed(void) { return PyModule_Create(&mod); }\n")
    (repo / "setup.py").write_text(
        "from setuptools import Extension, setup\n"
        "setup(name='fast', version='0.1', packages=['fast'],\n"
        "      ext_modules=[Extension('fast._speed', ['fast/speed.c'])])\n")
    env = Environment(key="compiled test", python_requested="3.9", as_of="2023-06-01", compiled=True)
    task = Task(id="cext", problem_statement="", repo_dir=repo, python="3.9", environment=env,
                install_cmd="python -m pip install --no-build-isolation -e .", extra={"version": "0.1"})
    base = sandbox_image(Config(), "3.9", task=task)
    assert "-plus-" in base and docker_client.images.get(base).labels["harness.image.packages"] == \
        "build-essential pkg-config python3-dev"
    sandbox = box(ensure_task_image(task, base, client=docker_client), repo)
    probe = sandbox.exec("python -c 'import fast; print(fast.add(40, 2))' && ls fast/", timeout=60)
    assert probe.exit_code == 0 and probe.stdout.text.startswith("42\n"), probe.stderr.text
    assert ".so" in probe.stdout.text        # built in place by the instance build, carried by the overlay
    # control: the plain sandbox image has no compiler
    plain = box(ensure_image(python="3.9"), repo)
    assert plain.exec("command -v gcc || echo none", timeout=30).stdout.text.strip() == "none"


def test_unsupported_recipes_say_what_is_missing(tmp_path):
    blocked = Environment(key="k", python_requested="3.11", offline_blocker="it downloads FreeType at build")
    with pytest.raises(EnvironmentUnsupported, match="unsupported offline: it downloads FreeType at build"):
        unsupported("t", blocked)
    unsupported("t", Environment(key="k", python_requested="3.9", apt_packages=("git",), compiled=True))  # control
    # the recipe's Debian packages and a toolchain go into the base image; a package the mirror does not
    # have makes the instance unsupported with debootstrap's words, naming it
    assert system_packages(Environment(key="k", python_requested="3.9", apt_packages=("libgdal-dev",),
                                       compiled=True)) == ("build-essential", "libgdal-dev", "pkg-config",
                                                           "python3-dev")
    missing = Task(id="t", problem_statement="", repo_dir=tmp_path, python="3.9",
                   environment=Environment(key="k", python_requested="3.9", apt_packages=("no-such-package-zz",)))
    with pytest.raises(EnvironmentUnsupported, match="no-such-package-zz") as caught:
        sandbox_image(Config(), "3.9", task=missing)
    assert "could not be made offline" in str(caught.value)
    # a blocked recipe is refused before anything is built for it (matplotlib's texlive base is 1.7 GB)
    both = dataclasses.replace(missing, environment=dataclasses.replace(
        missing.environment, offline_blocker="it downloads FreeType at build"))
    with pytest.raises(EnvironmentUnsupported, match="FreeType") as blocked_first:
        sandbox_image(Config(), "3.9", task=both)
    assert "could not be made offline" not in str(blocked_first.value)   # the variant was never tried
    repo = tmp_path / "repo"
    repo.mkdir()
    # a resolution that fails (no such release) is unsupported, with uv's words
    stale = Environment(key="k", python_requested="3.9", pins=("mpmath==99.0",), as_of="2020-12-12")
    with pytest.raises(EnvironmentUnsupported, match="mpmath"):
        ensure_venv_image(_task("t", repo, stale, "1.7"), "unused", client=docker.from_env())


def test_test_variables_are_checked_and_quoted():
    assert env_lines((("A", 'x "y" $z \\ w'),), "t") == 'ENV A="x \\"y\\" \\$z \\\\ w"\n'
    assert env_lines((), "t") == ""
    with pytest.raises(EnvironmentBuildError, match="newlines") as caught:
        env_lines((("B", "one\nRUN evil"), ("1X", "v")), "t")
    assert "'1X' is not a plain variable name" in str(caught.value)


def test_prune_removes_a_stale_environment_and_its_instance_images_in_one_pass(docker_client, base39):
    gone, mark = "harness-sandbox:py3.9-debootstrap-000000000000", f"harness.prune-test={uuid.uuid4().hex[:8]}"
    made, parent = [], base39
    for kind, base in (("environment", gone), ("instance", gone), ("instance", base39)):
        container = docker_client.containers.create(parent, ["true"], labels={"harness.test": "1"})
        try:
            tag = f"harness-env:prune-test-{uuid.uuid4().hex[:8]}"
            container.commit(repository=tag.split(":")[0], tag=tag.split(":")[1], changes=[
                f'LABEL harness.managed=true {mark} {BASE_LABEL}="{base}" {KIND_LABEL}={kind}'])
        finally:
            container.remove(force=True)
        made.append(tag)
        parent = made[0]
    try:
        removed, in_use = prune(docker_client, label=mark)
        assert sorted(removed) == sorted(made[:2]) and in_use == []   # the instance of a current base stays
        assert docker_client.images.get(made[2])
    finally:
        for tag in reversed(made):
            try:
                docker_client.images.remove(tag)
            except docker.errors.NotFound:
                pass


def test_an_sdist_that_breaks_beside_the_venvs_packages_is_built_with_its_build_requirements_alone(
        docker_client, base39):
    """pytest 4.5's lock: atomicwrites 1.4.1 (an sdist only) fails `setup.py egg_info` in the venv beside
    the lock's importlib_metadata 0.17, which setuptools' vendored one meets ("'str' object has no
    attribute 'name'"), so no lock of pytest 4.5 could be made. Built again in pip's isolated build
    environment (its build requirements alone, from the wheelhouse), it builds."""
    lock = lock_from_text((shipped_locks() / "pytest-dev__pytest" / "4.5-py3.9-x86_64.json").read_text(), "4.5")
    assert [f.filename for f in lock.sdists()] == ["atomicwrites-1.4.1.tar.gz"]
    assert any(f.name == "importlib-metadata" and f.version == "0.17" for f in lock.packages)
    tag = sdists_tag(lock, base39)
    existed = image_exists(docker_client, tag)
    try:
        assert ensure_sdists_image(lock, base39, client=docker_client, task_id="pytest-dev__pytest-5103") == tag
        built = docker_client.containers.run(tag, ["ls", "/opt/harness/env/built"], remove=True,
                                             network_disabled=True, labels=TEST_LABELS).decode()
        assert built.startswith("atomicwrites-1.4.1-") and built.strip().endswith(".whl"), built
    finally:
        if not existed:
            docker_client.images.remove(tag, force=True)
