"""The stand-in interpreter behaves as the requested one where grading can see it: real test runners in
real sandboxes of instance images on Python 3.9, one built for a recipe that asks for 3.6 (shimmed) and
one for a recipe that asks for 3.9 (the control), on a tiny project and on django 3.0's own suite."""

from __future__ import annotations

import subprocess
import sys
import uuid
import zipfile
from contextlib import ExitStack
from pathlib import Path

import pytest
from docker import DockerClient

from harness.container_scripts import standin as container_standin
from harness.core.sources import extract_tarball
from harness.core.task import Environment, Task
from harness.environments import ensure_task_image
from harness.environments.recipe import VENV
from harness.environments.standin import shims, stand_in, standin_files
from harness.errors import TaskError
from harness.evaluation.log_parsers import parse_django
from harness.evaluation.report import InstanceRecord, build_report, read_done, write_done
from sandbox.api import SandboxSpec
from sandbox.docker_sandbox import DockerSandbox
from sandbox.images import ensure_image
from tests.evaluation.conftest import SWEBENCH_DATA, TEST_LABELS

SHORT_DESCRIPTION = "unittest_short_description"
CODE_TYPE = "code_type_without_posonlyargcount"
QUEUE = "queue_after_fork_new_condition"
DEMO_TEST = '''\
import unittest


class Described(unittest.TestCase):
    def test_on_the_first_line(self):
        """Docstring on the first line."""

    def test_on_the_next_line(self):
        """
        Docstring whose text starts on the line after its quotes.
        """

    def test_undocumented(self):
        pass
'''
# `python -m unittest -v` (verbosity 2, as django's runtests.py --verbosity 2) on Python 3.6, 3.7 and 3.8
AS_36 = ["test_on_the_first_line (tests.test_demo.Described)",
         "Docstring on the first line. ... ok",
         "test_on_the_next_line (tests.test_demo.Described) ... ok",
         "test_undocumented (tests.test_demo.Described) ... ok"]
# ... and on Python 3.9 (bpo-39450): the second test's name alone, then its docstring's first text line
AS_39 = ["test_on_the_first_line (tests.test_demo.Described)",
         "Docstring on the first line. ... ok",
         "test_on_the_next_line (tests.test_demo.Described)",
         "Docstring whose text starts on the line after its quotes. ... ok",
         "test_undocumented (tests.test_demo.Described) ... ok"]
PYTEST_IDS = ["PASSED tests/test_demo.py::Described::test_on_the_first_line",
              "PASSED tests/test_demo.py::Described::test_on_the_next_line",
              "PASSED tests/test_demo.py::Described::test_undocumented"]


def test_shims_apply_only_to_an_interpreter_newer_than_the_one_asked_for() -> None:
    assert shims("3.6", "3.9") == shims("3.5", "3.11") == (SHORT_DESCRIPTION, CODE_TYPE, QUEUE)
    # bpo-39450 reached 3.7 and 3.8 in bug-fix releases: django 4.0's published lists (made on 3.8) name
    # such tests by their docstrings, as 3.9 does; PEP 570's code objects came with 3.8
    assert shims("3.7", "3.9") == (CODE_TYPE, QUEUE) and shims("3.8", "3.9") == (QUEUE,)
    assert shims("3.9", "3.11") == ()
    assert shims("3.9", "3.9") == shims("3.10", "3.9") == shims("3.9", "3.11") == ()
    assert stand_in("3.6", "3.9") and stand_in("3.10", "3.9") and not stand_in("3.9", "3.9.2")
    files = standin_files("3.6", "3.9")
    assert sorted(files) == [f"{VENV}/lib/python3.9/site-packages/harness-standin.pth",
                             f"{VENV}/lib/python3.9/site-packages/harness_standin.py"]
    assert files[f"{VENV}/lib/python3.9/site-packages/harness-standin.pth"] == \
        b"import harness_standin; harness_standin.install('3.6')\n"
    assert standin_files("3.9", "3.9") == standin_files("3.10", "3.9") == {}
    with pytest.raises(TaskError, match=r"'3\.x' is not major\.minor: expected e\.g\. '3\.6'"):
        shims("3.x", "3.9")
    for shim in container_standin.SHIMS:      # each names the CPython change that made it
        assert shim.change.startswith(("bpo-", "gh-")) and shim.since > (3, 5), shim.name


def _unittest_on_the_host(requested: str | None, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """`python -m unittest -v` of the demo test in a fresh host interpreter, the shims installed first
    (as the .pth does) as if it were 3.9 standing in for `requested`."""
    (tmp_path / "tests").mkdir(exist_ok=True)
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "test_demo.py").write_text(DEMO_TEST)
    folder = Path(container_standin.__file__).parent
    setup = (f"import sys; sys.path.insert(0, {str(folder)!r}); import standin; "
             f"print(standin.install({requested!r}, (3, 9)), 'unittest' in sys.modules); " if requested else "")
    code = setup + "import unittest; unittest.main(module=None, argv=['x', '-v', 'tests.test_demo'])"
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)


def test_the_shim_patches_unittest_lazily_in_a_fresh_interpreter(tmp_path: Path) -> None:
    shimmed = _unittest_on_the_host("3.6", tmp_path)
    assert shimmed.returncode == 0, shimmed.stderr
    # nothing imported ahead: unittest is not in sys.modules after install, only patched once imported
    assert shimmed.stdout == f"[{SHORT_DESCRIPTION!r}, {CODE_TYPE!r}, {QUEUE!r}] False\n"
    assert "Docstring whose text" not in shimmed.stderr and "test_on_the_next_line" in shimmed.stderr
    plain = _unittest_on_the_host(None, tmp_path)            # control: the interpreter's own behaviour
    assert plain.returncode == 0 and "Docstring whose text starts on the line after its quotes." in plain.stderr
    same = _unittest_on_the_host("3.9", tmp_path)            # no shim for the version that is running
    assert same.stdout == "[] False\n" and "Docstring whose text starts" in same.stderr


CLOUDPICKLE_PROBE = """
import sys
sys.path[:0] = ["/workspace/shim", "/workspace/site"]
import standin
print(standin.install(sys.argv[1]))
try:
    import cloudpickle
except TypeError as exc:
    print("import failed:", exc)
    raise SystemExit(0)
import pickle, subprocess, types
from cloudpickle import cloudpickle as module
print("proxy" if module.types is not types else "standard types")
def outer():
    base = 40
    return lambda x: x + base + 1        # a closure: cloudpickle sets its cell with its template code
data = cloudpickle.dumps(outer())
child = ("import sys; sys.path[:0] = ['/workspace/shim', '/workspace/site']; import standin; "
         "standin.install(sys.argv[1]); import pickle; print(pickle.loads(sys.stdin.buffer.read())(1))")
loaded = subprocess.run([sys.executable, "-c", child, sys.argv[1]], input=data, capture_output=True)
print(loaded.stdout.decode().strip())
print(isinstance(outer.__code__, module.types.CodeType), module.types.CodeType is types.CodeType)
"""


def _wheel(name: str, version: str, into: Path) -> None:
    """`name` `version` from PyPI, unpacked into `into/site` (a wheel is a zip of the importable files)."""
    got = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-d",
                          str(into / "dl"), f"{name}=={version}"], capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr[-2000:]
    with zipfile.ZipFile(next((into / "dl").glob("*.whl"))) as wheel:
        wheel.extractall(into / "site")


@pytest.mark.parametrize("version, requested, said", [
    # scikit-learn 0.21 and joblib 0.13 vendor cloudpickle 0.6.1: on 3.9 its import fails
    ("0.6.1", "3.6", [str([SHORT_DESCRIPTION, CODE_TYPE, QUEUE]), "proxy", "42", "True False"]),
    ("0.6.1", "3.9", ["[]", "import failed: an integer is required (got type bytes)"]),     # control: no shim
    # a cloudpickle that imports on 3.9 runs as it is, shim or not
    ("1.6.0", "3.6", [str([SHORT_DESCRIPTION, CODE_TYPE, QUEUE]), "standard types", "42", "True True"]),
])
def test_old_cloudpickle_imports_and_round_trips_a_closure_on_the_stand_in(
        tmp_path: Path, docker_client: DockerClient, version: str, requested: str, said: list[str]) -> None:
    """The real cloudpickle release from PyPI, in a sandbox of the Python 3.9 image: a closure pickled, then
    loaded in a fresh process of the same interpreter (as joblib's workers do)."""
    project = tmp_path / "p"
    (project / "shim").mkdir(parents=True)
    (project / "shim" / "standin.py").write_text(Path(container_standin.__file__).read_text())
    (project / "probe.py").write_text(CLOUDPICKLE_PROBE)
    _wheel("cloudpickle", version, project)
    with ExitStack() as stack:
        box = _sandbox(stack, ensure_image(python="3.9"), project)
        ran = box.exec(f"python3 probe.py {requested}", timeout=120)
    assert ran.exit_code == 0, ran.stderr.text[-2000:]
    assert ran.stdout.text.splitlines() == said, ran.stdout.text + ran.stderr.text[-2000:]

JOBLIB_PROBE = """
def outer():
    base = 40
    return lambda x: x + base        # a closure, pickled by value to the workers
try:
    from joblib import Parallel, delayed
    print(Parallel(n_jobs=2, backend="loky")(delayed(outer())(i) for i in range(4)))
except Exception as exc:
    print(type(exc).__name__)
"""
# the shims for the requested version at every interpreter start (joblib's workers are fresh ones), as the
# venv's .pth installs them; a control leaves one of them out
SITECUSTOMIZE = """import os, sys, standin
standin.install(os.environ["HARNESS_TEST_REQUESTED"])
for finder in sys.meta_path:
    getattr(finder, "pending", {}).pop(os.environ.get("HARNESS_TEST_LEAVE_OUT", ""), None)
"""


@pytest.mark.parametrize("requested, leave_out, said", [
    ("3.6", "-", "[40, 41, 42, 43]"),
    ("3.6", "multiprocessing.queues", "TerminatedWorkerError"),     # control: the workers cannot rebuild queues
    ("3.9", "-", "TypeError"),                                       # control: no shim; cloudpickle's import
])
def test_joblib_0_13_runs_a_closure_in_loky_workers_on_the_stand_in(
        tmp_path: Path, docker_client: DockerClient, requested: str, leave_out: str, said: str) -> None:
    """joblib 0.13.2 from PyPI (scikit-learn 0.21 vendors the same joblib, its cloudpickle 0.6.1 and its
    loky): `Parallel(n_jobs=2)` of a closure in a sandbox of the 3.9 image, as scikit-learn 0.21's
    `test_feature_union_parallel` runs it; both shims act (cloudpickle's code objects, loky's queues)."""
    project = tmp_path / "p"
    (project / "shim").mkdir(parents=True)
    (project / "shim" / "standin.py").write_text(Path(container_standin.__file__).read_text())
    (project / "shim" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    (project / "probe.py").write_text(JOBLIB_PROBE)
    _wheel("joblib", "0.13.2", project)
    with ExitStack() as stack:
        box = _sandbox(stack, ensure_image(python="3.9"), project)
        ran = box.exec(f"PYTHONPATH=/workspace/shim:/workspace/site HARNESS_TEST_REQUESTED={requested} "
                       f"HARNESS_TEST_LEAVE_OUT={leave_out} python3 probe.py", timeout=300)
    assert ran.exit_code == 0, ran.stderr.text[-2000:]
    assert ran.stdout.text.splitlines()[-1] == said, ran.stdout.text + ran.stderr.text[-3000:]

def _sandbox(stack: ExitStack, image: str, project: Path) -> DockerSandbox:
    """A started sandbox of `image` holding `project`, closed when `stack` closes."""
    spec = SandboxSpec(image=image, session=f"test-{uuid.uuid4().hex[:8]}", project_dir=project,
                       labels=dict(TEST_LABELS))
    return stack.enter_context(DockerSandbox(spec))


def _demo(root: Path) -> Path:
    (root / "demo").mkdir(parents=True)
    (root / "demo" / "__init__.py").write_text("")
    (root / "tests").mkdir()
    (root / "tests" / "__init__.py").write_text("")
    (root / "tests" / "test_demo.py").write_text(DEMO_TEST)
    (root / "setup.py").write_text("from setuptools import setup\n"
                                   "setup(name='demo', version='0.1', packages=['demo'])\n")
    return root


def _demo_task(repo: Path, requested: str) -> Task:
    env = Environment(key="standin demo 0.1", python_requested=requested, pins=("pytest",), as_of="2021-06-01")
    return Task(id=f"standin-demo-{requested}", problem_statement="", repo_dir=repo, python="3.9",
                install_cmd="python -m pip install -e .", environment=env, extra={"version": "0.1"})


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(("test_", "Docstring"))]


def test_unittest_verbose_output_on_the_stand_in_is_the_requested_versions(tmp_path: Path,
                                                                           docker_client: DockerClient) -> None:
    repo = _demo(tmp_path / "demo")
    base39 = ensure_image(python="3.9")
    with ExitStack() as stack:
        shimmed = _sandbox(stack, ensure_task_image(_demo_task(repo, "3.6"), base39, client=docker_client), repo)
        control = _sandbox(stack, ensure_task_image(_demo_task(repo, "3.9"), base39, client=docker_client), repo)
        _compare(shimmed, control)


def _compare(shimmed: DockerSandbox, control: DockerSandbox) -> None:
    verbose = "python -m unittest -v tests.test_demo"
    run = shimmed.exec(verbose, timeout=120)
    assert run.exit_code == 0 and "Ran 3 tests" in run.stderr.text, run.stderr.text
    assert _lines(run.stderr.text) == AS_36
    plain = control.exec(verbose, timeout=120)                 # without the shim: what 3.9 prints
    assert plain.exit_code == 0 and _lines(plain.stderr.text) == AS_39, plain.stderr.text
    # a process started through a link to the venv's python from elsewhere (tox-current-env) is shimmed too
    linked = shimmed.exec("mkdir -p /tmp/tox/bin && ln -s /opt/harness/venv/bin/python /tmp/tox/bin/python && "
                          f"/tmp/tox/bin/{verbose}", timeout=120)
    assert linked.exit_code == 0 and _lines(linked.stderr.text) == AS_36, linked.stderr.text
    # nothing is imported ahead, and the shim is the venv's alone (the system interpreter is as shipped)
    probe = shimmed.exec("python -c 'import sys; print(\"unittest\" in sys.modules)' && /usr/bin/python3 -c "
                         "'import harness_standin' 2>&1 | tail -1", timeout=60)
    assert probe.stdout.text.splitlines() == ["False", "ModuleNotFoundError: No module named 'harness_standin'"]
    # pytest names tests by node id, whatever the docstrings: the same with and without the shim
    for sandbox in (shimmed, control):
        ran = sandbox.exec("python -m pytest -rA -p no:cacheprovider tests/test_demo.py", timeout=120)
        assert ran.exit_code == 0, ran.stdout.text[-2000:]
        assert [line for line in ran.stdout.text.splitlines() if line.startswith("PASSED")] == PYTEST_IDS


def test_django_names_docstring_tests_as_the_published_lists_do(tmp_path: Path, docker_client: DockerClient) -> None:
    """django 3.0 asks for Python 3.6. Its autoreload tests have docstrings that start on the line after
    their quotes; the published PASS_TO_PASS lists (django-11422, django-11583) name them
    ``test_check_errors (utils_tests.test_autoreload.TestIterModulesAndFiles)``, as 3.6 printed them."""
    repo = tmp_path / "django__django-11099"
    extract_tarball(SWEBENCH_DATA / "repos" / "django__django-11099.tar.gz", repo, tmp_path)
    env = Environment(key="django/django 3.0", python_requested="3.6", as_of="2019-03-20T03:46:18Z")
    task = Task(id="django__django-11099", problem_statement="", repo_dir=repo, python="3.9",
                install_cmd="python -m pip install -e .", environment=env, extra={"version": "3.0"})
    with ExitStack() as stack:
        sandbox = _sandbox(stack, ensure_task_image(task, ensure_image(python="3.9"), client=docker_client), repo)
        run = sandbox.exec("./tests/runtests.py --settings=test_sqlite --parallel 1 --verbosity 2 "
                           "utils_tests.test_autoreload.TestIterModulesAndFiles", timeout=600)
    assert run.exit_code == 0, run.stderr.text[-3000:]
    log = run.stdout.text + run.stderr.text
    got = parse_django(log)
    names = [f"{name} (utils_tests.test_autoreload.TestIterModulesAndFiles)"
             for name in ("test_check_errors", "test_check_errors_catches_all_exceptions", "test_file_added")]
    assert {name: got.get(name) for name in names} == dict.fromkeys(names, "PASSED"), log[-3000:]
    assert "When a file is added, it's returned by iter_all_python_module_files()." not in log


def test_the_report_lists_the_instances_that_ran_on_a_stand_in_with_their_shims(tmp_path: Path) -> None:
    shimmed = InstanceRecord("django-1", "resolved", "gold", python_requested="3.6", python_used="3.9",
                             stand_in=True, shims=[SHORT_DESCRIPTION])
    unshimmed = InstanceRecord("xarray-1", "resolved", "gold", python_requested="3.10", python_used="3.9",
                               stand_in=True)
    native = InstanceRecord("sympy-1", "unresolved", "gold", python_requested="3.9", python_used="3.9",
                            stand_in=False)
    folder = tmp_path / "django-1"
    folder.mkdir()
    write_done(folder, shimmed)
    assert read_done(folder) == shimmed              # the fields survive the record and --resume
    report = build_report(["django-1", "xarray-1", "sympy-1"],
                          {r.instance_id: r for r in (shimmed, unshimmed, native)}, "gold")
    assert (report.stand_in_instances, report.stand_in_ids) == (2, ["django-1", "xarray-1"])
    assert report.instances["django-1"]["shims"] == [SHORT_DESCRIPTION]
    assert (report.instances["xarray-1"]["stand_in"], report.instances["xarray-1"]["shims"]) == (True, [])
    assert report.instances["sympy-1"]["stand_in"] is False
