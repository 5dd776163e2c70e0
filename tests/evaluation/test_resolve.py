"""Declarations read statically from hostile trees, and resolved with the real uv against the real PyPI."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from harness.core.sources import cache_dir
from harness.core.task import Environment, Task
from harness.environments.declarations import Declarations, read_declarations
from harness.environments.errors import EnvironmentBuildError, EnvironmentUnsupported
from harness.environments.instance_image import _on_another_interpreter
from harness.environments.own_version import TreeVersion, tree_version
from harness.environments.recipe_pins import build_only_wheels, forward_or_leave_out, resolved_pins
from harness.environments.resolution import ResolveError, exclude_newer
from harness.environments.resolver import resolve, resolve_tree, run_uv, uv_binary
from harness.environments.wheelhouse import WheelhouseError
from harness.evaluation import swebench
from tests.approval.helpers import CountingServer, make_wheel
from tests.evaluation.conftest import SWEBENCH_DATA
from tests.evaluation.hostile_index import evil_sdist

SWEBENCH = SWEBENCH_DATA


class CountingRunner:
    """The real uv runner, counting its runs."""

    def __init__(self) -> None:
        self.runs = 0

    def __call__(self, cmd: list[str], stdin: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        self.runs += 1
        return run_uv(cmd, stdin, cwd)


def tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def origins(found: Declarations) -> dict[str, str]:
    return {d.requirement: d.origin for d in found.requirements}


def test_requirements_files_are_read_with_their_includes_and_without_options(tmp_path: Path) -> None:
    root = tree(tmp_path, {
        "requirements.txt": "# top\n-e .\n--index-url https://example.invalid/simple\n-r requirements/base.txt\n"
                            "requests>=2.0 ; python_version < \"4\"  # inline comment\nclick \\\n  >=7\n",
        "requirements/base.txt": "six==1.16.0 --hash=sha256:1e61c374 \\\n    --hash=sha256:8abb2f1d\n"
                                 "-c constraints.txt\n",
        "requirements-dev.txt": "pytest\ngit+https://github.com/x/y.git\n./local/pkg\n",
        "ci/extra.txt": "tox\n"})
    found = read_declarations(root, files=["ci/extra.txt"])
    assert origins(found) == {"requests>=2.0; python_version < \"4\"": "requirements.txt:5",
                              "click>=7": "requirements.txt:6", "six==1.16.0": "requirements/base.txt:1",
                              "pytest": "requirements-dev.txt:1", "tox": "ci/extra.txt:1"}
    assert {u.origin for u in found.unreadable} == {"requirements-dev.txt:2", "requirements-dev.txt:3"}
    assert all("URL or path" in u.reason for u in found.unreadable)


def test_includes_and_links_leading_outside_the_tree_are_refused_unread(tmp_path: Path) -> None:
    root = tree(tmp_path / "project", {"requirements.txt": "-r ../../etc/passwd\n--requirement /etc/passwd\nsix\n"})
    (root / "requirements-link.txt").symlink_to("/etc/passwd")
    found = read_declarations(root)
    assert found.texts() == ["six"]
    refused = {u.origin: u.reason for u in found.unreadable}
    assert set(refused) == {"../../etc/passwd", "/etc/passwd", "requirements-link.txt"}
    assert "not a relative path inside" in refused["../../etc/passwd"]
    assert "symbolic link" in refused["requirements-link.txt"]
    assert not any("root" in d.requirement for d in found.requirements)


def test_hostile_shapes_of_pyproject_and_setup_py_are_reported_not_raised(tmp_path: Path) -> None:
    root = tree(tmp_path, {"pyproject.toml": "project = 3\ntool = [1]\n", "setup.py": "setup(\x00)\n",
                           "setup.cfg": "[options]\ninstall_requires = attr: pkg.REQS\n"})
    found = read_declarations(root)
    assert found.texts() == []
    assert {u.origin for u in found.unreadable} == {"setup.py", "setup.cfg [options] install_requires"}


def test_the_recipes_sed_edits_are_applied_to_the_declarations_it_reads(tmp_path: Path) -> None:
    # sphinx 3.x's recipe caps sphinxcontrib-applehelp in setup.py before installing; resolved from the
    # unedited file, the environment held 1.0.8 and the install found no release <= 1.0.7
    root = tree(tmp_path, {"setup.py": "from setuptools import setup\nsetup(install_requires=[\n"
                                       "    'sphinxcontrib-applehelp',\n    'Jinja2>=2.3',\n    'packaging',\n])\n"})
    edits = ("sed -i 's/sphinxcontrib-applehelp/sphinxcontrib-applehelp<=1.0.7/' setup.py",
             "sed -i \"s/'packaging',/'packaging', 'markupsafe<=2.0.1',/\" setup.py",
             "sed -i 's/requires = \\[\"setuptools\",/requires = \\[\"setuptools==68.0.0\",/' pyproject.toml",
             "grep -q x setup.py && sed -i 's/Jinja2/jinja9/' setup.py")      # not a plain edit: ignored
    assert read_declarations(root, edits=edits).texts() == [
        "sphinxcontrib-applehelp<=1.0.7", "Jinja2>=2.3", "packaging", "markupsafe<=2.0.1"]
    assert read_declarations(root).texts() == ["sphinxcontrib-applehelp", "Jinja2>=2.3", "packaging"]  # control
    assert (root / "setup.py").read_text().count("<=") == 0          # the tree itself is never changed


def test_setup_requires_are_read_because_setuptools_fetches_them_at_install(tmp_path: Path) -> None:
    # xarray 0.16's setup.cfg: `setup_requires = setuptools >= 41.2, setuptools_scm`; offline, setuptools
    # can only fetch them from the wheelhouse
    root = tree(tmp_path, {"setup.cfg": "[options]\ninstall_requires = numpy\nsetup_requires =\n"
                                        "    setuptools >= 41.2\n    setuptools_scm\n",
                           "setup.py": "from setuptools import setup\nsetup(setup_requires=['cython'])\n"})
    assert origins(read_declarations(root)) == {
        "numpy": "setup.cfg [options] install_requires", "setuptools>=41.2": "setup.cfg [options] setup_requires",
        "setuptools_scm": "setup.cfg [options] setup_requires", "cython": "setup.py setup_requires"}


def test_setup_cfg_install_requires_and_extras_only_when_asked(tmp_path: Path) -> None:
    root = tree(tmp_path, {"setup.cfg": "[metadata]\nname = x\n[options]\ninstall_requires =\n    attrs>=19\n"
                                        "    importlib-metadata; python_version < \"3.8\"\n"
                                        "[options.extras_require]\ntesting =\n    pytest>=4\ndocs = sphinx\n"})
    assert read_declarations(root).texts() == ["attrs>=19", "importlib-metadata; python_version < \"3.8\""]
    found = read_declarations(root, extras=["Testing"])
    assert origins(found)["pytest>=4"] == "setup.cfg [options.extras_require] testing"
    assert "sphinx" not in found.texts()


def test_pyproject_dependencies_and_optional_dependencies_only_when_asked(tmp_path: Path) -> None:
    root = tree(tmp_path, {"pyproject.toml": "[project]\nname = \"x\"\ndependencies = [\"httpx>=0.23\", \"anyio\"]\n"
                                             "[project.optional-dependencies]\ntest = [\"pytest\"]\n"})
    assert read_declarations(root).texts() == ["httpx>=0.23", "anyio"]
    assert origins(read_declarations(root, extras=["test"]))["pytest"] == \
        "pyproject.toml [project] optional-dependencies test"


HOSTILE_SETUP = """\
import pathlib
pathlib.Path(__file__).with_name("EXECUTED").write_text("setup.py ran")
from setuptools import setup
BASE = ["requests>=2.0", "six"]
setup(name="x", install_requires=BASE + ["click"], extras_require={"test": ["pytest"]})
"""


def test_setup_py_is_read_with_ast_and_never_executed(tmp_path: Path) -> None:
    root = tree(tmp_path / "read", {"setup.py": HOSTILE_SETUP})
    found = read_declarations(root, extras=["test"])
    assert origins(found) == {"requests>=2.0": "setup.py install_requires", "six": "setup.py install_requires",
                              "click": "setup.py install_requires", "pytest": "setup.py extras_require test"}
    assert found.unreadable == ()
    assert not (root / "EXECUTED").exists()
    control = tree(tmp_path / "run", {"setup.py": HOSTILE_SETUP})
    subprocess.run([sys.executable, "setup.py", "--name"], cwd=control, capture_output=True, timeout=120, check=False)
    assert (control / "EXECUTED").read_text() == "setup.py ran"   # the same file, run, does write it


def test_dynamic_setup_py_is_reported_not_statically_readable(tmp_path: Path) -> None:
    root = tree(tmp_path / "a", {"setup.py": "from setuptools import setup\nREQS = ['six']\nREQS.append('x')\n"
                                             "setup(install_requires=REQS, extras_require=get_extras())\n"})
    found = read_declarations(root, extras=["test"])
    assert found.texts() == []
    assert {u.origin for u in found.unreadable} == {"setup.py install_requires", "setup.py extras_require"}
    assert all("not statically readable" in u.reason for u in found.unreadable)
    for change in ["REQS[0] = 'x'", "extend(REQS)", "for REQS in []: pass"]:
        changed = tree(tmp_path / "c", {"setup.py": f"REQS = ['six']\n{change}\nsetup(install_requires=REQS)\n"})
        assert read_declarations(changed).texts() == [], change
    kept = tree(tmp_path / "d", {"setup.py": "REQS = ['six']\nsetup(install_requires=REQS)\n"})
    assert read_declarations(kept).texts() == ["six"]   # the control: bound once, never changed, is read
    kwargs = tree(tmp_path / "b", {"setup.py": "from setuptools import setup\nsetup(**load())\n"})
    assert "setup(**...)" in read_declarations(kwargs).unreadable[0].reason


def test_exclude_newer_counts_a_date_to_the_end_of_its_utc_day() -> None:
    assert exclude_newer("2019-06-01") == "2019-06-02T00:00:00Z"
    assert exclude_newer("2019-03-20T03:46:18Z") == "2019-03-20T03:46:18Z"
    assert exclude_newer("2019-03-20T05:46:18+02:00") == "2019-03-20T03:46:18Z"
    with pytest.raises(ResolveError, match="not ISO 8601"):
        exclude_newer("yesterday")


def test_flask_as_of_2019_resolves_once_then_comes_from_the_cache(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first = CountingRunner()
    result = resolve(["flask"], "3.9", "2019-06-01", runner=first)
    pins = dict(p.split("==") for p in result.pins)
    assert pins["flask"].startswith("1.0.") and pins["werkzeug"].startswith("0.15.")
    assert result.exclude_newer == "2019-06-02T00:00:00Z" and result.platform.endswith("manylinux_2_31")
    assert "--no-build" in result.command and not result.from_cache and first.runs >= 1
    # MarkupSafe 1.1.1 has no cp39 wheel: pinned, and listed to be built in a container, never dropped
    assert [(s.name, s.version) for s in result.sdist_only] == [("markupsafe", "1.1.1")]
    assert result.sdist_only[0].filename == "MarkupSafe-1.1.1.tar.gz" and "markupsafe==1.1.1" not in result.wheel_pins()
    assert len(list((cache_dir() / "resolutions").glob("*.json"))) == 1

    again = CountingRunner()
    cached = resolve(["flask"], "3.9", "2019-06-01", runner=again)
    assert again.runs == 0 and cached.from_cache and cached == result

    pinned = CountingRunner()   # other pins are other inputs: uv runs, and the pin overrides flask's range
    other = resolve(["flask"], "3.9", "2019-06-01", pins=["werkzeug==0.15.2"], runner=pinned)
    assert pinned.runs >= 1 and "werkzeug==0.15.2" in other.pins


def test_a_damaged_cache_entry_is_resolved_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UV_EXTRA_INDEX_URL", "http://127.0.0.1:9/simple")   # would fail uv if it leaked in
    first = resolve(["six"], "3.11", "2019-06-01", cache=tmp_path)
    assert first.pins == ("six==1.12.0",)
    (entry,) = tmp_path.glob("*.json")
    entry.write_text('{"pins": ')
    runner = CountingRunner()
    assert resolve(["six"], "3.11", "2019-06-01", cache=tmp_path, runner=runner) == first and runner.runs == 1


def test_an_unsatisfiable_requirement_fails_with_uvs_own_words(tmp_path: Path) -> None:
    with pytest.raises(ResolveError) as caught:
        resolve(["flask==99.0"], "3.11", "2019-06-01", cache=tmp_path)
    assert isinstance(caught.value, WheelhouseError)
    assert "flask" in caught.value.said and "No solution found" in caught.value.said
    assert "before 2019-06-02T00:00:00Z" in str(caught.value)
    runner = CountingRunner()      # uv's verdict is kept: the same inputs fail again without asking it
    with pytest.raises(ResolveError) as again:
        resolve(["flask==99.0"], "3.11", "2019-06-01", cache=tmp_path, runner=runner)
    assert runner.runs == 0 and again.value.said == caught.value.said and str(again.value) == str(caught.value)


def test_a_failure_that_is_not_uvs_verdict_is_not_kept(tmp_path: Path) -> None:
    def offline(cmd: list[str], stdin: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(cmd, 2, "", "error: Failed to fetch: `https://pypi.org/simple/six/`")
    with pytest.raises(ResolveError):
        resolve(["six"], "3.11", "2019-06-01", cache=tmp_path, runner=offline)
    assert not list(tmp_path.glob("*.failed.json"))
    assert resolve(["six"], "3.11", "2019-06-01", cache=tmp_path).pins == ("six==1.12.0",)


def test_refused_inputs_never_reach_uv(tmp_path: Path) -> None:
    runner = CountingRunner()
    for reqs, python, message in [(["six"], "3.8", "expected one of"), (["-e ."], "3.9", "not a requirement"),
                                  (["x @ https://example.invalid/x.tar.gz"], "3.9", "direct reference")]:
        with pytest.raises(ResolveError, match=message):
            resolve(reqs, python, "2020-01-01", runner=runner, cache=tmp_path)
    assert runner.runs == 0


def test_django_11099_is_read_statically_and_resolved_as_of_its_creation(tmp_path: Path) -> None:
    row = next(json.loads(line) for line in (SWEBENCH / "lite-test.jsonl").read_text().splitlines()
               if '"django__django-11099"' in line)
    with tarfile.open(SWEBENCH / "repos" / "django__django-11099.tar.gz") as tf:
        tf.extractall(tmp_path, filter="data")
    root = next(p for p in tmp_path.iterdir() if p.is_dir())
    before = sorted(os.listdir(root))
    found, result = resolve_tree(root, "3.9", row["created_at"], extras=["bcrypt"])
    assert origins(found) == {"pytz": "setup.py install_requires", "sqlparse": "setup.py install_requires",
                              "bcrypt": "setup.py extras_require bcrypt"}
    assert sorted(os.listdir(root)) == before   # nothing written into the tree (no egg-info: nothing ran)
    pins = dict(p.split("==") for p in result.pins)
    assert result.exclude_newer == "2019-03-20T03:46:18Z"
    assert pins["pytz"] == "2018.9" and pins["sqlparse"] == "0.3.0" and pins["bcrypt"] == "3.1.6"
    # bcrypt has an abi3 wheel; its cffi and pycparser of March 2019 have only sdists for Python 3.9
    assert {s.name for s in result.sdist_only} == {"cffi", "pycparser"}
    assert all(s.dependencies_known and s.sha256 for s in result.sdist_only)


def test_markupsafe_older_than_its_newest_sdists_gets_more_stand_ins_when_uv_names_it_again(tmp_path: Path) -> None:
    said: list[str] = []
    result = resolve(["markupsafe<1.0"], "3.9", "2019-06-01", cache=tmp_path, progress=said.append)
    assert result.pins == ("markupsafe==0.23",)
    assert [(s.name, s.version) for s in result.sdist_only] == [("markupsafe", "0.23")]
    assert [line.split(" have no wheel")[0] for line in said[1:]] == \
        ["resolve: markupsafe 1.1.1, 1.1.0, 1.0", "resolve: markupsafe 0.23, 0.22, 0.21"]


def serve_sdist(index: CountingServer, name: str, data: bytes) -> str:
    """`data` as the only file of `name` on the index, in PEP 691 JSON; the simple page's URL."""
    filename = f"{name}-1.0.tar.gz"
    index.routes[f"/files/{filename}"] = ("application/gzip", data)
    page = {"meta": {"api-version": "1.1"}, "name": name, "versions": ["1.0"],
            "files": [{"filename": filename, "url": f"../../files/{filename}", "requires-python": None,
                       "hashes": {"sha256": hashlib.sha256(data).hexdigest()}, "yanked": False,
                       "upload-time": "2019-01-01T00:00:00.000000Z"}]}
    index.routes[f"/simple/{name}/"] = ("application/vnd.pypi.simple.v1+json", json.dumps(page).encode())
    return index.url("/simple")


def sdist(name: str, pkg_info: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = pkg_info.encode()
        info = tarfile.TarInfo(f"{name}-1.0/PKG-INFO")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_an_sdist_whose_build_would_run_code_is_resolved_without_building_it(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    with CountingServer() as index:
        simple = serve_sdist(index, "evil", evil_sdist(marker))
        result = resolve(["evil"], "3.11", "2019-06-01", index_url=simple, cache=tmp_path / "cache")
        assert result.pins == ("evil==1.0",) and not marker.exists()
        assert [(s.name, s.version, s.dependencies_known) for s in result.sdist_only] == [("evil", "1.0", False)]
        assert index.count("/files/evil-1.0.tar.gz") == 1   # read once as an archive, never unpacked or built
        # control: the same resolution with builds allowed runs the sdist's code on this host
        control = [uv_binary(), "pip", "compile", "-", "--no-config", "--index-url", simple, "--python-version",
                   "3.11", "--cache-dir", str(tmp_path / "uv")]
        proc = subprocess.run(control, input="evil\n", capture_output=True, text=True, timeout=300, check=False,
                              cwd=tmp_path, env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"})
        assert marker.read_text() == "package code ran here", proc.stderr


def test_an_sdist_declaring_a_url_dependency_is_refused(tmp_path: Path) -> None:
    with CountingServer() as index:
        url = index.url("/other-1.0.tar.gz")
        simple = serve_sdist(index, "sneaky", sdist("sneaky", "Metadata-Version: 2.1\nName: sneaky\nVersion: 1.0\n"
                                                             f"Requires-Dist: other @ {url}\n\n"))
        with pytest.raises(ResolveError, match="a direct reference"):
            resolve(["sneaky"], "3.11", "2019-06-01", index_url=simple, cache=tmp_path)
        assert index.count("/other-1.0.tar.gz") == 0


def test_an_exact_pin_is_taken_whatever_its_date(tmp_path: Path) -> None:
    # sympy's specification pins mpmath 1.3.0 (2023) for instances of 2020: the pin is not cut off by date
    result = resolve(["sympy==1.7"], "3.9", "2020-12-12", pins=["mpmath==1.3.0"], cache=tmp_path)
    assert "mpmath==1.3.0" in result.pins and "sympy==1.7" in result.pins
    with pytest.raises(ResolveError):      # control: the same release as a range is cut off by the date
        resolve(["mpmath>=1.3"], "3.9", "2020-12-12", cache=tmp_path)


def test_an_exact_pin_newer_than_the_date_with_only_an_sdist_gets_a_stand_in(tmp_path: Path) -> None:
    # pytest 5.2's specification pins atomicwrites 1.4.1 (2022, sdist only) for an instance of 2019
    result = resolve(["py>=1.5"], "3.9", "2019-10-01", pins=["atomicwrites==1.4.1"], cache=tmp_path)
    assert "atomicwrites==1.4.1" in result.pins
    assert [(s.name, s.version) for s in result.sdist_only] == [("atomicwrites", "1.4.1")]
    with pytest.raises(ResolveError, match="exclude-newer"):   # control: as a range it is cut off by the date
        resolve(["atomicwrites>=1.4.1"], "3.9", "2019-10-01", cache=tmp_path)


def test_an_exact_pin_with_only_an_sdist_gets_a_stand_in_though_later_releases_have_wheels(tmp_path: Path) -> None:
    # astropy 1.3's recipe pins pytest-astropy 0.2.1 (sdist only); its releases from 0.3 on have wheels
    result = resolve(["pytest-astropy"], "3.9", "2021-05-28", pins=["pytest-astropy==0.2.1"], cache=tmp_path)
    assert "pytest-astropy==0.2.1" in result.pins
    assert [(s.name, s.version) for s in result.sdist_only] == [("pytest-astropy", "0.2.1")]


def test_an_exact_pin_without_a_wheel_for_the_target_takes_the_first_of_its_series_with_one(tmp_path: Path) -> None:
    # scikit-learn 0.2x's recipe pins numpy 1.19.2 (made for Python 3.6); its first cp39 wheel is 1.19.3
    said: list[str] = []
    result = resolve([], "3.9", "2019-06-01", pins=["numpy==1.19.2"], cache=tmp_path, progress=said.append)
    assert result.pins == ("numpy==1.19.3",) and result.sdist_only == ()
    assert any("numpy==1.19.2 has no wheel for Python 3.9" in s and "numpy==1.19.3" in s for s in said), said
    kept = resolve([], "3.9", "2021-06-01", pins=["numpy==1.20.3"], cache=tmp_path)   # control: it has one
    assert kept.pins == ("numpy==1.20.3",)


def test_a_recipes_unversioned_test_tool_is_taken_no_older_than_the_interpreters_floor(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # psf/requests 0.14 (2012) is tested with `pytest -rA` on Python 3.9: pytest of 2012 has no `pytest`
    # command and does not run on 3.9; the official harness installs a current pytest
    setup_py = "from setuptools import setup\nsetup(install_requires=['chardet'])\n"
    repo = tree(tmp_path / "requests", {"setup.py": setup_py, "requirements.txt": "rudolf2\n"})
    env = Environment(key="psf/requests 0.14 py3.9", python_requested="3.9", pins=("pytest",), as_of="2012-10-01",
                      any_requirements_file=False)
    task = Task(id="psf__requests-863", problem_statement="", repo_dir=repo, python="3.9", environment=env)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    pins, sdists, toolchain = resolved_pins(task, env, lambda _: None)
    pinned = dict(p.split("==") for p in pins) | {s.name: s.version for s in sdists}
    assert pinned["pytest"].startswith("6.2") and pinned["chardet"].startswith(("1.", "2.")), pinned
    assert "rudolf2" not in pinned and toolchain
    old = resolve(["chardet"], "3.9", "2012-10-01", pins=["pytest"], cache=tmp_path)   # control: by the date
    assert dict(p.split("==") for p in old.pins)["pytest"].startswith("2.")


def test_a_forward_release_that_does_not_fit_the_date_is_left_out(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # django 3.0 (May 2019) on 3.9: maxminddb's sdists did not build, its first cp39 wheel (2.5.0) requires a
    # setuptools of 2023 while the recipe's setuptools is as of the date: geoip2's maxminddb is left out
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    env = Environment(key="k", python_requested="3.6", as_of="2019-05-27", requirements=("geoip2", "setuptools"))
    task = Task(id="django__django-11422", problem_statement="", repo_dir=tmp_path, python="3.9", environment=env)
    said: list[str] = []
    forward, leave_out = {"maxminddb"}, set[str]()
    with pytest.raises(EnvironmentUnsupported, match="maxminddb"):   # control: forward alone does not resolve
        resolved_pins(task, env, said.append, forward=forward)
    pins, _, _ = forward_or_leave_out(task, env, said.append, forward, leave_out)
    assert leave_out == {"maxminddb"} and not forward
    assert any(p.startswith("geoip2==") for p in pins) and not any(p.startswith("maxminddb") for p in pins)
    assert any("leaving them out" in s for s in said), said


def test_build_requirements_resolved_on_their_own_add_wheels_the_venv_does_not_get(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # astropy 4.3 builds against oldest-supported-numpy (numpy 1.19.3 on 3.9) and its recipe runs numpy 1.25.2
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    repo = tree(tmp_path / "astropy", {"pyproject.toml": "[build-system]\nrequires = [\"oldest-supported-numpy\"]\n"})
    env = Environment(key="k", python_requested="3.9", pins=("numpy==1.25.2",), as_of="2021-06-01")
    task = Task(id="astropy__astropy-12907", problem_statement="", repo_dir=repo, python="3.9", environment=env)
    extra = build_only_wheels(task, env, ["numpy==1.25.2"], lambda _: None)
    assert "numpy==1.19.3" in extra and any(p.startswith("oldest-supported-numpy==") for p in extra)
    assert build_only_wheels(task, env, extra, lambda _: None) == []     # control: nothing differs


def test_pins_whose_dependencies_are_newer_than_the_date_move_the_date_to_the_newest_pin(tmp_path: Path) -> None:
    # xarray's recipe pins dask 2022.8.1 (which needs fsspec >= 0.6, of October 2019) and pandas 1.5.3
    # (January 2023) for an instance of 2019-10-01
    said: list[str] = []
    result = resolve(["numpy>=1.14", "pandas>=0.24"], "3.9", "2019-10-01", cache=tmp_path, progress=said.append,
                     pins=["dask==2022.8.1", "numpy==1.23.0", "pandas==1.5.3"])
    assert {"dask==2022.8.1", "numpy==1.23.0", "pandas==1.5.3"} <= set(result.pins)
    assert result.exclude_newer.startswith("2023-01"), result.exclude_newer
    assert any("resolving as of then" in s for s in said), said


def test_an_exact_pin_among_the_projects_own_requirements_is_taken_whatever_its_date(tmp_path: Path) -> None:
    # pylint 2.15's requirements_test_min.txt pins astroid 2.12.2, released eight days after the instance
    result = resolve(["astroid==2.12.2"], "3.9", "2022-07-03", cache=tmp_path)
    assert "astroid==2.12.2" in result.pins and result.exclude_newer.startswith("2022-07-04")


def test_only_the_listed_requirement_files_are_read_when_asked(tmp_path: Path) -> None:
    # psf/requests 2.3: requirements.txt is the developers' (it names `rudolf2`, which does not exist);
    # the official recipe installs the project and pytest, never that file
    root = tree(tmp_path, {"requirements.txt": "rudolf2\npy==1.4.12\n", "requirements/ci.txt": "tox\n",
                           "tests/requirements/py3.txt": "pytz\n",
                           "setup.py": "from setuptools import setup\nsetup(install_requires=['chardet'])\n"})
    listed = read_declarations(root, files=["tests/requirements/py3.txt"], any_requirements_file=False)
    assert listed.texts() == ["pytz", "chardet"]
    assert set(read_declarations(root).texts()) == {"rudolf2", "py==1.4.12", "tox", "chardet"}   # control


def test_a_forward_package_takes_its_first_release_with_a_wheel_instead_of_an_sdist(tmp_path: Path) -> None:
    # numpy of March 2019 has no wheel for Python 3.9; its first one is 1.19.3 (October 2020)
    said: list[str] = []
    ahead = resolve(["numpy"], "3.9", "2019-03-20", forward=["numpy"], cache=tmp_path, progress=said.append)
    assert ahead.pins == ("numpy==1.19.3",) and ahead.sdist_only == ()
    assert any("first release with one, 1.19.3" in s for s in said), said
    standing_in = resolve(["numpy"], "3.9", "2019-03-20", cache=tmp_path)      # control: without forward
    assert [s.name for s in standing_in.sdist_only] == ["numpy"] and standing_in.pins != ahead.pins


def test_a_recipe_pin_the_projects_edited_requirements_exclude_gives_way_as_the_official_install_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # sphinx 3.x/4.0: the recipe pins Jinja2==3.0.3 and its pre-install edit makes setup.py require Jinja2<3.0;
    # officially the project's install (after the pins) downgrades Jinja2, offline the wheelhouse must hold 2.x
    row = next(json.loads(line) for line in (SWEBENCH / "lite-test.jsonl").read_text().splitlines()
               if '"sphinx-doc__sphinx-8713"' in line)
    with tarfile.open(SWEBENCH / "repos" / "sphinx-doc__sphinx-8713.tar.gz") as tf:
        tf.extractall(tmp_path / "src", filter="data")
    root = next(p for p in (tmp_path / "src").iterdir() if p.is_dir())
    env = swebench.environment_of(row, swebench.spec_of(row), "3.9")
    assert env is not None and "Jinja2==3.0.3" in env.pins
    task = Task(id=row["instance_id"], problem_statement="", repo_dir=root, python="3.9", environment=env)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    said: list[str] = []
    pins, sdists, _ = resolved_pins(task, env, said.append)
    pinned = dict(p.split("==") for p in pins) | {s.name: s.version for s in sdists}
    assert pinned["jinja2"].startswith("2."), pinned
    assert pinned["tox"] == "4.16.0"                                     # the pins it does not contradict stay
    assert any("pins Jinja2==3.0.3, which the project's own requirement Jinja2<3.0 excludes" in s for s in said)



PYTEST_4_5_SETUP_PY = """# -*- coding: utf-8 -*-
from setuptools import setup

# TODO: if py gets upgrade to >=1.6,
#       remove _width_of_current_line in terminal.py
INSTALL_REQUIRES = [
    "py>=1.5.0",
    "six>=1.10.0",
    "packaging",
    "attrs>=17.4.0",
    'more-itertools>=4.0.0,<6.0.0;python_version<="2.7"',
    'more-itertools>=4.0.0;python_version>"2.7"',
    "atomicwrites>=1.0",
    'funcsigs>=1.0;python_version<"3.0"',
    'pathlib2>=2.2.0;python_version<"3.6"',
    'colorama;sys_platform=="win32"',
    "pluggy>=0.12,<1.0",
    "importlib-metadata>=0.12",
    "wcwidth",
]


def main():
    setup(
        use_scm_version={"write_to": "src/_pytest/_version.py"},
        setup_requires=["setuptools-scm", "setuptools>=40.0"],
        package_dir={"": "src"},
        # fmt: off
        extras_require={
            "testing": [
                "argcomplete",
                "hypothesis>=3.56",
                "nose",
                "requests",
                "mock;python_version=='2.7'",
            ],
        },
        # fmt: on
        install_requires=INSTALL_REQUIRES,
    )


if __name__ == "__main__":
    main()
"""      # its environment_setup_commit 693c3b7f61d4


@pytest.mark.parametrize("edited", [False, True])
def test_a_recipe_pin_only_the_setup_commits_own_tree_excludes_stays_in_the_versions_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edited: bool) -> None:
    # pytest 4.5: the recipe pins pluggy==0.11.0 (its row 5103 accepts it: pluggy>=0.9), and the setup commit's
    # tree requires pluggy>=0.12. The official environment holds 0.11.0 and only a row whose tree excludes it
    # replaces it; 0.12.0 would bring importlib_metadata 0.17, which does not import on 3.9. Control: the
    # same exclusion written by the recipe's own pre-install edit (every row's tree) gives the pin way.
    root = tmp_path / "src"
    root.mkdir()
    text = PYTEST_4_5_SETUP_PY.replace('"pluggy>=0.12,<1.0"', '"pluggy>=0.9"') if edited else PYTEST_4_5_SETUP_PY
    (root / "setup.py").write_text(text)
    pins = ("atomicwrites==1.4.1", "attrs==23.1.0", "more-itertools==10.1.0", "pluggy==0.11.0", "py==1.11.0",
            "setuptools==68.0.0", "six==1.16.0", "wcwidth==0.2.6")
    edits = ("sed -i 's/pluggy>=0.9/pluggy>=0.12,<1.0/' setup.py",) if edited else ()
    env = Environment(key="pytest-dev/pytest 4.5", python_requested="3.9", pins=pins, as_of="2019-05-31",
                      pre_install=edits)
    task = Task(id="pytest-dev__pytest-5103", problem_statement="", repo_dir=root, python="3.9", environment=env)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    said: list[str] = []
    got, sdists, _ = resolved_pins(task, env, said.append)
    pinned = dict(p.split("==") for p in got) | {s.name: s.version for s in sdists}
    if edited:
        assert pinned["pluggy"] != "0.11.0" and pinned["pluggy"].startswith("0.1"), pinned
        assert any("pins pluggy==0.11.0, which the project's own requirement pluggy" in s for s in said), said
    else:
        assert pinned["pluggy"] == "0.11.0", pinned
        assert any("keeps the pin as the official one does" in s for s in said), said
    assert pinned["py"] == "1.11.0" and pinned["wcwidth"] == "0.2.6"     # the pins nothing contradicts stay

SKLEARN_0_20_ON_3_9 = """building harness-env:inst-x on harness-env:venv-y failed: the install step exited 1:
Successfully installed scikit-learn
Traceback (most recent call last):
  File "/workspace/sklearn/externals/joblib/externals/cloudpickle/cloudpickle.py", line 148, in _make_cell
    return types.CodeType(
TypeError: an integer is required (got type bytes)

harness: the project does not import: sklearn (from /)"""


@pytest.mark.parametrize("requested, error, unsupported", [
    ("3.6", "TypeError: an integer is required (got type bytes)", True),     # the project predates 3.9
    ("3.9", "TypeError: an integer is required (got type bytes)", False),    # asked for 3.9: our failure
    ("3.6", "ModuleNotFoundError: No module named 'scipy'", False),           # a dependency we should have had
])
def test_a_project_that_does_not_import_on_the_stand_in_interpreter_is_unsupported(
        requested: str, error: str, unsupported: bool) -> None:
    env = Environment(key="scikit-learn/scikit-learn 0.20", python_requested=requested)
    task = Task(id="scikit-learn__scikit-learn-13142", problem_statement="", repo_dir=Path("."), python="3.9",
                environment=env)
    failure = EnvironmentBuildError(SKLEARN_0_20_ON_3_9.replace("TypeError: an integer is required (got type bytes)",
                                                                error))
    judged = _on_another_interpreter(task, env, failure)
    assert isinstance(judged, EnvironmentUnsupported) is unsupported
    if unsupported:
        assert "does not import on Python 3.9, the nearest interpreter available offline to the 3.6" in str(judged)
        assert "TypeError: an integer is required" in str(judged) and "cloudpickle.py" in str(judged)


def _serve_releases(index: CountingServer, name: str, releases: list[tuple[str, str, list[str]]]) -> None:
    """Serve wheels of `name` (version, upload time, Requires-Dist) on a PEP 691 page of `index`."""
    files = []
    for version, uploaded, requires in releases:
        data = make_wheel(name.replace("-", "_"), version, requires=tuple(requires))
        filename = f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
        metadata = "".join(f"{key}: {value}\n" for key, value in [
            ("Metadata-Version", "2.1"), ("Name", name), ("Version", version),
            *[("Requires-Dist", r) for r in requires]]).encode()
        index.routes[f"/files/{filename}"] = ("application/octet-stream", data)
        index.routes[f"/files/{filename}.metadata"] = ("text/plain", metadata)     # PEP 658: read without HEAD
        files.append({"filename": filename, "url": index.url(f"/files/{filename}"), "upload-time": uploaded,
                      "hashes": {"sha256": hashlib.sha256(data).hexdigest()},
                      "core-metadata": {"sha256": hashlib.sha256(metadata).hexdigest()}})
    page = {"meta": {"api-version": "1.1"}, "name": name, "files": files}
    index.routes[f"/simple/{name}/"] = ("application/vnd.pypi.simple.v1+json", json.dumps(page).encode())


def test_a_dependency_requiring_a_newer_release_of_the_project_itself_is_not_chosen(tmp_path: Path) -> None:
    # Sphinx 4.0's plugins: applehelp 1.0.7 requires Sphinx>=5; pip, with the project installed from its
    # tree, takes an older plugin. The tree says 1.4.dev0, the release it precedes is 1.4.
    root = tree(tmp_path / "acme", {
        "setup.py": "import acme\nfrom setuptools import setup\n"
                    "setup(name='Acme', version=acme.__version__, install_requires=['acme-plugin'])\n",
        "acme/__init__.py": "__version__ = '1.4.dev0'\nif True:\n    __version__ = 'computed'\n"})
    own = tree_version(root)
    assert own == TreeVersion("acme", "1.4.dev0", "1.4", "setup.py version=acme.__version__ (acme/__init__.py)")
    with CountingServer() as index:
        _serve_releases(index, "acme", [("2.0", "2020-06-01T00:00:00Z", [])])
        _serve_releases(index, "acme-plugin", [("1.0", "2020-01-01T00:00:00Z", ["acme>=1.0"]),
                                               ("2.0", "2020-06-01T00:00:00Z", ["acme>=2.0"])])
        requirements = read_declarations(root).texts()
        found = resolve(requirements, "3.9", "2020-12-31", project=own.pin(), index_url=index.url("/simple"),
                        cache=tmp_path / "cache")
        # the control: without the project's version the newer plugin is taken, with the index's acme 2.0
        blind = resolve(requirements, "3.9", "2020-12-31", index_url=index.url("/simple"), cache=tmp_path / "cache")
    assert requirements == ["acme-plugin"]
    assert found.pins == ("acme-plugin==1.0",) and found.project == "acme==1.4"
    assert blind.pins == ("acme-plugin==2.0", "acme==2.0") and blind.project == ""


def test_the_projects_own_version_is_read_statically_and_maps_to_a_release(tmp_path: Path) -> None:
    trees: dict[str, tuple[dict[str, str], tuple[str, str, str] | None]] = {
        "pyproject": ({"pyproject.toml": '[project]\nname = "a"\nversion = "2.1rc1"\n'},
                      ("2.1rc1", "2.1", "pyproject.toml [project] version")),
        "cfg-attr": ({"setup.cfg": "[metadata]\nname = a\nversion = attr: a.version.VERSION\n",
                      "src/a/version.py": "VERSION: str = '0.9.post2'\n"},
                     ("0.9.post2", "0.9", "setup.cfg [metadata] version (src/a/version.py)")),
        "cfg-file": ({"setup.cfg": "[metadata]\nname = a\nversion = file: VERSION.txt\n", "VERSION.txt": "3.0.1\n"},
                     ("3.0.1", "3.0.1", "setup.cfg [metadata] version (VERSION.txt)")),
        "sphinx": ({"setup.py": "import sphinx\nsetup(name='Sphinx', version=sphinx.__version__)\n",
                    "sphinx/__init__.py": "__version__ = '4.0.3+'\n"},
                   ("4.0.3+", "4.0.3", "setup.py version=sphinx.__version__ (sphinx/__init__.py)")),
        "flit": ({"pyproject.toml": '[build-system]\nbuild-backend = "flit_core.buildapi"\n[project]\nname = "Sphinx"\n'
                                    'dynamic = ["version"]\n[tool.flit.module]\nname = "sphinx"\n',
                  "sphinx/__init__.py": "__version__ = '7.1.2'\n"},
                 ("7.1.2", "7.1.2", "pyproject.toml (flit) (sphinx/__init__.py)")),
        "scm": ({"pyproject.toml": '[project]\nname = "a"\ndynamic = ["version"]\n[tool.setuptools_scm]\n'}, None),
        "computed": ({"setup.py": "setup(name='a', version=get_version())\n"}, None),
        "placeholder": ({"setup.py": "setup(name='a', version='0.0.0')\n"}, None),
        "not-a-version": ({"setup.py": "setup(name='a', version='1.0\\n--index-url http://x')\n"}, None),
        "outside": ({"setup.cfg": "[metadata]\nname = a\nversion = file: ../../etc/hostname\n"}, None),
        "no-name": ({"setup.py": "setup(version='1.0')\n"}, None),
    }
    for label, (files, expected) in trees.items():
        root = tree(tmp_path / label, files)
        found = tree_version(root)
        assert (None if found is None else (found.declared, found.release, found.origin)) == expected, label
