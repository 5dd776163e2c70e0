"""The built-in SWE-bench spec table: coverage of the published rows, the official facts of the
non-pytest runners, the offline interpreter rule and the error for a version the table does not know."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle

import pytest

from harness.errors import TaskError
from harness.evaluation.specs import (
    AVAILABLE,
    HAND_FIELDS,
    TABLE,
    UnknownSpecError,
    interpreter_for,
    repositories,
    spec_for,
    versions_of,
)
from harness.evaluation.swebench import environment_of, install_extras
from tests.evaluation.conftest import SWEBENCH_DATA

SHARED = SWEBENCH_DATA


def published_rows(name: str) -> list[dict[str, str]]:
    path = SHARED / name
    assert path.is_file(), f"the SWE-bench Lite rows are missing: expected {path} (see the issue's Data section)"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize("name", ["lite-test.jsonl", "lite-dev.jsonl"])
def test_every_published_lite_row_has_a_spec_of_its_repository_and_version(name: str) -> None:
    rows = published_rows(name)
    assert len(rows) > 10
    missing = sorted({(r["repo"], r["version"]) for r in rows} - set(TABLE))
    assert missing == []
    for row in rows:
        spec = spec_for(row["repo"], row["version"])
        assert (spec.repo, spec.version) == (row["repo"], row["version"])
        assert spec.python_used in AVAILABLE


def test_each_table_key_names_its_own_spec_and_the_table_covers_the_official_repositories() -> None:
    assert all((spec.repo, spec.version) == key for key, spec in TABLE.items())
    assert repositories() == [
        "astropy/astropy", "django/django", "marshmallow-code/marshmallow", "matplotlib/matplotlib",
        "mwaskom/seaborn", "pallets/flask", "psf/requests", "pvlib/pvlib-python", "pydata/xarray",
        "pydicom/pydicom", "pylint-dev/astroid", "pylint-dev/pylint", "pytest-dev/pytest", "pyvista/pyvista",
        "scikit-learn/scikit-learn", "sphinx-doc/sphinx", "sqlfluff/sqlfluff", "sympy/sympy"]
    assert len(TABLE) == 282


def test_django_runs_runtests_with_dotted_labels_and_its_own_parser() -> None:
    spec = spec_for("django/django", "3.0")
    assert spec.test_cmd == "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1"
    assert (spec.runner, spec.parser, spec.python, spec.install) == (
        "django", "django", "3.6", "python -m pip install -e .")
    assert dict(spec.env) == {"LANG": "en_US.UTF-8", "LANGUAGE": "en_US:en", "LC_ALL": "en_US.UTF-8"}
    assert spec.packages == "requirements.txt" and spec.package_files == ("tests/requirements/py3.txt",)
    assert spec_for("django/django", "1.9").test_cmd == "./tests/runtests.py --verbosity 2"
    assert spec_for("django/django", "2.2").install == "python setup.py install"
    assert spec_for("django/django", "2.2").apt_packages == ("locales",)
    assert spec_for("django/django", "5.0").python == "3.11"


def test_sympy_runs_bin_test_with_its_warning_filter_in_the_environment() -> None:
    spec = spec_for("sympy/sympy", "1.1")
    assert spec.test_cmd == "bin/test -C --verbose"
    assert (spec.runner, spec.parser) == ("sympy", "sympy")
    assert dict(spec.env) == {"PYTHONWARNINGS": "ignore::UserWarning,ignore::SyntaxWarning"}
    assert spec.packages == ("mpmath", "flake8")
    assert spec.pip_packages == ("mpmath==1.3.0", "flake8-comprehensions")
    newer = spec_for("sympy/sympy", "1.13")
    assert (newer.packages, newer.pip_packages) == ("requirements.txt", ("mpmath==1.3.0",))
    assert versions_of("sympy/sympy") == ["0.7", "1.0", "1.1", "1.2", "1.4", "1.5", "1.6", "1.7", "1.8", "1.9",
                                          "1.10", "1.11", "1.12", "1.13", "1.14"]


def test_each_repository_uses_the_official_log_parser_and_only_three_are_compiled() -> None:
    parsers = {spec.repo: spec.parser for spec in TABLE.values()}
    assert parsers == {
        "astropy/astropy": "pytest_v2", "django/django": "django", "marshmallow-code/marshmallow": "pytest",
        "matplotlib/matplotlib": "matplotlib", "mwaskom/seaborn": "seaborn", "pallets/flask": "pytest",
        "psf/requests": "pytest_options", "pvlib/pvlib-python": "pytest", "pydata/xarray": "pytest",
        "pydicom/pydicom": "pytest_options", "pylint-dev/astroid": "pytest", "pylint-dev/pylint": "pytest_options",
        "pytest-dev/pytest": "pytest", "pyvista/pyvista": "pytest", "scikit-learn/scikit-learn": "pytest_v2",
        "sphinx-doc/sphinx": "pytest_v2", "sqlfluff/sqlfluff": "pytest", "sympy/sympy": "sympy"}
    assert {spec.repo for spec in TABLE.values() if spec.compiled} == {
        "astropy/astropy", "matplotlib/matplotlib", "scikit-learn/scikit-learn"}
    assert {spec.repo for spec in TABLE.values() if spec.runner == "pytest"} == set(parsers) - {
        "django/django", "sympy/sympy"}


def test_official_pins_and_edits_are_kept_per_version() -> None:
    assert spec_for("pallets/flask", "2.0").pip_packages == (
        "setuptools==70.0.0", "Werkzeug==2.3.7", "Jinja2==3.0.1", "itsdangerous==2.1.2", "click==8.0.1",
        "MarkupSafe==2.1.3")
    assert spec_for("pytest-dev/pytest", "6.3").pre_install == ("sed -i 's/>=>=/>=/' setup.cfg",)
    assert spec_for("pytest-dev/pytest", "6.2").pre_install == ()
    sphinx = spec_for("sphinx-doc/sphinx", "3.5")
    assert sphinx.test_cmd == "tox --current-env -epy39 -v --"
    assert sphinx.pre_install[0] == "sed -i 's/pytest/pytest -rA/' tox.ini"
    assert sphinx.pre_install[-1] == (
        "sed -i 's/sphinxcontrib-serializinghtml/sphinxcontrib-serializinghtml<=1.1.9/' setup.py")
    assert spec_for("sphinx-doc/sphinx", "4.1").pre_install[-1].startswith(
        "grep -q 'sphinxcontrib-serializinghtml>=1.1.5' setup.py && ")
    assert spec_for("sphinx-doc/sphinx", "5.0").pre_install == ("sed -i 's/pytest/pytest -rA/' tox.ini",)
    assert spec_for("sphinx-doc/sphinx", "7.2").apt_packages == ("graphviz",)
    astropy = spec_for("astropy/astropy", "5.1")
    assert astropy.pre_install == (
        "sed -i 's/requires = \\[\"setuptools\",/requires = \\[\"setuptools==68.0.0\",/' pyproject.toml",)
    assert spec_for("astropy/astropy", "1.3").test_cmd == "pytest -rA -vv -o console_output_style=classic --tb=no"
    assert spec_for("mwaskom/seaborn", "0.12").install == "python -m pip install -e .[dev]"
    assert "pandas==1.3.5" in spec_for("mwaskom/seaborn", "0.11").pip_packages
    assert spec_for("pydata/xarray", "0.12").package_files == ("ci/requirements/environment.yml", "environment.yml")
    matplotlib = spec_for("matplotlib/matplotlib", "3.5")
    assert matplotlib.system_setup[3] == 'wget -O "$QHULL_TAR" "$QHULL_URL"'
    assert "apt-get" not in " ".join(matplotlib.pre_install + matplotlib.system_setup)
    assert spec_for("psf/requests", "2.3").install == "python -m pip install ."
    assert spec_for("scikit-learn/scikit-learn", "0.20").install == (
        "python -m pip install -v --no-use-pep517 --no-build-isolation -e .")


@pytest.mark.parametrize(("requested", "minimum", "used"), [
    ("3.5", None, "3.9"), ("3.6", None, "3.9"), ("3.8", None, "3.9"), ("3.9", None, "3.9"),
    ("3.10", None, "3.9"), ("3.10.4", None, "3.9"), ("3.10", "3.10", "3.11"), ("3.11", None, "3.11"),
    ("3.12", None, "3.11"), ("3.12", "3.12", "3.13"), ("3.13", None, "3.13"), ("3.14", None, "3.13"),
    ("3.6", "3.11", "3.11"),
])
def test_the_nearest_offline_interpreter_not_below_the_project_minimum_ties_going_down(
        requested: str, minimum: str | None, used: str) -> None:
    assert interpreter_for(requested, minimum=minimum) == used


@pytest.mark.parametrize(("requested", "minimum", "says"), [
    ("2.7", None, "'2.7' is not a Python 3 version"),
    ("python3", None, "'python3' is not a Python 3 version"),
    ("3.11", "3.14", "needs Python 3.14 or newer, and the newest interpreter available offline is 3.13"),
])
def test_an_interpreter_that_cannot_be_served_is_refused_with_the_reason(
        requested: str, minimum: str | None, says: str) -> None:
    with pytest.raises(TaskError) as caught:
        interpreter_for(requested, minimum=minimum)
    assert says in str(caught.value)


def test_specs_record_the_requested_and_the_used_interpreter() -> None:
    cases = {("pydata/xarray", "0.12"): ("3.10", "3.9"), ("sphinx-doc/sphinx", "8.0"): ("3.10", "3.11"),
             ("django/django", "3.0"): ("3.6", "3.9"), ("django/django", "5.0"): ("3.11", "3.11"),
             ("scikit-learn/scikit-learn", "0.22"): ("3.6", "3.9"), ("astropy/astropy", "v5.3"): ("3.10", "3.9")}
    for key, (requested, used) in cases.items():
        spec = spec_for(*key)
        assert (spec.python_requested, spec.python_used) == (requested, used), key
    assert {spec.python_used for spec in TABLE.values()} == {"3.9", "3.11"}


def test_an_unknown_version_names_the_known_ones_and_the_fields_to_give_by_hand() -> None:
    with pytest.raises(UnknownSpecError) as caught:
        spec_for("django/django", "9.9")
    message = str(caught.value)
    assert isinstance(caught.value, TaskError)
    assert (caught.value.repo, caught.value.version) == ("django/django", "9.9")
    assert "no built-in SWE-bench spec for django/django version '9.9'" in message
    assert "versions known for django/django: 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 1.10, 1.11, 2.0" in message
    assert message.count("5.2") == 1
    assert all(f"{field}" in message for field in HAND_FIELDS)
    assert '"test_cmd": "pytest -rA"' in message


def test_an_unknown_repository_lists_the_repositories_of_the_table() -> None:
    with pytest.raises(UnknownSpecError) as caught:
        spec_for("octo/widgets", "1.0")
    message = str(caught.value)
    assert "octo/widgets is not a repository of the table (known: astropy/astropy, django/django," in message
    assert "install_cmd, test_cmd, python, requirements" in message
    assert versions_of("octo/widgets") == []


def test_a_spec_env_cannot_change_in_place_and_survives_pickle_copy_and_json() -> None:
    spec = spec_for("sympy/sympy", "1.9")
    with pytest.raises(TypeError, match="cannot be changed"):
        spec.env["PYTHONWARNINGS"] = "default"  # type: ignore[index]
    assert pickle.loads(pickle.dumps(spec)) == spec
    assert copy.deepcopy(spec) == spec
    assert json.loads(json.dumps(dataclasses.asdict(spec)))["env"] == {
        "PYTHONWARNINGS": "ignore::UserWarning,ignore::SyntaxWarning"}
    changed = dataclasses.replace(spec, env={"A": "1"})
    assert dict(changed.env) == {"A": "1"} and dict(spec.env) != {"A": "1"}
    assert hash(spec) == hash(copy.deepcopy(spec))


def test_the_extras_an_install_command_asks_of_the_project_are_read_with_its_declarations() -> None:
    assert install_extras(spec_for("mwaskom/seaborn", "0.12").install) == ("dev",)   # flake8 etc. are dev extras
    assert install_extras(spec_for("astropy/astropy", "4.3").install) == ("test",)
    assert install_extras('python -m pip install --no-build-isolation -e ".[dev,doc]"') == ("dev", "doc")
    assert install_extras(spec_for("django/django", "3.0").install) == ()
    assert install_extras("pip install ./vendor/x.[a]") == ()     # another project's extras, not this one's
    assert environment_of({"repo": "mwaskom/seaborn", "version": "0.12"}, spec_for("mwaskom/seaborn", "0.12"),
                          "3.9").extras == ("dev",)


def test_the_cpus_a_spec_grades_with_reach_the_environment() -> None:
    # pylint 2.15 skips its multiprocessing tests ("Need 2 or more cores") that PASS_TO_PASS lists
    assert environment_of({"repo": "pylint-dev/pylint", "version": "2.15"}, spec_for("pylint-dev/pylint", "2.15"),
                          "3.9").cpus == 2
    assert environment_of({"repo": "django/django", "version": "3.0"}, spec_for("django/django", "3.0"),
                          "3.9").cpus is None
